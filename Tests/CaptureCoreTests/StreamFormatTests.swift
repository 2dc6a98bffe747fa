import CaptureCore
import XCTest

final class StreamFormatTests: XCTestCase {
    func testDeriveBufferSizeMatchesTheAudioQueueGuide() {
        // 0.5 s of 44.1 kHz 16-bit stereo: 44100 * 4 * 0.5.
        let cd = StreamFormat.linearPCM(sampleRate: 44_100, channels: 2, sample: .s16)
        XCTAssertEqual(BufferSizing.deriveBufferSize(format: cd, seconds: 0.5), 88_200)
        // 5 s of 96 kHz 24-bit stereo would be 2,880,000 bytes: capped at 0x50000.
        let hiRes = StreamFormat.linearPCM(sampleRate: 96_000, channels: 2, sample: .s24)
        XCTAssertEqual(BufferSizing.deriveBufferSize(format: hiRes, seconds: 5), 327_680)
        XCTAssertEqual(BufferSizing.maximumBufferSize, 0x50000)
        // Just under the cap is not capped.
        XCTAssertEqual(BufferSizing.deriveBufferSize(format: hiRes, seconds: 0.5), 288_000)
    }

    func testDeriveBufferSizeUsesMaximumPacketSizeForVariableBitRate() {
        // Opus, 20 ms packets: 50 packets a second of at most 1275 bytes.
        let opus = StreamFormat.opus(channels: 2, framesPerPacket: 960)
        XCTAssertEqual(BufferSizing.deriveBufferSize(format: opus, seconds: 0.5, maximumPacketSize: 1275), 31_875)
        XCTAssertEqual(BufferSizing.deriveBufferSize(format: opus, seconds: 0.5), 0)
    }

    func testFramesPerBufferAreWholeFrames() {
        let hiRes = StreamFormat.linearPCM(sampleRate: 96_000, channels: 2, sample: .s24)
        // 327,680 bytes hold 54,613 whole 6-byte frames.
        XCTAssertEqual(BufferSizing.framesPerBuffer(format: hiRes, duration: .seconds(5)), 54_613)
        let threeChannel = StreamFormat.linearPCM(sampleRate: 44_100, channels: 3, sample: .s24)
        XCTAssertEqual(BufferSizing.framesPerBuffer(format: threeChannel, duration: .milliseconds(10)), 441)
    }

    /// The frames of a buffer given as a `Duration` are the numbers the seconds as a `Double` gave
    /// (DeriveBufferSize's arithmetic, capped at 320 KiB), whether the duration is written in
    /// milliseconds or converted from capture-send's `--buffer-seconds` value.
    func testFramesPerBufferForADurationAreThoseOfItsSeconds() {
        let rows: [(format: StreamFormat, frames: [Int])] = [
            (.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), [24_000, 960, 48, 81_920]),
            (.linearPCM(sampleRate: 44_100, channels: 2, sample: .s24), [22_050, 882, 44, 54_613]),
            (.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16), [4_000, 160, 8, 80_000]),
            (.linearPCM(sampleRate: 8_000, channels: 1, sample: .s24), [4_000, 160, 8, 80_000]),
            (.linearPCM(sampleRate: 96_000, channels: 2, sample: .f32), [40_960, 1_920, 96, 40_960]),
        ]
        let durations: [(seconds: Double, written: Duration)] = [(0.5, .milliseconds(500)), (0.02, .milliseconds(20)), (0.001, .milliseconds(1)), (10, .seconds(10))]
        for row in rows {
            for (index, duration) in durations.enumerated() {
                let label = "\(row.format) for \(duration.seconds) s"
                let bytesPerFrame = Int(row.format.bytesPerFrame)
                let fromSeconds = max(BufferSizing.deriveBufferSize(format: row.format, seconds: duration.seconds) / bytesPerFrame, 1)
                XCTAssertEqual(fromSeconds, row.frames[index], label)
                XCTAssertEqual(BufferSizing.framesPerBuffer(format: row.format, duration: duration.written), row.frames[index], label)
                XCTAssertEqual(BufferSizing.framesPerBuffer(format: row.format, duration: .seconds(duration.seconds)), row.frames[index], label)
            }
        }
    }

    func testLinearPCMFieldsFollowAudioStreamBasicDescription() throws {
        let format = StreamFormat.linearPCM(sampleRate: 44_100, channels: 3, sample: .s24)
        XCTAssertEqual(format.formatID, .linearPCM)
        XCTAssertEqual(format.formatID.description, "lpcm")
        XCTAssertEqual(format.formatFlags, [.isSignedInteger, .isPacked])
        XCTAssertEqual(format.bytesPerFrame, 9)
        XCTAssertEqual(format.bytesPerPacket, 9)
        XCTAssertEqual(format.framesPerPacket, 1)
        XCTAssertEqual(format.bitsPerChannel, 24)
        XCTAssertEqual(format.pcmSampleFormat, .s24)
        XCTAssertFalse(format.isVariableBitRate)
        try format.validate()

        let float = StreamFormat.linearPCM(sampleRate: 96_000, channels: 1, sample: .f32)
        XCTAssertEqual(float.formatFlags, [.isFloat, .isPacked])
        XCTAssertEqual(float.pcmSampleFormat, .f32)
        try float.validate()
        let opus = StreamFormat.opus(channels: 2, framesPerPacket: 960)
        XCTAssertTrue(opus.isVariableBitRate)
        XCTAssertEqual(opus.formatID.description, "opus")
        try opus.validate()
    }

    func testValidationRejectsWhatTheSystemCannotCarry() {
        func error(_ format: StreamFormat) -> StreamFormatError? {
            do { try format.validate(); return nil } catch { return error }
        }
        XCTAssertEqual(error(.linearPCM(sampleRate: 4_000, channels: 2, sample: .s16)), .sampleRateOutOfRange(4_000))
        XCTAssertEqual(error(.linearPCM(sampleRate: 384_000, channels: 2, sample: .s16)), .sampleRateOutOfRange(384_000))
        XCTAssertEqual(error(.linearPCM(sampleRate: 48_000, channels: 9, sample: .s16)), .channelCountOutOfRange(9))
        XCTAssertEqual(error(.linearPCM(sampleRate: 48_000, channels: 0, sample: .s16)), .channelCountOutOfRange(0))
        var twelveBit = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
        twelveBit.bitsPerChannel = 12
        XCTAssertEqual(error(twelveBit), .unsupportedPCM(bits: 12, flags: twelveBit.formatFlags.rawValue))
        var badFrame = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
        badFrame.bytesPerFrame = 5
        badFrame.bytesPerPacket = 5
        guard case .inconsistent(let why)? = error(badFrame) else { return XCTFail("expected inconsistent") }
        XCTAssertTrue(why.contains("bytes per frame is 5, expected 4"), why)
        var unknown = StreamFormat.opus(channels: 2, framesPerPacket: 960)
        unknown.formatID = AudioFormatID(fourCC: "aac ") ?? .opus
        XCTAssertEqual(error(unknown), .unsupportedFormatID(unknown.formatID))
        XCTAssertTrue(StreamFormatError.sampleRateOutOfRange(4_000).description.contains("use 8000 to 192000 Hz"))
    }
}
