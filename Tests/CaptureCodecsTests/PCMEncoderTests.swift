import CaptureCodecs
import CaptureCore
import XCTest

/// PCM passes through byte for byte, and width conversions are exact where they can be and
/// rounded and clipped as documented where they cannot.
final class PCMEncoderTests: XCTestCase {
    private func encode(
        _ bytes: [UInt8], from input: PCMSampleFormat, to output: PCMSampleFormat? = nil, channels: Int = 1,
        sampleTime: Int64 = 0
    ) throws -> EncodedPackets? {
        let encoder = try PCMEncoder(
            inputFormat: .linearPCM(sampleRate: 44_100, channels: channels, sample: input), outputSample: output
        )
        let frames = bytes.count / (input.bytesPerSample * channels)
        return try bytes.withUnsafeBytes { raw in
            try encoder.encode(CapturedBuffer(
                bytes: raw, startTime: CaptureTimestamp(sampleTime: sampleTime, hostTime: 42), packetCount: frames
            ))
        }
    }

    private func s16(_ values: [Int16]) -> [UInt8] { values.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] } }
    private func s24(_ values: [Int32]) -> [UInt8] { values.flatMap { v in [0, 8, 16].map { UInt8(truncatingIfNeeded: v >> $0) } } }
    private func s32(_ values: [Int32]) -> [UInt8] { values.flatMap { v in [0, 8, 16, 24].map { UInt8(truncatingIfNeeded: v >> $0) } } }
    private func f32(_ values: [Float]) -> [UInt8] { s32(values.map { Int32(bitPattern: $0.bitPattern) }) }

    func testPassThroughIsByteExactWithTheBufferTimestamp() throws {
        let bytes = (0..<(6 * 40)).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
        let encoder = try PCMEncoder(inputFormat: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s24))
        XCTAssertEqual(encoder.outputFormat, .linearPCM(sampleRate: 48_000, channels: 2, sample: .s24))
        XCTAssertEqual(encoder.magicCookie, [])
        XCTAssertEqual(encoder.primingFrames, 0)
        XCTAssertEqual(encoder.maximumPacketSize, 6)
        let packets = try bytes.withUnsafeBytes { raw in
            try encoder.encode(CapturedBuffer(bytes: raw, startTime: CaptureTimestamp(sampleTime: 123_456, hostTime: 9), packetCount: 40))
        }
        XCTAssertEqual(packets, EncodedPackets(payload: bytes, packetCount: 40, packetSizes: [], firstSampleTime: 123_456, frameCount: 40))
        XCTAssertEqual(try encoder.finish(), EncoderTail(packets: nil, remainderFrames: 0))
    }

    func testAnEmptyBufferGivesNoPackets() throws {
        XCTAssertNil(try encode([], from: .s16))
    }

    func testIntegerWideningIsExact() throws {
        let values: [Int16] = [0, 1, -1, 12_345, -12_346, .max, .min]
        XCTAssertEqual(try encode(s16(values), from: .s16, to: .s24)?.payload, s24(values.map { Int32($0) << 8 }))
        XCTAssertEqual(try encode(s16(values), from: .s16, to: .s32)?.payload, s32(values.map { Int32($0) << 16 }))
        let wide: [Int32] = [0, 1, -1, 8_388_607, -8_388_608, 1_234_567]
        XCTAssertEqual(try encode(s24(wide), from: .s24, to: .s32)?.payload, s32(wide.map { $0 << 8 }))
        // And narrowing back returns the original exactly.
        XCTAssertEqual(try encode(s32(values.map { Int32($0) << 16 }), from: .s32, to: .s16)?.payload, s16(values))
        XCTAssertEqual(try encode(s32(wide.map { $0 << 8 }), from: .s32, to: .s24)?.payload, s24(wide))
    }

    func testIntegerNarrowingRoundsToNearestAndClipsAtTheTop() throws {
        let input: [Int32] = [0x0000_7FFF, 0x0000_8000, -0x0000_8000, -0x0000_8001, 0x7FFF_FFFF, Int32.min, 0x1234_5678]
        // (x + 0x8000) >> 16, clipped to 32767.
        let expected: [Int16] = [0, 1, 0, -1, 32_767, -32_768, 0x1234]
        XCTAssertEqual(try encode(s32(input), from: .s32, to: .s16)?.payload, s16(expected))
    }

    func testIntegerToFloatIsExactForS16AndS24() throws {
        let values: [Int16] = [0, 1, -1, .max, .min, 1_000]
        XCTAssertEqual(try encode(s16(values), from: .s16, to: .f32)?.payload, f32(values.map { Float($0) / 32_768 }))
        let wide: [Int32] = [0, 1, -8_388_608, 8_388_607]
        XCTAssertEqual(try encode(s24(wide), from: .s24, to: .f32)?.payload, f32(wide.map { Float($0) / 8_388_608 }))
        // Float back to the same width returns the original.
        XCTAssertEqual(try encode(f32(values.map { Float($0) / 32_768 }), from: .f32, to: .s16)?.payload, s16(values))
        XCTAssertEqual(try encode(f32(wide.map { Float($0) / 8_388_608 }), from: .f32, to: .s24)?.payload, s24(wide))
    }

    func testFloatToIntegerRoundsHalfToEvenAndClips() throws {
        let input: [Float] = [1.0, -1.0, 2.5, -3, .nan, 0.5 / 32_768, 1.5 / 32_768, -0.5 / 32_768]
        let expected: [Int16] = [32_767, -32_768, 32_767, -32_768, 0, 0, 2, 0]
        XCTAssertEqual(try encode(f32(input), from: .f32, to: .s16)?.payload, s16(expected))
    }

    func testConversionKeepsFramesChannelsAndTimestamp() throws {
        let stereo: [Int16] = [1, 2, 3, 4, 5, 6]
        let packets = try XCTUnwrap(try encode(s16(stereo), from: .s16, to: .s32, channels: 2, sampleTime: 777))
        XCTAssertEqual(packets.packetCount, 3)
        XCTAssertEqual(packets.frameCount, 3)
        XCTAssertEqual(packets.firstSampleTime, 777)
        XCTAssertEqual(packets.payload, s32(stereo.map { Int32($0) << 16 }))
    }

    func testNonPCMInputIsRefused() {
        XCTAssertThrowsError(try PCMEncoder(inputFormat: .opus(channels: 2, framesPerPacket: 960))) { error in
            XCTAssertEqual(
                error as? EncoderError,
                .invalidConfiguration("the PCM encoder takes interleaved little-endian PCM (s16, s24, s32 or f32); the input is opus 48000 Hz 2 ch, 960 frames/packet: capture as PCM")
            )
        }
    }
}
