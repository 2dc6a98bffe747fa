import Foundation
import TestSupport
import XCTest

/// capture-send's status line when standard error is not a terminal: a plain line at each
/// --status-interval, with levels measured from the real audio.
final class StatusLineTests: XCTestCase {
    private func fields(_ line: Substring) -> [String: String] {
        Dictionary(line.split(separator: " ").dropFirst().compactMap { pair -> (String, String)? in
            let parts = pair.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }, uniquingKeysWith: { first, _ in first })
    }

    func testPlainStatusLinesAppearAtTheIntervalWithTheTonesLevels() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--tone-level=-6", "--rate", "48000", "--channels", "2", "--format", "s16",
            "--duration", "3", "--status-interval", "0.5", "--stream-name", "levels", "--buffer-seconds", "0.05",
        ])
        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        let lines = sender.standardError.split(separator: "\n").filter { $0.hasPrefix("status ") }
        // 3 s of paced capture at a 0.5 s interval: about 6 lines (timer and start-up jitter aside).
        XCTAssertGreaterThanOrEqual(lines.count, 4, sender.standardError)
        XCTAssertLessThanOrEqual(lines.count, 8, sender.standardError)
        var captured: [Double] = []
        for line in lines {
            let values = fields(line)
            captured.append(Double(values["captured_s"] ?? "") ?? -1)
            for peak in (values["peak_dbfs"] ?? "").split(separator: ",") {
                XCTAssertEqual(Double(peak) ?? 0, -6, accuracy: 0.5, "\(line)")
            }
            for rms in (values["rms_dbfs"] ?? "").split(separator: ",") {
                XCTAssertEqual(Double(rms) ?? 0, -9, accuracy: 0.5, "\(line)")
            }
            XCTAssertEqual(values["clipped"], "no,no")
            XCTAssertEqual(values["overruns"], "0")
        }
        // Lines come at the interval: captured seconds grow by about 0.5 s a line.
        let steps = zip(captured.dropFirst(), captured).map { $0 - $1 }
        for step in steps { XCTAssertEqual(step, 0.5, accuracy: 0.15, "\(captured)") }
        let last = fields(try XCTUnwrap(lines.last))
        XCTAssertEqual(last["link"], "streaming")
        XCTAssertEqual(last["bitrate_bps"], "1536000", "16-bit stereo at 48 kHz")
        XCTAssertGreaterThan(Double(last["acked_s"] ?? "") ?? 0, 1.5)

        let quiet = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "1.2", "--status-interval", "0.2", "--quiet", "--stream-name", "quiet",
        ])
        XCTAssertEqual(quiet.wait(seconds: 30), 0, quiet.standardError)
        XCTAssertFalse(quiet.standardError.contains("status "), quiet.standardError)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testFullScaleIsMarkedAsClipping() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--tone-level=0", "--duration", "1.2", "--status-interval", "0.5",
            "--stream-name", "hot", "--channels", "1", "--buffer-seconds", "0.05",
        ])
        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        let lines = sender.standardError.split(separator: "\n").filter { $0.hasPrefix("status ") }
        XCTAssertFalse(lines.isEmpty, sender.standardError)
        for line in lines {
            XCTAssertEqual(fields(line)["clipped"], "yes", "\(line)")
            XCTAssertEqual(Double(fields(line)["peak_dbfs"] ?? "") ?? -99, 0, accuracy: 0.01, "\(line)")
        }
        XCTAssertEqual(receiver.stop(), 0)
    }
}
