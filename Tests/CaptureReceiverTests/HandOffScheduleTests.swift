@testable import CaptureReceiver
import Foundation
import XCTest

/// `--on-finalize`'s schedule: one run per file at a time, a cap on runs at once, retries with
/// exponential backoff forever, a file finished again while running runs once more.
final class HandOffScheduleTests: XCTestCase {
    private let s: Int64 = 1_000_000_000

    func testBackoffDoublesFromOneSecondUpToFiveMinutes() {
        let schedule = HandOffSchedule()
        XCTAssertEqual((1...11).map { schedule.backoff(afterFailures: $0) / s }, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300])
    }

    func testTable() {
        struct Step { let event: HandOffSchedule.Event; let actions: [HandOffSchedule.Action]; let line: UInt }
        let steps: [Step] = [
            // Three files finish; two may run at once.
            Step(event: .enqueued(path: "a.caf", now: 0), actions: [.start(path: "a.caf", attempt: 1)], line: #line),
            Step(event: .enqueued(path: "b.caf", now: 0), actions: [.start(path: "b.caf", attempt: 1)], line: #line),
            Step(event: .enqueued(path: "c.caf", now: 0), actions: [], line: #line),
            // a fails: retried in 1 s; c takes its slot at once.
            Step(event: .runEnded(path: "a.caf", succeeded: false, now: 10), actions: [
                .retry(path: "a.caf", at: 10 + s, afterAttempt: 1), .start(path: "c.caf", attempt: 1), .wake(at: 10 + s),
            ], line: #line),
            // b succeeds: its journal entry goes; a is not due yet.
            Step(event: .runEnded(path: "b.caf", succeeded: true, now: 20), actions: [.completed(path: "b.caf"), .wake(at: 10 + s)], line: #line),
            // a is due: second attempt.
            Step(event: .tick(now: 10 + s), actions: [.start(path: "a.caf", attempt: 2)], line: #line),
            // a finished again while running (a cut repeated after a crash): it runs once more after.
            Step(event: .enqueued(path: "a.caf", now: 20 + s), actions: [], line: #line),
            Step(event: .runEnded(path: "a.caf", succeeded: true, now: 30 + s), actions: [.start(path: "a.caf", attempt: 1)], line: #line),
            // c fails twice: 1 s, then 2 s.
            Step(event: .runEnded(path: "c.caf", succeeded: false, now: 40 + s), actions: [.retry(path: "c.caf", at: 40 + 2 * s, afterAttempt: 1), .wake(at: 40 + 2 * s)], line: #line),
            Step(event: .tick(now: 40 + 2 * s), actions: [.start(path: "c.caf", attempt: 2)], line: #line),
            Step(event: .runEnded(path: "c.caf", succeeded: false, now: 50 + 2 * s), actions: [.retry(path: "c.caf", at: 50 + 4 * s, afterAttempt: 2), .wake(at: 50 + 4 * s)], line: #line),
            // Enqueued again while waiting for a retry: due at once.
            Step(event: .enqueued(path: "c.caf", now: 60 + 2 * s), actions: [.start(path: "c.caf", attempt: 3)], line: #line),
            Step(event: .runEnded(path: "c.caf", succeeded: true, now: 70 + 2 * s), actions: [.completed(path: "c.caf")], line: #line),
            Step(event: .runEnded(path: "a.caf", succeeded: true, now: 80 + 2 * s), actions: [.completed(path: "a.caf")], line: #line),
            // A run's end for a file not running is ignored.
            Step(event: .runEnded(path: "z.caf", succeeded: true, now: 90 + 2 * s), actions: [], line: #line),
        ]
        var schedule = HandOffSchedule(maximumRunning: 2)
        for step in steps {
            XCTAssertEqual(schedule.handle(step.event), step.actions, line: step.line)
            XCTAssertLessThanOrEqual(schedule.running, 2, line: step.line)
        }
        XCTAssertEqual(schedule.pending, 0)
    }

    func testTheJournalKeepsEntriesUntilRemovedAndAFreshReaderFindsThem() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-journal-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = HandOffJournal(outputDirectory: folder)
        let first = FinishedRecording(relativePath: "a/b_100000.caf", streamName: "b", streamID: "x", sourceHost: "h", firstSampleTime: "2026-11-24T10:00:00.000Z", frames: 480_000, complete: true)
        let second = FinishedRecording(relativePath: "a/b_100010.caf", streamName: "b", streamID: "x", sourceHost: "h", firstSampleTime: "2026-11-24T10:00:10.000Z", frames: 480_000, complete: false)
        try journal.record(first)
        try journal.record(second)
        try journal.record(first)  // the same file again: one entry
        XCTAssertEqual(Set(HandOffJournal(outputDirectory: folder).entries().recordings.map(\.relativePath)), ["a/b_100000.caf", "a/b_100010.caf"])
        journal.remove(first.relativePath)
        XCTAssertEqual(HandOffJournal(outputDirectory: folder).entries().recordings, [second])
        try Data("not json".utf8).write(to: URL(fileURLWithPath: journal.folder).appendingPathComponent("broken.json"))
        XCTAssertEqual(HandOffJournal(outputDirectory: folder).entries().damaged.count, 1)
    }
}
