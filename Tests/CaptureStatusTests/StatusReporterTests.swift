import CaptureStatus
import Foundation
import XCTest

/// When and how often status lines are written.
final class StatusReporterTests: XCTestCase {
    private func snapshotCounter() -> (@Sendable () -> SenderStatusSnapshot) {
        let counter = SnapshotCounter()
        return { counter.next() }
    }

    func testPlainLinesAppearOncePerInterval() {
        let scheduler = ManualStatusScheduler()
        let output = OutputRecorder()
        let reporter = StatusReporter(
            mode: .plain(interval: .seconds(10)), snapshot: snapshotCounter(), write: output.record, scheduler: scheduler
        )
        reporter.start()
        XCTAssertEqual(scheduler.periods, [.seconds(10)])
        scheduler.advance(by: .seconds(9))
        XCTAssertEqual(output.texts, [], "no line before the first interval has passed")
        scheduler.advance(by: .seconds(1))
        XCTAssertEqual(output.texts.count, 1)
        scheduler.advance(by: .seconds(25))
        XCTAssertEqual(output.texts.count, 3)
        // Each line is a fresh snapshot, ends with a newline and holds no terminal control characters.
        XCTAssertEqual(output.texts.map { plainValue("captured_s", in: $0.trimmingCharacters(in: .newlines)) }, ["1.00", "2.00", "3.00"])
        for text in output.texts {
            XCTAssertTrue(text.hasPrefix("status link="), text)
            XCTAssertTrue(text.hasSuffix("\n"), text)
            XCTAssertFalse(text.contains("\r") || text.contains("\u{1B}"), text)
        }
        reporter.stop()
        XCTAssertEqual(scheduler.activeSchedules, 0)
        scheduler.advance(by: .seconds(60))
        XCTAssertEqual(output.texts.count, 3, "no line after stop")
    }

    func testTerminalRedrawsTenTimesASecondAndEndsWithANewline() {
        let scheduler = ManualStatusScheduler()
        let output = OutputRecorder()
        let reporter = StatusReporter(
            mode: .terminal(refresh: StatusReporter.Mode.terminalRefresh), snapshot: snapshotCounter(),
            width: { 100 }, write: output.record, scheduler: scheduler
        )
        reporter.start()
        reporter.start()
        XCTAssertEqual(scheduler.periods, [.milliseconds(100)], "start twice schedules once")
        scheduler.advance(by: .seconds(1))
        XCTAssertEqual(output.texts.count, 10)
        for text in output.texts {
            XCTAssertTrue(text.hasPrefix("\r") && text.hasSuffix("\u{1B}[K"), text.debugDescription)
            XCTAssertFalse(text.contains("\n"))
            XCTAssertLessThanOrEqual(text.count - 1 - 3, 99, "one column is left free so the terminal does not wrap")
        }
        reporter.stop()
        XCTAssertEqual(output.texts.count, 11)
        XCTAssertTrue(output.texts.last?.hasSuffix("\u{1B}[K\n") ?? false, "the last redraw ends the line")
    }

    func testQuietWritesNothing() {
        let scheduler = ManualStatusScheduler()
        let output = OutputRecorder()
        let reporter = StatusReporter(mode: .quiet, snapshot: snapshotCounter(), write: output.record, scheduler: scheduler)
        reporter.start()
        scheduler.advance(by: .seconds(100))
        reporter.stop()
        XCTAssertEqual(scheduler.periods, [])
        XCTAssertEqual(output.texts, [])
    }

    func testModeFollowsTheTerminalAndTheFlags() {
        XCTAssertEqual(StatusReporter.Mode.choose(isTerminal: true, interval: .seconds(10), quiet: false), .terminal(refresh: .milliseconds(100)))
        XCTAssertEqual(StatusReporter.Mode.choose(isTerminal: false, interval: .seconds(10), quiet: false), .plain(interval: .seconds(10)))
        XCTAssertEqual(StatusReporter.Mode.choose(isTerminal: true, interval: .seconds(10), quiet: true), .quiet)
        XCTAssertEqual(StatusReporter.Mode.choose(isTerminal: false, interval: .seconds(3), quiet: true), .quiet)
    }

    func testPipeIsNotATerminal() {
        let pipe = Pipe()
        XCTAssertFalse(TerminalQuery.isTerminal(pipe.fileHandleForWriting.fileDescriptor))
        XCTAssertEqual(TerminalQuery.columns(pipe.fileHandleForWriting.fileDescriptor) > 0, true)
    }

    func testRealTimerWritesPlainLinesAtTheInterval() {
        let output = OutputRecorder()
        let started = Date()
        let reporter = StatusReporter(mode: .plain(interval: .milliseconds(200)), snapshot: snapshotCounter(), write: output.record)
        reporter.start()
        let deadline = Date().addingTimeInterval(20)
        while output.texts.count < 4, Date() < deadline { usleep(10_000) }
        reporter.stop()
        let times = output.times
        XCTAssertGreaterThanOrEqual(times.count, 4)
        // A timer never fires early: lines are at least (nearly) an interval apart, the first one an
        // interval after start.
        XCTAssertGreaterThanOrEqual(times.first?.timeIntervalSince(started) ?? 0, 0.19)
        for (earlier, later) in zip(times, times.dropFirst()) {
            XCTAssertGreaterThanOrEqual(later.timeIntervalSince(earlier), 0.15)
        }
    }
}

/// Snapshots whose captured seconds count 1, 2, 3… so each line can be told apart.
private final class SnapshotCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func next() -> SenderStatusSnapshot {
        lock.withLock {
            count += 1
            return SenderStatusSnapshot(link: .streaming, secondsCaptured: Double(count))
        }
    }
}
