import CaptureCodecs
import CaptureCore
import XCTest

/// Settings parse as users write them, and anything Opus cannot do is refused with a message that
/// says what to do instead.
final class OpusEncoderSettingsTests: XCTestCase {
    private func assertRefused(
        _ format: StreamFormat, _ settings: OpusEncoderSettings = OpusEncoderSettings(), message: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try OpusEncoder(inputFormat: format, settings: settings), file: file, line: line) { error in
            XCTAssertEqual(error as? EncoderError, .invalidConfiguration(message), file: file, line: line)
        }
    }

    func testDefaults() {
        let settings = OpusEncoderSettings()
        XCTAssertEqual(settings.bitrate, 128_000)
        XCTAssertEqual(settings.frameDuration, .ms20)
        XCTAssertEqual(settings.complexity, 10)
        XCTAssertEqual(settings.bitrateMode, .vbr)
        XCTAssertEqual(settings.application, .audio)
    }

    func testBitrateParsesPlainAndKilo() throws {
        XCTAssertEqual(try OpusEncoderSettings.parseBitrate("128000"), 128_000)
        XCTAssertEqual(try OpusEncoderSettings.parseBitrate("128k"), 128_000)
        XCTAssertEqual(try OpusEncoderSettings.parseBitrate(" 96.5K "), 96_500)
        XCTAssertEqual(try OpusEncoderSettings.parseBitrate("6k"), 6_000)
        XCTAssertEqual(try OpusEncoderSettings.parseBitrate("510000"), 510_000)
    }

    func testBitrateOutOfRangeOrNotANumberIsRefused() {
        for (text, message) in [
            ("5999", "Opus bitrate 5999 b/s is out of range: use 6000 to 510000 b/s (6k to 510k)"),
            ("511k", "Opus bitrate 511000 b/s is out of range: use 6000 to 510000 b/s (6k to 510k)"),
            ("fast", "Opus bitrate \"fast\" is not a number of bits per second: write it as 128000 or 128k"),
            ("128kb", "Opus bitrate \"128kb\" is not a number of bits per second: write it as 128000 or 128k"),
            ("", "Opus bitrate \"\" is not a number of bits per second: write it as 128000 or 128k"),
            ("-64k", "Opus bitrate -64000 b/s is out of range: use 6000 to 510000 b/s (6k to 510k)"),
        ] {
            XCTAssertThrowsError(try OpusEncoderSettings.parseBitrate(text), text) { error in
                XCTAssertEqual(error as? EncoderError, .invalidConfiguration(message), text)
            }
        }
        assertRefused(
            .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), OpusEncoderSettings(bitrate: 600_000),
            message: "Opus bitrate 600000 b/s is out of range: use 6000 to 510000 b/s (6k to 510k)"
        )
    }

    func testFrameDurationsParseAndOthersAreRefused() throws {
        XCTAssertEqual(try OpusFrameDuration(parsing: "2.5"), .ms2_5)
        XCTAssertEqual(try OpusFrameDuration(parsing: "20ms"), .ms20)
        XCTAssertEqual(try OpusFrameDuration(parsing: "60"), .ms60)
        XCTAssertEqual(OpusFrameDuration.ms2_5.frames(atSampleRate: 48_000), 120)
        XCTAssertEqual(OpusFrameDuration.ms2_5.frames(atSampleRate: 8_000), 20)
        XCTAssertEqual(OpusFrameDuration.ms60.frames(atSampleRate: 12_000), 720)
        for text in ["30", "120", "0", "x"] {
            XCTAssertThrowsError(try OpusFrameDuration(parsing: text)) { error in
                XCTAssertEqual(
                    error as? EncoderError,
                    .invalidConfiguration("Opus frame duration \"\(text)\" is not one Opus has: use 2.5, 5, 10, 20, 40 or 60 ms")
                )
            }
        }
    }

    func testSampleRatesOpusDoesNotRunAtAreRefused() {
        assertRefused(
            .linearPCM(sampleRate: 44_100, channels: 2, sample: .s16),
            message: "Opus runs at 8000, 12000, 16000, 24000 or 48000 Hz; the input is 44100 Hz: resample it or capture at 48000 Hz"
        )
        assertRefused(
            .linearPCM(sampleRate: 96_000, channels: 1, sample: .f32),
            message: "Opus runs at 8000, 12000, 16000, 24000 or 48000 Hz; the input is 96000 Hz: resample it or capture at 48000 Hz"
        )
        for rate in [8_000, 12_000, 16_000, 24_000, 48_000] {
            XCTAssertNoThrow(try OpusEncoder(inputFormat: .linearPCM(sampleRate: Double(rate), channels: 1, sample: .s16)))
        }
    }

    func testChannelCountsBeyondEightAreRefusedAndUpToEightWork() {
        assertRefused(
            .linearPCM(sampleRate: 48_000, channels: 9, sample: .s16),
            message: "Opus carries 1 to 8 channels; the input has 9: capture fewer channels"
        )
        for channels in 1...8 {
            XCTAssertNoThrow(try OpusEncoder(inputFormat: .linearPCM(sampleRate: 48_000, channels: channels, sample: .s16)), "\(channels) ch")
        }
    }

    func testComplexityOutOfRangeAndNonPCMInputAreRefused() {
        assertRefused(
            .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), OpusEncoderSettings(complexity: 11),
            message: "Opus complexity 11 is out of range: use 0 (fastest) to 10 (best)"
        )
        assertRefused(
            .opus(channels: 2, framesPerPacket: 960),
            message: "the Opus encoder takes interleaved little-endian PCM (s16, s24, s32 or f32); the input is opus 48000 Hz 2 ch, 960 frames/packet: capture as PCM"
        )
    }
}
