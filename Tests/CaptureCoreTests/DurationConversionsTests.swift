import CaptureCore
import Foundation
import XCTest

/// `Duration`'s conversions for the clocks and texts that count seconds or nanoseconds.
final class DurationConversionsTests: XCTestCase {
    func testNanosecondsRoundTowardZeroAndClampToInt64() {
        let rows: [(Duration, Int64, UInt)] = [
            (.zero, 0, #line),
            (.seconds(1), 1_000_000_000, #line),
            (.milliseconds(100), 100_000_000, #line),
            (.nanoseconds(1), 1, #line),
            (.nanoseconds(-1), -1, #line),
            (.seconds(-2), -2_000_000_000, #line),
            // 1.5 ns, and -1.5 ns, round toward zero.
            (.nanoseconds(1) + .nanoseconds(1) / 2, 1, #line),
            (.zero - (.nanoseconds(1) + .nanoseconds(1) / 2), -1, #line),
            (.seconds(0.25), 250_000_000, #line),
            // A century fits; Int64.max ns is about 292 years.
            (.seconds(100 * 365 * 86_400), 100 * 365 * 86_400 * 1_000_000_000, #line),
            (.seconds(Int64.max), Int64.max, #line),
            (.seconds(Int64.min), Int64.min, #line),
            (.seconds(9_223_372_036), 9_223_372_036_000_000_000, #line),
            (.seconds(9_223_372_037), Int64.max, #line),
        ]
        for (duration, expected, line) in rows {
            XCTAssertEqual(duration.inNanoseconds, expected, "\(duration)", line: line)
        }
    }

    func testSecondsAreTheDurationAsADouble() {
        XCTAssertEqual(Duration.seconds(10).inSeconds, 10)
        XCTAssertEqual(Duration.milliseconds(1_500).inSeconds, 1.5)
        XCTAssertEqual(Duration.milliseconds(-250).inSeconds, -0.25)
        XCTAssertEqual(Duration.zero.inSeconds, 0)
    }

    func testSecondsAsPeopleWriteThem() {
        let rows: [(Duration, String, UInt)] = [
            (.zero, "0", #line), (.seconds(10), "10", #line), (.seconds(2.5), "2.5", #line), (.seconds(0.3), "0.3", #line),
            (.seconds(0.1) + .seconds(0.2), "0.3", #line), (.milliseconds(1), "0.001", #line), (.nanoseconds(1), "0.000000001", #line),
            (.seconds(-1.5), "-1.5", #line), (.seconds(86_400), "86400", #line), (.seconds(1) - .nanoseconds(1) / 2, "1", #line),
        ]
        for (duration, text, line) in rows {
            XCTAssertEqual(duration.secondsText, text, "\(duration)", line: line)
        }
    }

    func testTheDurationBetweenTwoDates() {
        let start = Date(timeIntervalSince1970: 1_000)
        XCTAssertEqual(start.addingTimeInterval(2.5).duration(since: start), .milliseconds(2_500))
        XCTAssertEqual(start.duration(since: start), .zero)
        XCTAssertEqual(start.duration(since: start.addingTimeInterval(1)), .seconds(-1))
    }
}
