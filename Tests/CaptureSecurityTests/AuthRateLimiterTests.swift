import CaptureReceiver
import Foundation
import XCTest

/// The per-address limit on failed authentication, with a clock the test moves.
final class AuthRateLimiterTests: XCTestCase {
    final class TestClock: @unchecked Sendable {
        private let lock = NSLock()
        private var time = Date(timeIntervalSince1970: 1_000_000)
        var now: Date { lock.withLock { time } }
        func advance(_ seconds: TimeInterval) { lock.withLock { time += seconds } }
    }

    func testBlocksAnAddressAfterTheLimitWithinTheWindowForTheBlockDuration() {
        let clock = TestClock()
        let limiter = AuthRateLimiter(maximumFailures: 5, window: .seconds(60), blockDuration: .seconds(60), now: { clock.now })
        for _ in 0..<4 {
            XCTAssertFalse(limiter.recordFailure(from: "10.0.0.1"))
            clock.advance(1)
        }
        XCTAssertNil(limiter.remainingBlock(for: "10.0.0.1"), "four failures are allowed")
        XCTAssertTrue(limiter.recordFailure(from: "10.0.0.1"), "the fifth failure blocks")
        XCTAssertEqual(limiter.remainingBlock(for: "10.0.0.1"), .seconds(60))
        XCTAssertNil(limiter.remainingBlock(for: "10.0.0.2"), "other addresses are not affected")
        clock.advance(0.25)
        XCTAssertEqual(limiter.remainingBlock(for: "10.0.0.1"), .milliseconds(59_750), "the remaining block to the fraction of a second, as a Duration")
        clock.advance(58.75)
        XCTAssertEqual(limiter.remainingBlock(for: "10.0.0.1"), .seconds(1))
        clock.advance(1)
        XCTAssertNil(limiter.remainingBlock(for: "10.0.0.1"), "the block ends")
    }

    func testFailuresOlderThanTheWindowDoNotCount() {
        let clock = TestClock()
        let limiter = AuthRateLimiter(maximumFailures: 3, window: .seconds(60), blockDuration: .seconds(30), now: { clock.now })
        limiter.recordFailure(from: "a")
        limiter.recordFailure(from: "a")
        clock.advance(61)
        XCTAssertFalse(limiter.recordFailure(from: "a"))
        XCTAssertFalse(limiter.recordFailure(from: "a"))
        XCTAssertNil(limiter.remainingBlock(for: "a"))
        XCTAssertTrue(limiter.recordFailure(from: "a"))
        XCTAssertEqual(limiter.remainingBlock(for: "a"), .seconds(30))
    }

    func testSuccessForgetsEarlierFailures() {
        let clock = TestClock()
        let limiter = AuthRateLimiter(maximumFailures: 2, now: { clock.now })
        limiter.recordFailure(from: "a")
        limiter.recordSuccess(from: "a")
        XCTAssertFalse(limiter.recordFailure(from: "a"))
        XCTAssertNil(limiter.remainingBlock(for: "a"))
    }

    func testZeroTurnsTheLimitOff() {
        let limiter = AuthRateLimiter(maximumFailures: 0)
        for _ in 0..<100 { XCTAssertFalse(limiter.recordFailure(from: "a")) }
        XCTAssertNil(limiter.remainingBlock(for: "a"))
    }
}
