import CaptureCodecs
import CaptureCore
import XCTest

/// What comes out of libopus's decoder is the source, sample-aligned, at the quality asked for.
final class OpusQualityTests: XCTestCase {
    func testTwoToneStereoAt128kDecodesWithin30dBAndExactLength() throws {
        let frames = 96_000 + 777
        let source = OpusTestTools.twoTone(frames: frames, channels: 2, sampleRate: 48_000)
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .f32)
        let encoder = try OpusEncoder(
            inputFormat: format, settings: OpusEncoderSettings(bitrate: 128_000, frameDuration: .ms20)
        )
        let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: .f32), with: encoder, chunkFrames: [4096])

        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 2)
        let total = stream.packets.count * 960
        XCTAssertEqual(decoded.count, total * 2)
        let validFrames = total - encoder.primingFrames - stream.remainderFrames
        XCTAssertEqual(validFrames, frames, "valid = total - priming - remainder = the source's length")
        let valid = decoded[(encoder.primingFrames * 2)..<((encoder.primingFrames + validFrames) * 2)]
        let snr = OpusTestTools.snr(valid, source[...])
        XCTAssertGreaterThanOrEqual(snr, 30, "SNR \(snr) dB")
    }

    func testSixChannelsUseTheSurroundMultistreamEncoderAndDecodeFromTheCookie() throws {
        let frames = 24_000 + 100
        let source = OpusTestTools.twoTone(frames: frames, channels: 6, sampleRate: 48_000)
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 6, sample: .s16)
        let encoder = try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(bitrate: 384_000))
        // 5.1 in mapping family 1: 4 streams, 2 of them coupled (FL/FR, RL/RR), mapping 0 4 1 2 3 5.
        let cookie = encoder.magicCookie
        XCTAssertEqual(cookie.count, 21 + 6)
        XCTAssertEqual(Array(cookie[0..<8]), Array("OpusHead".utf8))
        XCTAssertEqual(cookie[9], 6)
        XCTAssertEqual(cookie[18], 1, "mapping family 1")
        XCTAssertEqual(Array(cookie[19...]), [4, 2, 0, 4, 1, 2, 3, 5])
        XCTAssertEqual(encoder.maximumPacketSize, 4 * 1_283, "the bound covers every stream")

        let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: .s16), with: encoder, chunkFrames: [1000])
        for size in stream.packetSizes { XCTAssertLessThanOrEqual(Int(size), encoder.maximumPacketSize) }
        let decoded = try OpusTestTools.decode(stream.packets, cookie: cookie, channels: 6)
        let total = stream.packets.count * 960
        XCTAssertEqual(total - encoder.primingFrames - stream.remainderFrames, frames)
        let valid = decoded[(encoder.primingFrames * 6)..<((encoder.primingFrames + frames) * 6)]
        // The LFE channel is low-passed by design; compare the five full-band channels.
        var fullBandDecoded: [Float] = []
        var fullBandSource: [Float] = []
        for (index, (output, input)) in zip(valid, source).enumerated() where index % 6 != 5 {
            fullBandDecoded.append(output)
            fullBandSource.append(input)
        }
        XCTAssertGreaterThan(OpusTestTools.snr(fullBandDecoded[...], fullBandSource[...]), 20)
    }

    func testCBRMakesEveryPacketTheSameSize() throws {
        let source = OpusTestTools.chirp(frames: 48_000, channels: 2, sampleRate: 48_000)
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .f32)
        let encoder = try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(bitrate: 64_000, bitrateMode: .cbr))
        let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: .f32), with: encoder, chunkFrames: [441])
        // 64 kb/s for 20 ms is 160 bytes, in every packet including the padded last one.
        XCTAssertEqual(Set(stream.packetSizes), [160])
    }

    func testVBRPacketSizesFollowTheAudio() throws {
        // Half a second of silence then half a second of chirp: VBR spends far less on silence.
        var source = [Float](repeating: 0, count: 24_000 * 2)
        source += OpusTestTools.chirp(frames: 24_000, channels: 2, sampleRate: 48_000)
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .f32)
        for mode in [OpusBitrateMode.vbr, .cvbr] {
            let encoder = try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(bitrate: 96_000, bitrateMode: mode))
            let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: .f32), with: encoder, chunkFrames: [1000])
            let sizes = stream.packetSizes.map(Int.init)
            XCTAssertGreaterThan(Set(sizes).count, 1, "\(mode): sizes vary")
            let silent = sizes[2..<20].reduce(0, +)
            let loud = sizes[30..<48].reduce(0, +)
            XCTAssertLessThan(silent * 2, loud, "\(mode): silence takes less than half the bytes of audio")
        }
    }

    func testPrimingIsTheLookAheadForEachApplication() throws {
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s16)
        XCTAssertEqual(try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(application: .audio)).primingFrames, 312)
        XCTAssertEqual(try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(application: .voip)).primingFrames, 312)
        XCTAssertEqual(try OpusEncoder(inputFormat: format, settings: OpusEncoderSettings(application: .lowdelay)).primingFrames, 120)
        let narrow = StreamFormat.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16)
        XCTAssertEqual(try OpusEncoder(inputFormat: narrow).primingFrames, 312, "52 frames at 8 kHz, times 6")
    }

    func testCookieIsAnRFC7845OpusHeadWithThePrimingAsPreSkip() throws {
        let format = StreamFormat.linearPCM(sampleRate: 16_000, channels: 2, sample: .s24)
        let encoder = try OpusEncoder(inputFormat: format)
        XCTAssertEqual(encoder.magicCookie, [
            0x4F, 0x70, 0x75, 0x73, 0x48, 0x65, 0x61, 0x64,  // "OpusHead"
            1, 2,  // version, channels
            UInt8(encoder.primingFrames & 0xFF), UInt8(encoder.primingFrames >> 8),  // pre-skip
            0x80, 0x3E, 0, 0,  // input rate 16000
            0, 0,  // gain
            0,  // mapping family 0
        ])
        XCTAssertEqual(encoder.primingFrames, 312)
    }

    func testPacketBoundsFollowTheFrameDuration() throws {
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .f32)
        let expectations: [(OpusFrameDuration, Int, Int)] = [
            (.ms2_5, 120, 1_283), (.ms5, 240, 1_283), (.ms10, 480, 1_283), (.ms20, 960, 1_283), (.ms40, 1_920, 2_558),
            (.ms60, 2_880, 3_833),
        ]
        for (duration, framesPerPacket, bound) in expectations {
            let encoder = try OpusEncoder(
                inputFormat: format, settings: OpusEncoderSettings(bitrate: 510_000, frameDuration: duration, bitrateMode: .cbr)
            )
            XCTAssertEqual(encoder.outputFormat.framesPerPacket, UInt32(framesPerPacket), "\(duration)")
            XCTAssertEqual(encoder.maximumPacketSize, bound, "\(duration)")
            let source = OpusTestTools.chirp(frames: 9_600, channels: 2, sampleRate: 48_000)
            let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: .f32), with: encoder, chunkFrames: [441])
            for size in stream.packetSizes { XCTAssertLessThanOrEqual(Int(size), bound, "\(duration)") }
            XCTAssertEqual(stream.packets.count * framesPerPacket - encoder.primingFrames - stream.remainderFrames, 9_600)
        }
    }
}
