import CaptureCore
import XCTest

/// The level meter's figures for each sample format, worked out by hand: peak, RMS and clipping per
/// channel, over several buffers, and at full scale in buffers long enough to test its integer sums.
final class LevelMeterTests: XCTestCase {
    /// Measures `buffers`, each a list of frames of raw integer (or float bit pattern) samples, as
    /// they lie in a capture buffer: little-endian, interleaved.
    private func measure(_ buffers: [[[Int64]]], sample: PCMSampleFormat) -> LevelMeter.Reading {
        let channels = buffers.first?.first?.count ?? 1
        var meter = LevelMeter(format: .linearPCM(sampleRate: 48_000, channels: channels, sample: sample))
        var sampleTime: Int64 = 0
        for frames in buffers {
            var bytes: [UInt8] = []
            for frame in frames {
                for value in frame {
                    for byte in 0..<sample.bytesPerSample { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * byte))) }
                }
            }
            bytes.withUnsafeBytes { raw in
                meter.measure(CapturedBuffer(bytes: raw, startTime: CaptureTimestamp(sampleTime: sampleTime, hostTime: 0), packetCount: frames.count))
            }
            sampleTime += Int64(frames.count)
        }
        return meter.take()
    }

    private func assertLevel(
        _ level: LevelMeter.ChannelLevel, peak: Double, rms: Double, clipped: Bool, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(level.peak, peak, accuracy: 1e-15, "peak", file: file, line: line)
        XCTAssertEqual(level.rms, rms, accuracy: 1e-12, "RMS", file: file, line: line)
        XCTAssertEqual(level.clipped, clipped, "clipped", file: file, line: line)
    }

    func testSixteenBitPeaksRMSAndClippingPerChannel() {
        // Left: 16384, -32768 (clips), 0, 0 → peak 1.0, RMS sqrt((0.25 + 1) / 4).
        // Right: -8192, 8192, 8192, -8192 → peak 0.25, RMS 0.25, no clipping.
        let reading = measure([[[16_384, -8_192], [-32_768, 8_192]], [[0, 8_192], [0, -8_192]]], sample: .s16)
        XCTAssertEqual(reading.frames, 4)
        assertLevel(reading.channels[0], peak: 1.0, rms: (1.25 / 4).squareRoot(), clipped: true)
        assertLevel(reading.channels[1], peak: 0.25, rms: 0.25, clipped: false)
    }

    func testTwentyFourBitNegativeValuesAreSignExtended() {
        let reading = measure([[[-4_194_304], [4_194_304], [8_388_607]]], sample: .s24)
        XCTAssertEqual(reading.channels[0].peak, 8_388_607 / 8_388_608, accuracy: 1e-15)
        XCTAssertEqual(reading.channels[0].rms, ((0.25 + 0.25 + pow(8_388_607 / 8_388_608, 2)) / 3).squareRoot(), accuracy: 1e-15)
        XCTAssertTrue(reading.channels[0].clipped, "the positive extreme clips")
    }

    func testThirtyTwoBitAndFloatFullScale() {
        let integers = measure([[[Int64(Int32.min), 0], [1 << 30, 0]]], sample: .s32)
        assertLevel(integers.channels[0], peak: 1.0, rms: (1.25 / 2).squareRoot(), clipped: true)
        assertLevel(integers.channels[1], peak: 0, rms: 0, clipped: false)
        let floats = measure([[[Int64(Float(-0.5).bitPattern)], [Int64(Float(1.5).bitPattern)]]], sample: .f32)
        assertLevel(floats.channels[0], peak: 1.5, rms: ((0.25 + 2.25) / 2).squareRoot(), clipped: true)
        let quiet = measure([[[Int64(Float(0.999).bitPattern)]]], sample: .f32)
        XCTAssertFalse(quiet.channels[0].clipped)
    }

    func testFullScaleTwentyFourBitBuffersLongerThanOneIntegerRunStayExact() {
        // 200,000 frames of mono 24-bit at the negative extreme: squares of 2^46 each, whose sum
        // (over 2^63 from 131,072 frames on) the meter must not keep in one 64-bit integer.
        let frames = [[Int64]](repeating: [-8_388_608], count: 200_000)
        let reading = measure([frames], sample: .s24)
        assertLevel(reading.channels[0], peak: 1.0, rms: 1.0, clipped: true)
    }

    func testCompressedFormatsMeasureNothing() {
        var meter = LevelMeter(format: StreamFormat(
            sampleRate: 48_000, formatID: .opus, formatFlags: [], bytesPerPacket: 0, framesPerPacket: 960,
            bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0))
        let bytes: [UInt8] = [1, 2, 3, 4]
        bytes.withUnsafeBytes { raw in
            meter.measure(CapturedBuffer(bytes: raw, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: 1))
        }
        XCTAssertEqual(meter.take().frames, 0)
    }
}
