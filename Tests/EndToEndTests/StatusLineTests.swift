import Foundation
import TestSupport
import XCTest

/// capture-send's status line: off a terminal a plain (or JSON) line at each --status-interval, on a
/// terminal one line redrawn in place; levels measured from the real audio; log lines on lines of
/// their own; overdue acknowledgements shown.
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
            receiver.address, "--source", "tone", "--tone-level=-6", "--tone-frequency", "1000", "--rate", "48000", "--channels", "2", "--format", "s16",
            "--duration", "3", "--status-interval", "0.5", "--stream-name", "levels", "--buffer-seconds", "0.05",
        ])
        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        let lines = sender.standardError.split(separator: "\n").filter { $0.hasPrefix("status ") }
        // 3 s of paced capture at a 0.5 s interval: about 6 lines (timer and start-up jitter aside).
        XCTAssertGreaterThanOrEqual(lines.count, 4, sender.standardError)
        XCTAssertLessThanOrEqual(lines.count, 8, sender.standardError)
        var captured: [Double] = []
        var checkedLoudness = 0
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
            // A stereo 1 kHz sine's loudness is its peak level in LUFS; before 3 s the short-term
            // window also holds the silence before the tone: 10·log10(t / 3) below it.
            let seconds = captured.last ?? 0
            if seconds >= 1 {
                let shortTerm = try XCTUnwrap(Double(values["short_term_lufs"] ?? ""), "\(line)")
                XCTAssertEqual(shortTerm, -6 + 10 * log10(min(seconds, 3) / 3), accuracy: 0.5, "\(line)")
                checkedLoudness += 1
            }
        }
        XCTAssertGreaterThanOrEqual(checkedLoudness, 2, sender.standardError)
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

    // MARK: On a terminal

    /// Runs capture-send on a pseudo-terminal (`script` from util-linux) `columns` wide; standard
    /// error and output both arrive on the terminal, which `ChildProcess` reads as its output.
    private func senderOnTerminal(_ arguments: [String], columns: Int = 200) throws -> (child: ChildProcess, state: URL) {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("sender-state-\(UUID().uuidString)")
        // script runs as the test user and setpriv inside it: setpriv drops privileges only as it
        // starts capture-send, so a build folder only the test user may enter still works.
        let unprivileged = Unprivileged.command(Products.send, arguments)
        let command = ([unprivileged.executable] + unprivileged.arguments).map(Self.shellQuoted).joined(separator: " ")
        let child = try ChildProcess("/usr/bin/script", ["-qfec", command, "/dev/null"], environment: [
            "COLUMNS": "\(columns)", "XDG_STATE_HOME": state.path, "TERM": "xterm",
        ], unprivileged: false)
        return (child, state)
    }

    private static func shellQuoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// The terminal's output split into what each redraw or line wrote: the terminal's own "\r\n"
    /// line ends become "\n", then every "\r"-started piece is one redraw.
    private static func redraws(_ output: String) -> [String] {
        output.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false)
            .flatMap { $0.split(separator: "\r", omittingEmptySubsequences: false) }
            .map { $0.replacingOccurrences(of: "\u{1B}[K", with: "") }
    }

    /// What stays visible of each line: its last redraw.
    private static func visibleLines(_ output: String) -> [String] {
        output.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false).map { line in
            String(line.split(separator: "\r", omittingEmptySubsequences: false).last ?? "").replacingOccurrences(of: "\u{1B}[K", with: "")
        }
    }

    private static let logLinePattern = try? NSRegularExpression(pattern: #"^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z (trace|debug|info|notice|warning|error|critical) capture-send: "#)

    private static func isLogLine(_ text: String) -> Bool {
        logLinePattern?.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }

    func testTerminalShowsTheToneLevelAtEveryRedrawAndLogLinesOnLinesOfTheirOwn() throws {
        let first = try ReceiverUnderTest()
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("status-spool-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(spool)
        defer { try? FileManager.default.removeItem(at: spool) }
        // 0.5 s capture buffers (the default) and redraws every 100 ms: most redraws see no new audio.
        let (sender, state) = try senderOnTerminal([
            first.address, "--source", "tone", "--tone-level=-12", "--channels", "2", "--duration", "6",
            "--stream-name", "terminal", "--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.3",
        ])
        defer { try? FileManager.default.removeItem(at: state) }
        Resilience.waitUntil("the status line shows the link streaming") { sender.standardOutput.contains("│ streaming") }
        usleep(1_000_000)
        // A receiver restart makes the sender log a warning and a notice while the status line runs.
        XCTAssertEqual(first.stop(), 0)
        let second = try ReceiverUnderTest(outputDirectory: first.directory, port: first.port)
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardOutput)
        XCTAssertEqual(second.stop(), 0)
        let output = sender.standardOutput

        // Every redraw after the first audio shows the tone's level on both channels, not −∞.
        let statusRedraws = Self.redraws(output).filter { $0.contains(" │ ") && !Self.isLogLine($0) }
        XCTAssertGreaterThanOrEqual(statusRedraws.count, 30, output)
        let firstAudio = try XCTUnwrap(statusRedraws.firstIndex { $0.contains("-12.0/-15.0") }, output)
        XCTAssertLessThanOrEqual(firstAudio, 10, "the first buffer arrives within a second: \(statusRedraws.prefix(12))")
        for redraw in statusRedraws[firstAudio...] {
            XCTAssertEqual(levelPairs(in: redraw).map(\.peak), [-12.0, -12.0], redraw)
            XCTAssertFalse(redraw.contains("-∞"), redraw)
        }

        // Log lines never share a line with the status line: each is on a line of its own and the
        // status line is drawn again under it.
        XCTAssertNil(output.range(of: #"xruns [0-9]+\u{1B}\[K[^\r\n]"#, options: .regularExpression), output.debugDescription)
        for redraw in Self.redraws(output) where redraw.contains("capture-send: ") {
            XCTAssertTrue(Self.isLogLine(redraw), "a log line that does not start its line: \(redraw.debugDescription)")
        }
        let visible = Self.visibleLines(output)
        let warning = try XCTUnwrap(visible.firstIndex { $0.contains(" warning capture-send: connection to the receiver lost; reconnecting") }, visible.joined(separator: "\n"))
        let notice = try XCTUnwrap(visible.firstIndex { $0.contains(" notice capture-send: reconnected; ") }, visible.joined(separator: "\n"))
        XCTAssertLessThan(warning, notice)
        for index in [warning, notice] {
            XCTAssertTrue(Self.isLogLine(visible[index]), visible[index])
            XCTAssertFalse(visible[index].contains(" │ "), visible[index])
        }
        // Each log line written while the status line is drawn clears it first, and the status
        // line is drawn again right under it.
        let cleared = try NSRegularExpression(pattern: #"\r\x1B\[K([^\r\n]*)\r\n(\r[^\r\n\x1B]*)?"#)
        var logLinesOverStatus: [String] = []
        for match in cleared.matches(in: output, range: NSRange(output.startIndex..., in: output)) {
            let logLine = Range(match.range(at: 1), in: output).map { String(output[$0]) } ?? ""
            let redrawn = Range(match.range(at: 2), in: output).map { String(output[$0]) } ?? ""
            XCTAssertTrue(Self.isLogLine(logLine), logLine.debugDescription)
            XCTAssertTrue(redrawn.contains(" │ "), "no status line under \(logLine.debugDescription): \(redrawn.debugDescription)")
            logLinesOverStatus.append(logLine)
        }
        XCTAssertTrue(logLinesOverStatus.contains { $0.contains("connection to the receiver lost; reconnecting") }, "\(logLinesOverStatus)")
        XCTAssertTrue(logLinesOverStatus.contains { $0.contains("notice capture-send: reconnected; ") }, "\(logLinesOverStatus)")
        // The last status line stays on screen, and the closing notice comes after it.
        let delivered = try XCTUnwrap(visible.lastIndex { $0.contains(" notice capture-send: stream delivered") }, visible.joined(separator: "\n"))
        XCTAssertTrue(visible[delivered - 1].contains("│ finished │"), visible[delivered - 1])
    }

    // MARK: Overdue acknowledgements

    func testHungReceiverShowsNoAckUntilItResumes() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "9", "--status-interval", "0.25", "--stream-name", "hung",
            "--buffer-seconds", "0.1",
        ])
        func statusLines() -> [[String: String]] {
            sender.standardError.split(separator: "\n").filter { $0.hasPrefix("status ") }.map(fields)
        }
        Resilience.waitUntil("audio is acknowledged") { statusLines().contains { (Double($0["acked_s"] ?? "") ?? 0) > 0.5 } }
        let beforeStop = statusLines().count
        receiver.child.signal(SIGSTOP)
        var resumed = false
        defer { if !resumed { receiver.child.signal(SIGCONT) } }
        Resilience.waitUntil("the status says acknowledgements are overdue", seconds: 15) {
            statusLines().contains { (Int($0["no_ack_s"] ?? "") ?? 0) >= 3 }
        }
        usleep(1_000_000)
        receiver.child.signal(SIGCONT)
        resumed = true
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)
        XCTAssertEqual(receiver.stop(), 0)

        let lines = statusLines()
        XCTAssertTrue(lines.prefix(beforeStop).allSatisfy { $0["no_ack_s"] == "0" }, "\(lines.prefix(beforeStop))")
        let overdue = lines.filter { $0["no_ack_s"] != "0" }
        XCTAssertFalse(overdue.isEmpty)
        for line in overdue {
            XCTAssertEqual(line["link"], "streaming", "\(line)")
            XCTAssertGreaterThanOrEqual(Int(line["no_ack_s"] ?? "") ?? 0, 3, "\(line)")
        }
        // While the receiver is stopped, nothing more is acknowledged; the waiting grows by the second.
        let stalled = Set(overdue.compactMap { $0["acked_s"] })
        XCTAssertEqual(stalled.count, 1, "\(overdue)")
        XCTAssertEqual(lines.last?["no_ack_s"], "0", "acknowledgements come again: \(lines.suffix(3))")
    }

    // MARK: JSON

    func testJSONLogFormatWritesOnlyJSONLines() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--tone-level=-6", "--duration", "2", "--status-interval", "0.3",
            "--stream-name", "json", "--log-format", "json", "--log-level", "info", "--buffer-seconds", "0.05",
        ])
        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        let lines = sender.standardError.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertEqual(sender.standardError.last, "\n")
        var messages: [String] = []
        var statuses: [[String: Any]] = []
        for line in lines {
            let object = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
            let message = try XCTUnwrap(object["message"] as? String, "\(line)")
            messages.append(message)
            if message == "status" { statuses.append(object) }
        }
        XCTAssertTrue(messages.contains("capturing"), "\(messages)")
        XCTAssertTrue(messages.contains("stream delivered"), "\(messages)")
        XCTAssertGreaterThanOrEqual(statuses.count, 3, sender.standardError)
        for status in statuses {
            XCTAssertEqual(status["logger"] as? String, "capture-send")
            XCTAssertNotNil(status["time"] as? String)
            XCTAssertEqual(status["overruns"] as? Int, 0)
            XCTAssertNotNil(status["acked_s"] as? Double)
        }
        let last = try XCTUnwrap(statuses.last)
        XCTAssertEqual(last["link"] as? String, "streaming")
        let peaks = try XCTUnwrap(last["peak_dbfs"] as? [Double])
        XCTAssertEqual(peaks.count, 2)
        for peak in peaks { XCTAssertEqual(peak, -6, accuracy: 0.5) }

        // On a terminal too: nothing but JSON lines, no redraws.
        let (onTerminal, state) = try senderOnTerminal([
            receiver.address, "--source", "tone", "--duration", "1.5", "--status-interval", "0.3", "--stream-name", "json-tty",
            "--log-format", "json",
        ])
        defer { try? FileManager.default.removeItem(at: state) }
        XCTAssertEqual(Resilience.finish(onTerminal, seconds: 30), 0, onTerminal.standardOutput)
        let terminalLines = onTerminal.standardOutput.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        XCTAssertGreaterThanOrEqual(terminalLines.count, 3, onTerminal.standardOutput.debugDescription)
        for line in terminalLines {
            XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line.debugDescription)")
        }
        XCTAssertEqual(receiver.stop(), 0)
    }
}
