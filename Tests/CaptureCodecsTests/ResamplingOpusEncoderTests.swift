import CaptureCodecs
import CaptureCore
import Foundation
import XCTest

/// Opus from any rate (issue 17, item 7): a 44.1 kHz (or 22.05, 96 kHz) source is resampled to
/// 48 kHz with libsoxr and encoded; the decoded stream, trimmed by priming and remainder, is as long
/// as the source to the sample and lines up with the same signal rendered at 48 kHz.
final class ResamplingOpusEncoderTests: XCTestCase {
    private func check(rate: Double, sample: PCMSampleFormat, seconds: Double, chunks: [Int], line: UInt = #line) throws {
        let frames = Int(rate * seconds)
        let source = OpusTestTools.chirp(frames: frames, channels: 2, sampleRate: rate)
        let format = StreamFormat.linearPCM(sampleRate: rate, channels: 2, sample: sample)
        XCTAssertTrue(ResamplingOpusEncoder.needsResampling(format), line: line)
        let encoder = try ResamplingOpusEncoder(inputFormat: format, settings: OpusEncoderSettings(bitrate: 128_000))
        XCTAssertEqual(encoder.outputFormat.sampleRate, 48_000, line: line)
        XCTAssertEqual(encoder.primingFrames, 312, "the Opus look-ahead alone: soxr compensates its own delay", line: line)
        XCTAssertEqual(encoder.opusHead.inputSampleRate, Int(rate), "the OpusHead names the source's rate", line: line)
        let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: sample), with: encoder, chunkFrames: chunks)
        // Contiguous packets on the 48 kHz timeline.
        var expected: Int64 = 0
        for (first, count) in zip(stream.firstSampleTimes, stream.frameCounts) {
            XCTAssertEqual(first, expected, line: line)
            expected += Int64(count)
        }
        let total = stream.packets.count * 960
        let valid = total - encoder.primingFrames - stream.remainderFrames
        let outputFrames = Int((Double(frames) * 48_000 / rate).rounded())
        XCTAssertEqual(valid, outputFrames, "as long as the source, to the sample", line: line)

        let decoded = try OpusTestTools.decode(stream.packets, cookie: encoder.magicCookie, channels: 2)
        let trimmed = decoded[(encoder.primingFrames * 2)..<((encoder.primingFrames + valid) * 2)]
        let reference = OpusTestTools.chirp(frames: outputFrames, channels: 2, sampleRate: 48_000)
        // Skip the first and last 10 ms (the resampler's filter edges); a misalignment of one sample
        // would put the 3 kHz end of the chirp 0.4 rad off: below 10 dB.
        let edge = 480 * 2
        let snr = OpusTestTools.snr(Array(trimmed)[edge..<(reference.count - edge)], reference[edge..<(reference.count - edge)])
        XCTAssertGreaterThan(snr, 20, "SNR \(snr) dB against the same chirp at 48 kHz", line: line)
    }

    func testA44100HzSourceBecomes48kHzOpusOfTheSameDuration() throws {
        try check(rate: 44_100, sample: .s16, seconds: 2.5, chunks: [441, 1_000, 37, 4_410])
    }

    func testOtherRatesAndSampleFormats() throws {
        try check(rate: 22_050, sample: .s24, seconds: 1.3, chunks: [512])
        try check(rate: 96_000, sample: .f32, seconds: 1.1, chunks: [960, 77])
        try check(rate: 32_000, sample: .s32, seconds: 0.7, chunks: [320])
    }

    func testAnOverrunIsResampledAsSilenceSoTheTimelineStaysWhole() throws {
        let format = StreamFormat.linearPCM(sampleRate: 44_100, channels: 1, sample: .s16)
        let encoder = try ResamplingOpusEncoder(inputFormat: format)
        XCTAssertTrue(encoder.fillsLostFrames)
        let silence = [UInt8](repeating: 0, count: 4_410 * 2)
        var frames = 0
        try silence.withUnsafeBytes { bytes in
            for start in [0, 4_410, 44_100] {  // 35,280 frames lost before the third buffer
                if let packets = try encoder.encode(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: Int64(start), hostTime: 0), packetCount: 4_410)) {
                    frames += packets.frameCount
                }
            }
        }
        let tail = try encoder.finish()
        frames += tail.packets?.frameCount ?? 0
        XCTAssertEqual(frames - encoder.primingFrames - tail.remainderFrames, 52_800, "1.1 s at 48 kHz: audio and the lost stretch")
        XCTAssertThrowsError(try silence.withUnsafeBytes { bytes in
            _ = try encoder.encode(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: 10))
        })
    }
}
