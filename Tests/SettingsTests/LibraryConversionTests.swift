import CaptureCLISupport
import CaptureReceiver
import CaptureSender
import XCTest

/// Issue 27, item 10: where the libraries turn a configured number into another unit, the
/// conversion is total, whatever an embedding program sets (capture-recv and capture-send check
/// their ranges first).
final class LibraryConversionTests: XCTestCase {
    func testTheResumeWindowInWholeSecondsNeverTraps() {
        var configuration = ReceiverConfiguration(outputDirectory: "/nonexistent")
        let rows: [(Duration, Int)] = [
            (.seconds(2_592_000), 2_592_000), (.milliseconds(500), 0), (.milliseconds(86_400_999), 86_400), (.seconds(Int64.max), Int.max),
            (.zero, 0), (.seconds(-5), 0),
        ]
        for (window, seconds) in rows {
            configuration.resumeWindow = window
            XCTAssertEqual(configuration.resumeWindowSeconds, seconds, "\(window)")
        }
    }

    func testTheStopSequenceDescribesAnyTimeout() {
        for (timeout, text) in [(10.0, "10"), (2.5, "2.5"), (1e300, "1e+300")] {
            XCTAssertEqual(SenderStopSequence.AbandonReason.stopTimeout(seconds: timeout).message(naming: CommandLineSettingNames()), "--stop-timeout (\(text) s) passed while delivering")
        }
    }
}
