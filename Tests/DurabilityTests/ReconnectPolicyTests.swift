import CaptureSender
import XCTest

/// Backoff with full jitter: doubling from the initial delay, capped, never below half the ceiling.
final class ReconnectPolicyTests: XCTestCase {
    func testDelaysDoubleUpToTheMaximumWithJitterBetweenHalfAndAll() {
        let policy = ReconnectPolicy(initial: 0.5, maximum: 30)
        XCTAssertEqual(policy.delay(afterFailures: 0, random: 0), 0.25)
        XCTAssertEqual(policy.delay(afterFailures: 0, random: 0.999_999), 0.5, accuracy: 1e-5)
        XCTAssertEqual(policy.delay(afterFailures: 3, random: 0.999_999), 4, accuracy: 1e-4)
        XCTAssertEqual(policy.delay(afterFailures: 3, random: 0), 2)
        XCTAssertEqual(policy.delay(afterFailures: 6, random: 0.999_999), 30, accuracy: 1e-4, "capped at the maximum")
        XCTAssertEqual(policy.delay(afterFailures: 10_000, random: 0), 15, "no overflow after many failures")
    }

    func testMaximumBelowInitialIsRaisedToIt() {
        let policy = ReconnectPolicy(initial: 2, maximum: 1)
        XCTAssertEqual(policy.maximum, 2)
        XCTAssertEqual(policy.delay(afterFailures: 5, random: 0.999_999), 2, accuracy: 1e-5)
    }
}
