import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The receiver's alarms with the real executables (issue 30, item 2): silence in the middle of a
/// take raises the silence alarm and the sound coming back clears it; a link cut for longer than
/// the threshold raises link-down until the sender is back. Each reaches the log (one line per
/// raise and per clear), the stream's row in the API, and the Prometheus metric.
final class AlarmEndToEndTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("alarms-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    /// The raised alarms of the API's first stream row.
    private func raisedAlarms(_ port: Int) -> [String]? {
        guard let response = try? OpsHTTPClient.request(port: port, path: "/api/streams"), response.status == 200,
              let rows = (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [[String: Any]], let row = rows.first
        else { return nil }
        return row["alarms"] as? [String]
    }

    private func lines(_ text: String, containing needle: String) -> [Substring] {
        text.split(separator: "\n").filter { $0.contains(needle) }
    }

    func testSilenceInATakeRaisesTheAlarmAndTheSoundComingBackClearsIt() throws {
        // 2 s of a -12 dBFS tone, 6 s of digital silence, 4 s of the tone again.
        let take = work.appendingPathComponent("take.wav").path
        try SilenceTake.make(at: take, before: 2, silence: 6, after: 4)
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0", "--alarm-silence-s", "3"])
        let port = try receiver.httpPort()
        // The console in a real browser watches it all (when chromium and selenium are here). The
        // script runs as root (its Python has selenium) on a thread of its own; it says it is
        // watching by making `ready`.
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/alarm_browser.py").path
        let screenshot = work.appendingPathComponent("alarm.png").path
        let ready = work.appendingPathComponent("browser-ready").path
        let hasBrowser = ToolRunner.find("chromium") != nil && (try? ToolRunner.run("python3", ["-c", "import selenium"]))?.succeeded == true
        let browser = BrowserRun()
        if hasBrowser {
            Thread.detachNewThread { browser.finish(try? ToolRunner.run("python3", [script, "http://127.0.0.1:\(port)/", screenshot, ready])) }
            XCTAssertTrue(waitFor(60) { FileManager.default.fileExists(atPath: ready) || browser.isFinished }, "the browser is watching")
        }
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "file", "--file", take, "--stream-name", "muted-mic", "--buffer-seconds", "0.1",
        ])
        XCTAssertTrue(waitFor(30) { raisedAlarms(port) == ["silence"] }, "raised in the silence: \(receiver.child.standardError)")
        XCTAssertTrue(waitFor(30) { raisedAlarms(port) == [] }, "cleared when the tone is back: \(receiver.child.standardError)")
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)

        let log = receiver.child.standardError
        let raised = lines(log, containing: "alarm raised: silence")
        let cleared = lines(log, containing: "alarm cleared: silence")
        XCTAssertEqual(raised.count, 1, log)
        XCTAssertEqual(cleared.count, 1, log)
        XCTAssertTrue(raised.first?.contains("every channel below -60.0 dBFS for 3 s") ?? false, log)
        XCTAssertTrue(raised.first?.contains("stream=muted-mic") ?? false, log)
        XCTAssertEqual(lines(log, containing: "alarm raised").count, 1, "no other alarm: \(log)")

        let metrics = try OpsHTTPClient.request(port: port, path: "/metrics")
        let series = metrics.body.split(separator: "\n").filter { $0.hasPrefix("capture_stream_alarm{") }
        XCTAssertEqual(series.count, 1, metrics.body)
        let silence = try XCTUnwrap(series.first)
        XCTAssertTrue(silence.contains("kind=\"silence\"") && silence.contains("stream=\"muted-mic\""), "\(series)")
        XCTAssertEqual(silence.split(separator: " ").last.flatMap { Double($0) }, 0, "cleared: \(silence)")
        XCTAssertTrue(metrics.body.contains("# HELP capture_stream_alarm "), metrics.body)
        if hasBrowser {
            let run = try XCTUnwrap(browser.wait(seconds: 120), "the browser script ended")
            XCTAssertEqual(run.exitStatus, 0, run.errorText)
            let seen = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.standardOutput) as? [String: Any], run.outputText)
            let raisedInBrowser = try XCTUnwrap(seen["raised"] as? [String: Any], "the console showed the alarm: \(seen)")
            XCTAssertEqual(raisedInBrowser["banner"] as? String, "muted-mic: silence")
            XCTAssertEqual(raisedInBrowser["row_class"] as? String, "alarmed")
            XCTAssertEqual(raisedInBrowser["badges"] as? [String], ["silence"])
            XCTAssertEqual(seen["cleared"] as? Bool, true, "the console cleared it: \(seen)")
            XCTAssertEqual(seen["row_class_after"] as? String, "")
            XCTAssertEqual(seen["badges_after"] as? [String], [])
            XCTAssertTrue(FileManager.default.fileExists(atPath: screenshot))
        }
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    /// `--on-alarm` runs exactly once for the raise and once for the clear of a silence alarm, with
    /// the receiver SIGKILLed in between: the restarted receiver gives the resumed stream its
    /// raised alarm back, does not tell it again, and tells its clear when the tone comes back.
    func testTheAlarmHookRunsOncePerRaiseAndPerClearAcrossAReceiverKill() throws {
        // 2 s of a -12 dBFS tone, 8 s of digital silence, 6 s of the tone again.
        let take = work.appendingPathComponent("take.wav").path
        try SilenceTake.make(at: take, before: 2, silence: 8, after: 6)
        let output = work.appendingPathComponent("out")
        let told = work.appendingPathComponent("told.log")
        let hook = #"printf '%s %s %s %s %s\n' "$1" "$2" "$3" "$CAPTURE_ALARM_CHANGE" "$CAPTURE_ALARM_ID" >> "# + told.path
        // The silence alarm only (8 s of silence would raise the loudness alarm too).
        let options = ["--on-alarm", hook, "--alarm-silence-s", "2", "--alarm-loudness-s", "86400", "--log-level", "info", "--http", "127.0.0.1:0"]
            + Resilience.receiverOptions
        let first = try ReceiverUnderTest(extraArguments: options, outputDirectory: output)
        let sender = try ChildProcess(Products.send, [
            first.address, "--source", "file", "--file", take, "--stream-name", "muted-mic", "--buffer-seconds", "0.1",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))
        func toldLines() -> [[Substring]] {
            ((try? String(contentsOf: told, encoding: .utf8)) ?? "").split(separator: "\n").map { $0.split(separator: " ") }
        }
        func pendingRuns() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: output.appendingPathComponent(".alarm-hook").path)) ?? []).filter { $0.hasSuffix(".json") }.count
        }
        Resilience.waitUntil("the raise was told") { toldLines().count == 1 }
        Resilience.waitUntil("its run completed (its journal entry is gone)") { pendingRuns() == 0 }
        first.child.signal(SIGKILL)
        _ = first.child.wait(seconds: 10)
        let second = try ReceiverUnderTest(extraArguments: options, outputDirectory: output, port: first.port)
        Resilience.waitUntil("the clear was told") { toldLines().count == 2 }
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        let runs = toldLines()
        XCTAssertEqual(runs.map { $0.prefix(4).joined(separator: " ") }, ["raised silence muted-mic raised", "cleared silence muted-mic cleared"], "\(runs)")
        XCTAssertEqual(Set(runs.compactMap(\.last)).count, 2, "each run has its own CAPTURE_ALARM_ID: \(runs)")
        let log = second.child.standardError
        XCTAssertEqual(lines(log, containing: "alarm raised: silence: raised before the receiver restarted").count, 1, log)
        XCTAssertEqual(lines(log, containing: "alarm cleared: silence").count, 1, log)
        XCTAssertEqual(lines(log, containing: "alarm hook done").count, 1, "only the clear ran in the second receiver: \(log)")
        XCTAssertEqual(second.stop(), 0, log)
        XCTAssertEqual(toldLines().count, 2, "nothing more at the stop")
        XCTAssertEqual(pendingRuns(), 0)
    }

    func testTheAlarmHooksOptionsAreCheckedAndDocumented() throws {
        let never = work.appendingPathComponent("never").path
        let empty = try ToolRunner.run(Products.recv, ["--out", never, "--on-alarm", " "])
        XCTAssertEqual(empty.exitStatus, 64, empty.errorText)
        XCTAssertTrue(empty.errorText.contains("--on-alarm is empty; give the command to run for each alarm raised or cleared"), empty.errorText)
        for (value, problem) in [
            ("0s", "is too short: use 1 second to 1 hour"), ("2h", "is too long: use 1 second to 1 hour"),
            ("soon", "is no duration: write it like 1h, 15m, 10s or 1h30m (1 second to 1 hour)"),
        ] {
            let run = try ToolRunner.run(Products.recv, ["--out", never, "--on-alarm", "true", "--on-alarm-timeout=\(value)"])
            XCTAssertEqual(run.exitStatus, 64, "\(value): \(run.errorText)")
            XCTAssertTrue(run.errorText.contains("--on-alarm-timeout \(value) \(problem)"), "\(value): \(run.errorText)")
        }
        let help = try ToolRunner.run(Products.recv, ["--help"])
        let text = help.outputText.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(text.contains("--on-alarm <CMD>") && text.contains("--on-alarm-timeout <DURATION>") && text.contains("(default: 1m)"), help.outputText)
    }

    func testAClippedToneRaisesTheClippingAlarmAndTheStreamsEndClearsIt() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        // A sine at full scale: every 0.1 s buffer reaches it, so more than 3 within 10 s.
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--tone-level=0", "--duration", "4", "--stream-name", "hot-input", "--buffer-seconds", "0.1",
        ])
        XCTAssertTrue(waitFor(30) { raisedAlarms(port) == ["clipping"] }, receiver.child.standardError)
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)
        XCTAssertTrue(waitFor(30) { raisedAlarms(port) == [] }, "the finished stream cleared it: \(receiver.child.standardError)")
        let log = receiver.child.standardError
        let raised = lines(log, containing: "alarm raised: clipping")
        XCTAssertEqual(raised.count, 1, log)
        XCTAssertTrue(raised.first?.contains("clipped buffers within 10 s (more than 3)") ?? false, log)
        XCTAssertEqual(lines(log, containing: "alarm cleared: clipping: the stream finished").count, 1, log)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testALinkCutLongerThanTheThresholdRaisesLinkDownUntilTheSenderIsBack() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0", "--alarm-link-down-s", "1"])
        let port = try receiver.httpPort()
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: 11)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "6", "--stream-name", "cut-link", "--buffer-seconds", "0.1",
            "--spool", work.appendingPathComponent("spool").path, "--reconnect-min", "0.05", "--reconnect-max", "0.3",
        ])
        Resilience.waitUntil("the receiver opened the stream") { receiver.child.standardError.contains("stream opened") }
        // Every connection is cut at once, the live one and each reconnect, until the link is back.
        proxy.mode = .resetAfterRandomBytes(0...0)
        proxy.resetAll()
        XCTAssertTrue(waitFor(30) { raisedAlarms(port) == ["link-down"] }, receiver.child.standardError)
        proxy.mode = .pass
        XCTAssertTrue(waitFor(30) { raisedAlarms(port) == [] }, receiver.child.standardError)
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)

        let log = receiver.child.standardError
        XCTAssertEqual(lines(log, containing: "alarm raised: link-down").count, 1, log)
        XCTAssertEqual(lines(log, containing: "alarm cleared: link-down: the sender is connected again").count, 1, log)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}

/// The result of a tool run on a thread of its own (a browser script), once it ended.
final class BrowserRun: @unchecked Sendable {
    private let condition = NSCondition()
    private var ended = false
    private var result: ToolResult?

    var isFinished: Bool { condition.withLock { ended } }

    func finish(_ result: ToolResult?) {
        condition.withLock {
            self.result = result
            ended = true
            condition.broadcast()
        }
    }

    /// The run's result once it ended, or nil when it did not end within `seconds` (or could not start).
    func wait(seconds: Double) -> ToolResult? {
        let deadline = Date().addingTimeInterval(seconds)
        return condition.withLock {
            while !ended, condition.wait(until: deadline) {}
            return result
        }
    }
}
