import CaptureCore
import CaptureWire
import XCTest

/// Error codes, frames and the conversion of stream formats.
final class WireErrorTests: XCTestCase {
    func testCodesOfEachErrorClass() {
        let expectations: [(WireError, Capture_V1_Error.Code)] = [
            (.badPreamble(received: [1]), .malformedFrame),
            (.clientSpeaksTLS, .malformedFrame),
            (.zeroLengthFrame, .malformedFrame),
            (.unknownFrameType(10), .malformedFrame),
            (.truncatedFrame(receivedBytes: 3, expectedBytes: nil), .malformedFrame),
            (.frameTooLarge(length: 5, limit: 4), .frameTooLarge),
            (.unsupportedVersion(received: 2, supported: 1), .unsupportedVersion),
            (.missingFormat, .badFormat),
            (.badFormat(.channelCountOutOfRange(9)), .badFormat),
            (.unexpectedMessage(.ack, expecting: "Hello"), .unexpectedMessage),
            (.sequenceGap(expected: 3, received: 5), .sequenceGap),
            (.cannotResume(requested: 3, oldestHeld: 5, heldUntilSampleTime: 4_800), .sequenceGap),
            (.sampleTimeMismatch(sequence: 1, expected: 0, received: 4), .invalidMessage),
            (.ackBeyondSent(acknowledged: 9, highestSent: 4), .invalidMessage),
            (.sendOutOfOrder("x"), .internal),
        ]
        for (error, code) in expectations {
            XCTAssertEqual(error.code, code, "\(error)")
        }
    }

    func testErrorFrameCarriesCodeMessageAndIsFatal() throws {
        let frame = WireError.sequenceGap(expected: 5, received: 7).errorFrame
        XCTAssertEqual(frame.code, .sequenceGap)
        XCTAssertTrue(frame.fatal)
        XCTAssertEqual(frame.message, "sequence 7 arrived but 5 was expected next; the sender must resend from 5")
    }

    /// A receiver that cannot resume because it lost acknowledged audio says where its recording
    /// ends, in a field the sender reads (not only in the message); no other Error carries it.
    func testACannotResumeErrorNamesWhereTheReceiversRecordingEnds() throws {
        let frame = WireError.cannotResume(requested: 1, oldestHeld: 16, heldUntilSampleTime: 0).errorFrame
        XCTAssertEqual(frame.code, .sequenceGap)
        XCTAssertTrue(frame.hasHeldUntilSampleTime)
        XCTAssertEqual(frame.heldUntilSampleTime, 0)
        XCTAssertEqual(frame.message, "the receiver asks to resume at sequence 1 (its recording ends at sample 0) but the sender holds nothing before 16:"
            + " audio the receiver acknowledged is lost; the sender delivers the rest as a new stream (new stream id) and names the lost seconds")
        XCTAssertFalse(WireError.sequenceGap(expected: 5, received: 7).errorFrame.hasHeldUntilSampleTime)
    }

    func testPeersOfOtherProtocolsGetNoErrorFrame() {
        XCTAssertFalse(WireError.clientSpeaksTLS.peerUnderstandsErrorFrame)
        XCTAssertFalse(WireError.clientSpeaksHTTP(method: "GET").peerUnderstandsErrorFrame)
        XCTAssertTrue(WireError.unsupportedVersion(received: 2, supported: 1).peerUnderstandsErrorFrame)
    }

    func testStreamFormatRoundTripsThroughTheWire() throws {
        for format in [WireFixtures.pcmFormat, WireFixtures.opusFormat,
                       StreamFormat.linearPCM(sampleRate: 96_000, channels: 8, sample: .f32)] {
            let wire = Capture_V1_StreamFormat(format)
            XCTAssertEqual(try StreamFormat(wire: wire), format)
        }
        let wire = Capture_V1_StreamFormat(WireFixtures.pcmFormat)
        XCTAssertEqual(wire.formatID, 0x6C70_636D)
        XCTAssertEqual(wire.formatFlags, 0x0C)
        XCTAssertEqual(wire.bytesPerFrame, 4)
    }

    func testInvalidWireFormatIsBadFormatWithTheStreamFormatErrorText() {
        var wire = Capture_V1_StreamFormat(WireFixtures.pcmFormat)
        wire.channelsPerFrame = 12
        wire.bytesPerFrame = 24
        wire.bytesPerPacket = 24
        XCTAssertThrowsError(try StreamFormat(wire: wire)) { error in
            XCTAssertEqual(error as? WireError, .badFormat(.channelCountOutOfRange(12)))
            XCTAssertEqual(
                String(describing: error),
                "the stream format is not accepted: 12 channels is out of range: use 1 to 8 channels")
        }
    }
}
