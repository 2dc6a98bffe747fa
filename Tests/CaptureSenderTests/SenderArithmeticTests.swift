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
