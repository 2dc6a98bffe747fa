@testable import CaptureSender
import XCTest

/// Values a library caller may hand the sender's messages: none traps (the Hello's start time:
/// SenderSessionTests.testTheHellosStartTimeIsConvertedWithoutTrapping).
final class SenderArithmeticTests: XCTestCase {
    func testGiveUpAndRetryMessagesNeverTrapOnTheirSeconds() {
        let gaveUp = { (seconds: Double) in
            SenderError.gaveUp(receiver: "b:1", reason: .noProgress(seconds: seconds), fromSecond: 0).description
        }
        XCTAssertTrue(gaveUp(3).contains("made no progress for 3 s"))
        XCTAssertTrue(gaveUp(2.5).contains("made no progress for 2.5 s"))
        XCTAssertTrue(gaveUp(1e300).contains("made no progress for 1e+300 s"), gaveUp(1e300))
        XCTAssertTrue(gaveUp(.infinity).contains("made no progress for inf s"), gaveUp(.infinity))
        XCTAssertTrue(SenderError.rateLimited(message: "m", retryAfter: 1e300).description.contains("trying again in 1e+300 s"))
        XCTAssertTrue(SenderError.rateLimited(message: "m", retryAfter: 0.2).description.contains("trying again in 1 s"))
    }
}

/// The stream name of an encoding after the first: `NAME-LABEL`, within the 255 bytes a receiver
/// accepts, the name cut at a character.
final class EncodingStreamNameTests: XCTestCase {
    func testTheNameIsTheCapturesWithTheLabelAndFitsTheLimit() {
        XCTAssertEqual(CaptureStreamer.encodingStreamName("field", label: "opus-64k-20ms"), "field-opus-64k-20ms")
        let long = String(repeating: "é", count: 127)  // 254 bytes
        let named = CaptureStreamer.encodingStreamName(long, label: "opus-64k-20ms")
        XCTAssertLessThanOrEqual(named.utf8.count, 255)
        XCTAssertTrue(named.hasSuffix("é-opus-64k-20ms"), named)
        XCTAssertEqual(named.utf8.count, 2 * 120 + 14)
    }
}
