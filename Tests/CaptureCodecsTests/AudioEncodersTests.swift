import CaptureCodecs
import CaptureCore
import XCTest

/// `AudioEncoders`: the one place that chooses a capture's encoder.
final class AudioEncodersTests: XCTestCase {
    func testOpusIsResampledOnlyAtRatesItDoesNotRunAt() throws {
        for rate in [8_000.0, 12_000, 16_000, 24_000, 48_000] {
            let encoder = try AudioEncoders.opus(for: .linearPCM(sampleRate: rate, channels: 2, sample: .s16))
            XCTAssertTrue(encoder is OpusEncoder, "\(rate) Hz: straight")
            XCTAssertEqual(encoder.outputFormat.sampleRate, 48_000, "an Opus stream is described at 48 kHz whatever its input")
        }
        for rate in [44_100.0, 96_000, 22_050] {
            let encoder = try AudioEncoders.opus(for: .linearPCM(sampleRate: rate, channels: 2, sample: .s16), settings: OpusEncoderSettings(bitrate: 64_000))
            XCTAssertTrue(encoder is ResamplingOpusEncoder, "\(rate) Hz: resampled")
            XCTAssertEqual(encoder.outputFormat.sampleRate, 48_000)
            XCTAssertEqual(encoder.encodingLabel, "opus-64k-20ms")
        }
        let pcm = try AudioEncoders.pcm(for: .linearPCM(sampleRate: 44_100, channels: 1, sample: .s24))
        XCTAssertTrue(pcm is PCMEncoder)
        XCTAssertEqual(pcm.outputFormat, .linearPCM(sampleRate: 44_100, channels: 1, sample: .s24))
    }
}
