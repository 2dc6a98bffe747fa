import CaptureCLISupport
import CaptureReceiver
import CaptureSender
import XCTest

/// Issue 27, item 10: where the libraries turn a configured number into another unit, the
/// conversion is total, whatever an embedding program sets (capture-recv and capture-send check
/// their ranges first).
final class LibraryConversionTests: XCTestCase {
    func testTheStopSequenceDescribesAnyTimeout() {
        let rows: [(Duration, String)] = [
            (.seconds(10), "10"), (.seconds(2.5), "2.5"), (.seconds(0.3), "0.3"), (.milliseconds(1), "0.001"), (.nanoseconds(1), "0.000000001"),
            (.seconds(86_400), "86400"), (.seconds(Int64.max), "\(Int64.max)"), (.seconds(-1.5), "-1.5"),
        ]
        for (timeout, text) in rows {
            XCTAssertEqual(SenderStopSequence.AbandonReason.stopTimeout(timeout).message(naming: CommandLineSettingNames()), "--stop-timeout (\(text) s) passed while delivering")
        }
    }
}
