@testable import CaptureReceiver
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `--on-finalize`'s schedule: one run per file at a time, a cap on runs at once that hung runs do
/// not hold, retries with exponential backoff forever, time limits, a file held elsewhere looked at
/// again, a file finished again while running runs once more, and the receiver's stop.
final class HandOffScheduleTests: XCTestCase {
    private let s: Int64 = 1_000_000_000
    private typealias Step = (event: HandOffSchedule.Event, actions: [HandOffSchedule.Action], line: UInt)

    private var limits: HandOffSchedule.Limits {
        var limits = HandOffSchedule.Limits()
        limits.slots = 2
        limits.patience = 10 * s
        limits.ceiling = 3
        limits.timeout = 60 * s
        limits.grace = 5 * s
        return limits
    }

    private func play(_ steps: [Step], limits: HandOffSchedule.Limits? = nil, file: StaticString = #filePath) -> HandOffSchedule {
        var schedule = HandOffSchedule(limits: limits ?? self.limits)
        for step in steps {
            XCTAssertEqual(schedule.handle(step.event), step.actions, file: file, line: step.line)
            XCTAssertLessThanOrEqual(schedule.running, schedule.limits.ceiling, file: file, line: step.line)
        }
        return schedule
    }

    func testBackoffDoublesFromOneSecondUpToFiveMinutesAndABusyFileIsLookedAtAtLeastEveryTenSeconds() {
        let schedule = HandOffSchedule()
        XCTAssertEqual((1...11).map { schedule.backoff(afterFailures: $0) / s }, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300])
        XCTAssertEqual((1...6).map { schedule.busyWait(afterChecks: $0) / s }, [1, 2, 4, 8, 10, 10])
        XCTAssertEqual(schedule.backoff(afterFailures: Int.max), 300 * s, "no overflow however many failures")
        XCTAssertEqual(schedule.limits.timeout, 600 * s, "the default time limit: 10 minutes")
    }

    func testRunsRetriesAndAFileFinishedAgainWhileRunning() {
        let schedule = play([
            // Three files finish; two may run at once.
            (.enqueued(path: "a.caf", now: 0), [.start(path: "a.caf", attempt: 1), .wake(at: 60 * s)], #line),
            (.enqueued(path: "b.caf", now: 0), [.start(path: "b.caf", attempt: 1), .wake(at: 60 * s)], #line),
            // c waits for a slot: the schedule wakes when the runs stop holding theirs.
            (.enqueued(path: "c.caf", now: 0), [.wake(at: 10 * s)], #line),
            // a fails: retried in 1 s; c takes its slot at once.
            (.runEnded(path: "a.caf", outcome: .failed, now: 10), [
                .retry(path: "a.caf", at: 10 + s, afterAttempt: 1, timedOut: false), .start(path: "c.caf", attempt: 1), .wake(at: 10 + s),
            ], #line),
            // b succeeds; a is not due yet.
            (.runEnded(path: "b.caf", outcome: .succeeded, now: 20), [.completed(path: "b.caf"), .wake(at: 10 + s)], #line),
            // a is due: second attempt.
            (.tick(now: 10 + s), [.start(path: "a.caf", attempt: 2), .wake(at: 60 * s + 10)], #line),
            // a finished again while running (a cut repeated after a crash): it runs once more after,
            // even though this run succeeded (it ran for the entry before).
            (.enqueued(path: "a.caf", now: 20 + s), [.wake(at: 60 * s + 10)], #line),
            (.runEnded(path: "a.caf", outcome: .succeeded, now: 30 + s), [.start(path: "a.caf", attempt: 1), .wake(at: 60 * s + 10)], #line),
            // c fails twice: 1 s, then 2 s.
            (.runEnded(path: "c.caf", outcome: .failed, now: 40 + s), [.retry(path: "c.caf", at: 40 + 2 * s, afterAttempt: 1, timedOut: false), .wake(at: 40 + 2 * s)], #line),
            (.tick(now: 40 + 2 * s), [.start(path: "c.caf", attempt: 2), .wake(at: 61 * s + 30)], #line),
            (.runEnded(path: "c.caf", outcome: .failed, now: 50 + 2 * s), [.retry(path: "c.caf", at: 50 + 4 * s, afterAttempt: 2, timedOut: false), .wake(at: 50 + 4 * s)], #line),
            // Finished again while waiting for a retry: due at once.
            (.enqueued(path: "c.caf", now: 60 + 2 * s), [.start(path: "c.caf", attempt: 3), .wake(at: 61 * s + 30)], #line),
            (.runEnded(path: "c.caf", outcome: .succeeded, now: 70 + 2 * s), [.completed(path: "c.caf"), .wake(at: 61 * s + 30)], #line),
            (.runEnded(path: "a.caf", outcome: .succeeded, now: 80 + 2 * s), [.completed(path: "a.caf")], #line),
            // A run's end for a file not running is ignored.
            (.runEnded(path: "z.caf", outcome: .succeeded, now: 90 + 2 * s), [], #line),
        ])
        XCTAssertEqual(schedule.pending, 0)
        XCTAssertEqual(schedule.running, 0)
    }

    func testARunPastItsTimeLimitIsStoppedThenKilledAndRetriedAsTimedOut() {
        let schedule = play([
            (.enqueued(path: "a.caf", now: 0), [.start(path: "a.caf", attempt: 1), .wake(at: 60 * s)], #line),
            (.tick(now: 60 * s), [.terminate(path: "a.caf", reason: .timedOut), .wake(at: 65 * s)], #line),
            (.tick(now: 65 * s), [.kill(path: "a.caf")], #line),
            (.runEnded(path: "a.caf", outcome: .failed, now: 66 * s), [.retry(path: "a.caf", at: 67 * s, afterAttempt: 1, timedOut: true), .wake(at: 67 * s)], #line),
            (.tick(now: 67 * s), [.start(path: "a.caf", attempt: 2), .wake(at: 127 * s)], #line),
            // Stopped at its limit but it still ended well (it finished as SIGTERM came): done.
            (.tick(now: 127 * s), [.terminate(path: "a.caf", reason: .timedOut), .wake(at: 132 * s)], #line),
            (.runEnded(path: "a.caf", outcome: .succeeded, now: 128 * s), [.completed(path: "a.caf")], #line),
        ])
        XCTAssertEqual(schedule.pending, 0)
    }

    /// Two runs that hang hold their slots for `patience` only: a third file starts then; the
    /// ceiling still bounds the runs at once; after their time limit the hung files wait behind
    /// files with fewer failures.
    func testHungRunsDoNotHoldBackOtherFiles() {
        let schedule = play([
            (.enqueued(path: "hung-1", now: 0), [.start(path: "hung-1", attempt: 1), .wake(at: 60 * s)], #line),
            (.enqueued(path: "hung-2", now: 0), [.start(path: "hung-2", attempt: 1), .wake(at: 60 * s)], #line),
            (.enqueued(path: "quick", now: s), [.wake(at: 10 * s)], #line),
            (.tick(now: 10 * s), [.start(path: "quick", attempt: 1), .wake(at: 60 * s)], #line),
            (.runEnded(path: "quick", outcome: .succeeded, now: 11 * s), [.completed(path: "quick"), .wake(at: 60 * s)], #line),
            // Three at once at most (the ceiling): hung-1, hung-2, slow; fourth waits.
            (.enqueued(path: "slow", now: 12 * s), [.start(path: "slow", attempt: 1), .wake(at: 60 * s)], #line),
            (.enqueued(path: "fourth", now: 13 * s), [.wake(at: 22 * s)], #line),
            (.tick(now: 22 * s), [.wake(at: 60 * s)], #line),
            (.tick(now: 60 * s), [
                .terminate(path: "hung-1", reason: .timedOut), .terminate(path: "hung-2", reason: .timedOut), .wake(at: 65 * s),
            ], #line),
            (.runEnded(path: "hung-1", outcome: .failed, now: 61 * s), [
                .retry(path: "hung-1", at: 62 * s, afterAttempt: 1, timedOut: true), .start(path: "fourth", attempt: 1), .wake(at: 62 * s),
            ], #line),
            (.runEnded(path: "hung-2", outcome: .failed, now: 61 * s), [.retry(path: "hung-2", at: 62 * s, afterAttempt: 1, timedOut: true), .wake(at: 62 * s)], #line),
            // A file finishes as the hung ones are due again: it goes first (no failures).
            (.enqueued(path: "fifth", now: 62 * s), [.start(path: "fifth", attempt: 1), .wake(at: 71 * s)], #line),
        ])
        XCTAssertEqual(schedule.running, 3)
    }

    /// A file whose journal entry another process holds is looked at again, 1 s, 2 s, 4 s... at most
    /// 10 s apart; that costs no attempt.
    func testAFileHeldElsewhereIsLookedAtAgainWithoutCountingAnAttempt() {
        var steps: [Step] = [(.enqueued(path: "a.caf", now: 0), [.start(path: "a.caf", attempt: 1), .wake(at: 60 * s)], #line)]
        var now: Int64 = 0
        for (checks, wait) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (6, 10)] {
            steps.append((.runEnded(path: "a.caf", outcome: .busy, now: now), [.busy(path: "a.caf", at: now + Int64(wait) * s, checks: checks), .wake(at: now + Int64(wait) * s)], #line))
            now += Int64(wait) * s
            steps.append((.tick(now: now), [.start(path: "a.caf", attempt: 1), .wake(at: now + 60 * s)], #line))
        }
        steps += [
            (.runEnded(path: "a.caf", outcome: .failed, now: now), [.retry(path: "a.caf", at: now + s, afterAttempt: 1, timedOut: false), .wake(at: now + s)], #line),
            (.tick(now: now + s), [.start(path: "a.caf", attempt: 2), .wake(at: now + 61 * s)], #line),
            // Busy again after a failure: counted from 1 s again.
            (.runEnded(path: "a.caf", outcome: .busy, now: now + s), [.busy(path: "a.caf", at: now + 2 * s, checks: 1), .wake(at: now + 2 * s)], #line),
            (.tick(now: now + 2 * s), [.start(path: "a.caf", attempt: 2), .wake(at: now + 62 * s)], #line),
            (.runEnded(path: "a.caf", outcome: .succeeded, now: now + 3 * s), [.completed(path: "a.caf")], #line),
        ]
        XCTAssertEqual(play(steps).pending, 0)
    }

    /// The receiver stops: running commands get SIGTERM, SIGKILL after the grace; nothing starts any
    /// more; their files stay for the next start; `stopped` once none runs.
    func testStoppingStopsEveryRunAndStartsNothing() {
        let schedule = play([
            (.enqueued(path: "a.caf", now: 0), [.start(path: "a.caf", attempt: 1), .wake(at: 60 * s)], #line),
            (.enqueued(path: "b.caf", now: 0), [.start(path: "b.caf", attempt: 1), .wake(at: 60 * s)], #line),
            (.enqueued(path: "c.caf", now: 0), [.wake(at: 10 * s)], #line),
            (.stop(now: s), [.terminate(path: "a.caf", reason: .stopping), .terminate(path: "b.caf", reason: .stopping), .wake(at: 6 * s)], #line),
            // A file finished while stopping is journaled, not started.
            (.enqueued(path: "d.caf", now: 2 * s), [.wake(at: 6 * s)], #line),
            (.runEnded(path: "b.caf", outcome: .failed, now: 2 * s), [.keptForNextStart(path: "b.caf"), .wake(at: 6 * s)], #line),
            (.tick(now: 6 * s), [.kill(path: "a.caf")], #line),
            (.runEnded(path: "a.caf", outcome: .failed, now: 7 * s), [.keptForNextStart(path: "a.caf"), .stopped], #line),
            (.tick(now: 70 * s), [], #line),
            (.stop(now: 71 * s), [], #line),
        ])
        XCTAssertEqual(schedule.pending, 4, "every file's hand-off runs at the next start")
        // Nothing running: stopped at once.
        _ = play([(.stop(now: 0), [.stopped], #line), (.enqueued(path: "a.caf", now: 1), [], #line)])
    }

    func testStoppingARunAlreadyPastItsTimeLimitKeepsItsKillTime() {
        _ = play([
            (.enqueued(path: "a.caf", now: 0), [.start(path: "a.caf", attempt: 1), .wake(at: 60 * s)], #line),
            (.tick(now: 60 * s), [.terminate(path: "a.caf", reason: .timedOut), .wake(at: 65 * s)], #line),
            (.stop(now: 62 * s), [.wake(at: 65 * s)], #line),
            (.tick(now: 65 * s), [.kill(path: "a.caf")], #line),
            (.runEnded(path: "a.caf", outcome: .failed, now: 66 * s), [.keptForNextStart(path: "a.caf"), .stopped], #line),
        ])
    }

    /// `inOrder` (the alarm hook): one run at a time in enqueue order; a job being retried holds
    /// back every later one, so a clear is never told before its raise.
    func testInOrderRunsOneJobAtATimeAndARetriedJobHoldsBackTheLaterOnes() {
        var ordered = limits
        ordered.inOrder = true
        let schedule = play([
            (.enqueued(path: "1-raise", now: 0), [.start(path: "1-raise", attempt: 1), .wake(at: 60 * s)], #line),
            // Slots are free, but the first job runs: the second waits.
            (.enqueued(path: "2-clear", now: 0), [.wake(at: 60 * s)], #line),
            // The first fails: retried in 1 s, and the second still waits behind it.
            (.runEnded(path: "1-raise", outcome: .failed, now: 10), [.retry(path: "1-raise", at: 10 + s, afterAttempt: 1, timedOut: false), .wake(at: 10 + s)], #line),
            (.tick(now: 10 + s), [.start(path: "1-raise", attempt: 2), .wake(at: 61 * s + 10)], #line),
            (.runEnded(path: "1-raise", outcome: .succeeded, now: 20 + s), [.completed(path: "1-raise"), .start(path: "2-clear", attempt: 1), .wake(at: 61 * s + 20)], #line),
            (.runEnded(path: "2-clear", outcome: .succeeded, now: 30 + s), [.completed(path: "2-clear")], #line),
        ], limits: ordered)
        XCTAssertEqual(schedule.pending, 0)
    }
}
