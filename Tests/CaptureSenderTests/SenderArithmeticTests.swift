@testable import CaptureSender
import XCTest

/// Values a damaged spool or a library caller may hand the sender's messages and Hello: none traps.
final class SenderArithmeticTests: XCTestCase {
    func testAHellosStartTimeIsClampedNotTrapped() {
        let rows: [(Double, Int64)] = [
            (1_800_000_000.5, 1_800_000_000_500_000_000),
            (-1.25, -1_250_000_000),
            (1e300, .max), (-1e300, .min), (.infinity, .max), (-.infinity, .min), (.nan, .min),
            (9_223_372_036.854_775, 9_223_372_036_854_774_784),
        ]
        for (seconds, expected) in rows { XCTAssertEqual(StreamSender.unixNanoseconds(seconds), expected, "\(seconds)") }
    }

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
