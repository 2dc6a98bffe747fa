import CaptureSender
import XCTest

/// Backoff with full jitter: doubling from the initial delay, capped, never below half the ceiling.
final class ReconnectPolicyTests: XCTestCase {
    func testDelaysDoubleUpToTheMaximumWithJitterBetweenHalfAndAll() {
        let policy = ReconnectPolicy(initial: .milliseconds(500), maximum: .seconds(30))
        XCTAssertEqual(policy.delay(afterFailures: 0, random: 0), .milliseconds(250))
        XCTAssertEqual(policy.delay(afterFailures: 0, random: 0.75), .microseconds(437_500))
        XCTAssertEqual(policy.delay(afterFailures: 1, random: 0.5), .milliseconds(750))
        XCTAssertEqual(policy.delay(afterFailures: 3, random: 0.5), .seconds(3))
        XCTAssertEqual(policy.delay(afterFailures: 3, random: 0), .seconds(2))
        XCTAssertEqual(policy.delay(afterFailures: 6, random: 0.5), .milliseconds(22_500), "capped at the maximum")
        XCTAssertEqual(policy.delay(afterFailures: 10_000, random: 0), .seconds(15), "no overflow after many failures")
        XCTAssertEqual(policy.delay(afterFailures: -1, random: 2), .milliseconds(500), "out-of-range inputs are clamped")
    }

    func testMaximumBelowInitialIsRaisedToIt() {
        let policy = ReconnectPolicy(initial: .seconds(2), maximum: .seconds(1))
        XCTAssertEqual(policy.maximum, .seconds(2))
        XCTAssertEqual(policy.delay(afterFailures: 5, random: 1), .seconds(2))
    }

    func testTheFirstDelayIsAMillisecondAtLeast() {
        let policy = ReconnectPolicy(initial: .zero, maximum: .zero)
        XCTAssertEqual(policy.initial, .milliseconds(1))
        XCTAssertEqual(policy.maximum, .milliseconds(1))
        XCTAssertEqual(policy.delay(afterFailures: 0, random: 0), .microseconds(500))
    }
}
