import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The watch desk in a real browser (issue 30, item 4): one field unit takes with `capture-send -i`
/// through a pseudo-terminal (a marker, a pause) while the console in headless chromium watches;
/// the silence in the take raises and clears an alarm, the marker and the pause appear in the
/// stream's timeline, the meters show their scale and loudness, and the finished recording is
/// listed, downloaded (a click, and a byte range) and exported; the page fits a phone's screen.
final class ConsoleDeskEndToEndTests: XCTestCase {
    private var work: URL!
    private static let interactive = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Interactive")
    private static let browser = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser")

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("desk-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    func testTheDeskSeesTheAlarmTheMarkerAndThePauseAndDownloadsTheRecording() throws {
        guard ToolRunner.find("chromium") != nil, (try? ToolRunner.run("python3", ["-c", "import selenium"]))?.succeeded == true else {
            throw XCTSkip("chromium and selenium are not installed")
        }
        // 3 s of a -12 dBFS tone, 5 s of digital silence, 6 s of the tone.
        let take = work.appendingPathComponent("take.wav").path
        try SilenceTake.make(at: take, before: 3, silence: 5, after: 6)
        let receiver = try ReceiverUnderTest(extraArguments: [
            "--http", "127.0.0.1:0", "--alarm-silence-s", "2", "--alarm-loudness-s", "86400", "--resume-window", "0",
        ])
        let port = try receiver.httpPort()

        let ready = work.appendingPathComponent("browser-ready").path
        let sawMarker = work.appendingPathComponent("saw-marker").path
        let downloads = work.appendingPathComponent("downloads")
        // DESK_SCREENSHOTS=FOLDER keeps the browser's screenshots there (docs/console*.png come from them).
        let screenshots = ProcessInfo.processInfo.environment["DESK_SCREENSHOTS"].map { URL(fileURLWithPath: $0) } ?? work.appendingPathComponent("screenshots")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let run = BrowserRun()
        let script = Self.browser.appendingPathComponent("desk_browser.py").path
        Thread.detachNewThread {
            run.finish(try? ToolRunner.run("python3", [script, "http://127.0.0.1:\(port)/", ready, sawMarker, downloads.path, screenshots.path]))
        }
        XCTAssertTrue(waitFor(60) { FileManager.default.fileExists(atPath: ready) || run.isFinished }, "the browser is watching")

        // The crew drops a labelled marker, pauses, and resumes once the desk saw the marker.
        let steps = work.appendingPathComponent("steps")
        try ([
            "expect 1 interactive: space pauses",
            "expect 1 capturing",
            "keys mdesk check\\r",
            "expect 1 marker dropped",
            "keys  ",
            "expect 1 capture paused",
            "await \(sawMarker)",
            "keys  ",
            "expect 1 capture resumed",
        ].joined(separator: "\n") + "\n").write(to: steps, atomically: true, encoding: .utf8)
        Unprivileged.handOver(steps.path)
        // The driver runs as the test user and starts the sender through setpriv (as the
        // unprivileged user, on the driver's terminal): the unprivileged user may not reach the
        // checkout or the built products on its own (a clone in a private folder).
        let sender = Unprivileged.command(Products.send, [
            "-i", receiver.address, "--source", "file", "--file", take, "--stream-name", "desk-unit", "--buffer-seconds", "0.1", "--log-level", "info",
            "--spool", work.appendingPathComponent("spool").path,
        ])
        let driver = try ChildProcess(
            "/usr/bin/python3", [Self.interactive.appendingPathComponent("pty_drive.py").path, steps.path, "--", sender.executable] + sender.arguments,
            unprivileged: false)
        XCTAssertEqual(Resilience.finish(driver, seconds: 150), 0, "\(driver.standardOutput)\n\(driver.standardError)")

        let result = try XCTUnwrap(run.wait(seconds: 300), "the browser script ended")
        XCTAssertEqual(result.exitStatus, 0, result.errorText)
        let seen = try XCTUnwrap(try JSONSerialization.jsonObject(with: result.standardOutput) as? [String: Any], result.outputText)
        let context = "\(seen)\n\(receiver.child.standardError)"

        // The alarm rose and cleared on the desk.
        let raised = try XCTUnwrap(seen["raised"] as? [String: Any], context)
        XCTAssertEqual(raised["banner"] as? String, "desk-unit: silence", context)
        XCTAssertEqual(raised["row_class"] as? String, "alarmed", context)
        XCTAssertEqual(seen["cleared"] as? Bool, true, context)

        // The timeline: the connection, the marker with its label, the pause, the alarm, the end.
        let timeline = try XCTUnwrap(seen["timeline"] as? [[String: String]], context)
        let kinds = timeline.compactMap { $0["kind"] }
        XCTAssertEqual(kinds.first, "opened", context)
        XCTAssertEqual(kinds.last, "finished", context)
        XCTAssertEqual(kinds.filter { $0 == "marker" }.count, 1, context)
        XCTAssertEqual(kinds.filter { $0 == "pause" }.count, 1, context)
        XCTAssertEqual(kinds.filter { $0 == "alarm-raised" }.count, 1, context)
        XCTAssertEqual(kinds.filter { $0 == "alarm-cleared" }.count, 1, context)
        XCTAssertTrue(timeline.contains { $0["kind"] == "marker" && ($0["detail"] ?? "").hasPrefix("desk check @ ") }, context)
        XCTAssertTrue(timeline.contains { $0["kind"] == "alarm-raised" && ($0["detail"] ?? "").hasPrefix("silence: every channel below -60.0 dBFS") }, context)

        // The meters: a dBFS scale, the loudness in figures.
        XCTAssertEqual(seen["scale"] as? [String], ["-60", "-48", "-36", "-24", "-18", "-12", "-6", "-3", "0"], context)
        let figures = try XCTUnwrap(seen["figures"] as? String, context)
        XCTAssertTrue(figures.hasPrefix("peak -12.0 dBFS · S ") && figures.contains(" LUFS · M ") && figures.contains(" dBTP"), figures)
        XCTAssertEqual(seen["lamp_lit"] as? Bool, false, "a -12 dBFS tone never lights the clip lamp: \(context)")

        // The recordings view: the finished take, its marker and pause, downloaded and exported.
        let file = try XCTUnwrap(receiver.files().first, context)
        let bytes = try XCTUnwrap(try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int)
        let caf = try CAFFile.read(path: file.path)
        let recordings = try XCTUnwrap(seen["recordings"] as? [[String: Any]], context)
        XCTAssertEqual(recordings.count, 1, context)
        let listed = try XCTUnwrap(recordings.first)
        XCTAssertEqual(listed["path"] as? String, file.lastPathComponent)
        XCTAssertEqual(listed["markers"] as? String, "1", context)
        XCTAssertTrue((listed["gaps"] as? String)?.hasPrefix("1 (") ?? false, "the pause is the take's one gap: \(context)")
        XCTAssertEqual(listed["complete"] as? String, "yes", context)
        XCTAssertEqual(listed["links"] as? [String], ["CAF", "WAV", "RF64", "FLAC"], context)
        XCTAssertEqual(caf.markers.filter { $0.userLabel != nil }.map(\.name), ["marker: desk check"])
        let fetches = try XCTUnwrap(seen["fetches"] as? [String: Any], context)
        XCTAssertEqual(fetches["range_status"] as? Int, 206, context)
        XCTAssertEqual(fetches["range_content_range"] as? String, "bytes 0-3/\(bytes)", context)
        XCTAssertEqual(fetches["range_text"] as? String, "caff", context)
        XCTAssertEqual(fetches["whole_status"] as? Int, 200, context)
        XCTAssertEqual(fetches["whole_length"] as? Int, bytes, context)
        XCTAssertEqual(fetches["wav_status"] as? Int, 200, context)
        XCTAssertEqual(fetches["wav_magic"] as? String, "RIFF", context)
        let download = try XCTUnwrap(seen["download"] as? [String: Any], "the click downloaded the file: \(context)")
        XCTAssertEqual(download["name"] as? String, file.lastPathComponent)
        XCTAssertEqual(download["bytes"] as? Int, bytes)
        XCTAssertEqual(try Data(contentsOf: downloads.appendingPathComponent(file.lastPathComponent)), try Data(contentsOf: file), "byte for byte")

        // A phone's screen: the table folds into cards, nothing wider than the screen.
        let phone = try XCTUnwrap(seen["phone"] as? [String: Any], context)
        let inner = try XCTUnwrap(phone["inner"] as? Int)
        XCTAssertLessThanOrEqual(inner, 400)
        XCTAssertLessThanOrEqual(try XCTUnwrap(phone["scroll"] as? Int), inner, "no sideways scrolling: \(phone)")
        XCTAssertEqual(phone["hidden_head"] as? String, "none")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}
