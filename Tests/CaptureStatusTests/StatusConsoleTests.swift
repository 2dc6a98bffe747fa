import CaptureStatus
import Foundation
import XCTest

/// Log lines and the status line share standard error: a log line never lands on the status line.
final class StatusConsoleTests: XCTestCase {
    func testLogLineClearsTheStatusLineAndTheStatusIsRedrawnUnderIt() {
        let output = OutputRecorder()
        let console = StatusConsole(write: output.record)
        console.writeLine("before any status")
        console.drawStatus("L -12.0 │ streaming")
        console.drawStatus("L -12.1 │ streaming")
        console.writeLine("2026-11-23T10:00:00.000Z warning capture-send: something")
        console.endStatus("L -12.2 │ finished")
        console.writeLine("2026-11-23T10:00:01.000Z notice capture-send: stream delivered")
        console.endStatus("ignored: no status line is drawn")
        XCTAssertEqual(output.texts, [
            "before any status\n",
            "\rL -12.0 │ streaming\u{1B}[K",
            "\rL -12.1 │ streaming\u{1B}[K",
            "\r\u{1B}[K2026-11-23T10:00:00.000Z warning capture-send: something\n\rL -12.1 │ streaming\u{1B}[K",
            "\rL -12.2 │ finished\u{1B}[K\n",
            "2026-11-23T10:00:01.000Z notice capture-send: stream delivered\n",
        ])
        // What a terminal shows: the log line on a line of its own, the status line last.
        XCTAssertEqual(TerminalScreen.lines(output.texts.joined()), [
            "before any status",
            "2026-11-23T10:00:00.000Z warning capture-send: something",
            "L -12.2 │ finished",
            "2026-11-23T10:00:01.000Z notice capture-send: stream delivered",
            "",
        ])
    }

    func testFinalLineEndsTheStatusLineAndNoStatusIsDrawnAfterIt() {
        let output = OutputRecorder()
        let console = StatusConsole(write: output.record)
        console.drawStatus("L -12.0 │ streaming")
        console.writeFinalLine("delivery stopped by a second signal: 2.0 s of audio stays in the spool")
        console.drawStatus("L -12.0 │ reconnecting")
        console.writeLine("a late log line")
        console.endStatus("L -12.0 │ finished")
        XCTAssertEqual(output.texts, [
            "\rL -12.0 │ streaming\u{1B}[K",
            "\rL -12.0 │ streaming\u{1B}[K\ndelivery stopped by a second signal: 2.0 s of audio stays in the spool\n",
            "a late log line\n",
        ])
        XCTAssertEqual(TerminalScreen.lines(output.texts.joined()), [
            "L -12.0 │ streaming", "delivery stopped by a second signal: 2.0 s of audio stays in the spool", "a late log line", "",
        ])
    }

    func testReporterAndLogLinesShareOneConsole() {
        let scheduler = ManualStatusScheduler()
        let output = OutputRecorder()
        let console = StatusConsole(write: output.record)
        let reporter = StatusReporter(
            mode: .terminal(refresh: StatusReporter.Mode.terminalRefresh),
            snapshot: { SenderStatusSnapshot(link: .streaming, secondsCaptured: 1) }, width: { 100 }, console: console, scheduler: scheduler
        )
        reporter.start()
        scheduler.advance(by: .milliseconds(250))
        console.writeLine("a log line")
        scheduler.advance(by: .milliseconds(100))
        reporter.stop()
        let status = "streaming │ cap 1.0s ack 0.0s │ spool 0.0s 0 B │ 0 b/s │ xruns 0"
        XCTAssertEqual(TerminalScreen.lines(output.texts.joined()), ["a log line", status, ""])
        XCTAssertFalse(output.texts.joined().contains("xruns 0\u{1B}[Ka log line"))
    }

    func testPlainAndJSONStatusLinesAreLinesOfTheirOwn() throws {
        for mode in [StatusReporter.Mode.plain(interval: .seconds(1)), .json(interval: .seconds(1))] {
            let scheduler = ManualStatusScheduler()
            let output = OutputRecorder()
            let console = StatusConsole(write: output.record)
            let reporter = StatusReporter(mode: mode, snapshot: { SenderStatusSnapshot(link: .streaming) }, console: console, scheduler: scheduler)
            reporter.start()
            scheduler.advance(by: .seconds(1))
            console.writeLine("log")
            scheduler.advance(by: .seconds(1))
            reporter.stop()
            XCTAssertEqual(output.texts.count, 3)
            XCTAssertEqual(output.texts[1], "log\n")
            for text in output.texts {
                XCTAssertTrue(text.hasSuffix("\n"), text)
                XCTAssertFalse(text.contains("\r") || text.contains("\u{1B}"), text)
            }
            if case .json = mode {
                let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(output.texts[0].utf8)) as? [String: Any])
                XCTAssertEqual(object["message"] as? String, "status")
                XCTAssertEqual(object["link"] as? String, "streaming")
            }
        }
    }
}

/// What a terminal displays for text with carriage returns, "clear to end of line" and newlines:
/// the lines on screen, the last one where the cursor is.
enum TerminalScreen {
    static func lines(_ text: String) -> [String] {
        let scalars = Array(text.unicodeScalars)
        var lines: [String] = []
        var current: [Unicode.Scalar] = []
        var column = 0
        var index = 0
        func line() -> String { String(String.UnicodeScalarView(current)) }
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\u{1B}", index + 2 < scalars.count, scalars[index + 1] == "[", scalars[index + 2] == "K" {
                current.removeSubrange(min(column, current.count)...)
                index += 3
                continue
            }
            switch scalar {
            case "\r": column = 0
            case "\n":
                lines.append(line())
                current = []
                column = 0
            default:
                if column < current.count { current[column] = scalar } else { current.append(scalar) }
                column += 1
            }
            index += 1
        }
        lines.append(line())
        return lines
    }
}
