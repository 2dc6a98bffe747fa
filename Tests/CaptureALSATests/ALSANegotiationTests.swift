import CaptureALSA
import CaptureCore
import TestSupport
import XCTest

/// Getting the full format back when the device cannot give what was asked.
final class ALSANegotiationTests: ALSATestCase {
    /// The integer-stereo test PCM refuses float and anything but 2 channels.
    private let floatMono = StreamFormat.linearPCM(sampleRate: 44_100, channels: 1, sample: .f32)

    func testFormatReportsWhatTheDeviceGivesInsteadOfTheRequest() throws {
        let pcm = ALSATestPCMs.integerStereo
        let source = try ALSASource(device: pcm.name, requested: floatMono, periodFrames: 441, bufferCount: 3)
        defer { source.close() }

        // f32 is refused; s32 is the nearest carried format that keeps the precision.
        XCTAssertEqual(source.format, .linearPCM(sampleRate: 44_100, channels: 2, sample: .s32))
        XCTAssertEqual(source.negotiation.requested, floatMono)
        XCTAssertEqual(source.negotiation.actual, source.format)
        XCTAssertEqual(source.negotiation.supportedSampleFormats, [.s16, .s24, .s32])
        XCTAssertEqual(source.negotiation.formatMismatches, ["sample format s32 instead of f32", "2 channels instead of 1"])
        XCTAssertFalse(source.negotiation.formatMatchesRequest)
        XCTAssertTrue(source.negotiation.description.contains("asked for f32 44100 Hz 1 ch, capturing s32 44100 Hz 2 ch"), source.negotiation.description)

        // And the audio really is in the format reported: the fixture is laid out as s32 stereo.
        try source.start()
        let captured = try readFrames(source, frames: pcm.fixtureFrames, chunkFrames: 441)
        XCTAssertTrue(captured == configuration.fixture(pcm.name), "audio is not s32 stereo as reported")
    }

    func testNearestFormatForS24IsS24WhenOffered() throws {
        let source = try ALSASource(
            device: ALSATestPCMs.integerStereo.name,
            requested: .linearPCM(sampleRate: 96_000, channels: 2, sample: .s24), periodFrames: 960, bufferCount: 3)
        defer { source.close() }
        XCTAssertEqual(source.format, .linearPCM(sampleRate: 96_000, channels: 2, sample: .s24))
        XCTAssertTrue(source.negotiation.formatMatchesRequest)
    }

    func testStrictFormatRefusesNamingWhatWasAskedAndWhatTheDeviceOffers() {
        XCTAssertThrowsError(
            try ALSASource(device: ALSATestPCMs.integerStereo.name, requested: floatMono, periodFrames: 441, bufferCount: 3, strictFormat: true)
        ) { error in
            guard case CaptureError.unsupportedFormat(let message) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(message.contains("'alsatest_integer_stereo'"), message)
            XCTAssertTrue(message.contains("cannot capture f32 44100 Hz 1 ch exactly"), message)
            XCTAssertTrue(message.contains("it offers s32 44100 Hz 2 ch"), message)
            XCTAssertTrue(message.contains("sample formats it accepts: s16, s24, s32"), message)
        }
    }

    func testStrictFormatAcceptsAnExactMatch() throws {
        let pcm = ALSATestPCMs.integerStereo
        let source = try ALSASource(device: pcm.name, requested: pcm.fixtureFormat, periodFrames: 441, bufferCount: 3, strictFormat: true)
        defer { source.close() }
        XCTAssertEqual(source.format, pcm.fixtureFormat)
    }

    func testStrictFormatDeviceIsReleasedSoItCanBeOpenedAgain() throws {
        let pcm = ALSATestPCMs.integerStereo
        XCTAssertThrowsError(try ALSASource(device: pcm.name, requested: floatMono, periodFrames: 441, bufferCount: 3, strictFormat: true))
        let source = try ALSASource(device: pcm.name, requested: floatMono, periodFrames: 441, bufferCount: 3)
        source.close()
    }

    func testCompressedFormatIsRefusedBeforeOpening() {
        XCTAssertThrowsError(
            try ALSASource(device: ALSATestPCMs.s16Stereo48k.name, requested: .opus(channels: 2, framesPerPacket: 960), periodFrames: 480, bufferCount: 3)
        ) { error in
            guard case CaptureError.unsupportedFormat(let message) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(message.contains("ask for s16, s24, s32 or f32"), message)
        }
    }

    func testPeriodAndBufferCountAreValidated() {
        let format = ALSATestPCMs.s16Stereo48k.fixtureFormat
        XCTAssertThrowsError(try ALSASource(device: ALSATestPCMs.s16Stereo48k.name, requested: format, periodFrames: 0, bufferCount: 3)) { error in
            XCTAssertEqual(error as? CaptureError, .openFailed("the ALSA period must be at least 1 frame (asked for 0); use a larger buffer duration"))
        }
        XCTAssertThrowsError(try ALSASource(device: ALSATestPCMs.s16Stereo48k.name, requested: format, periodFrames: 480, bufferCount: 1)) { error in
            XCTAssertEqual(error as? CaptureError, .openFailed("the ALSA ring buffer needs at least 2 periods (asked for 1); use 2 or more buffers"))
        }
    }
}
