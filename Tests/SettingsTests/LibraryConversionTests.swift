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
        for (window, seconds) in [(2_592_000.0, 2_592_000), (0.5, 0), (1e308, Int.max), (.infinity, Int.max), (.nan, 0), (-5, 0), (9.3e18, Int.max)] {
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
