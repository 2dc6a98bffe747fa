/// When each job of a hook runs (a finished file's hand-off, `--on-finalize`; an alarm's,
/// `--on-alarm`): a pure state machine, events in, actions out. Times are nanoseconds of a monotonic
/// clock. Jobs are named by their journal key (`path`: a file's path, or an alarm event's key).
///
/// - One run per file at a time in this receiver. Across receivers sharing `--out`, and across a
///   restart while a command a killed receiver started still runs, the journal entry's lock
///   (`HandOffJournal.lock`) keeps it so: a run that finds the lock taken ends `busy`, and the
///   file is looked at again after 1 s, 2 s, 4 s... at most `maximumBusyWait` later.
/// - At most `slots` runs at once that started less than `patience` ago; a run that takes longer
///   stops counting, so commands that hang do not hold back other files' hand-offs; never more
///   than `ceiling` runs in all. Runs start in the order their files finished, files with fewer
///   failed attempts first (a file whose command keeps failing or hanging waits behind the others).
/// - A run that takes longer than `timeout` is stopped (`terminate`: SIGTERM to its process group,
///   then `kill`: SIGKILL `grace` later if it still runs); it counts as a failed attempt, marked
///   timed out.
/// - A failed run is retried after 1 s, 2 s, 4 s... up to `maximumBackoff`, forever (at least once).
/// - `inOrder` (alarms): one run at a time, strictly in enqueue order; a job being retried holds
///   back every later one, so a clear is never told before its raise.
/// - A file finished again while its hand-off runs (a segment cut repeated after a crash) runs once
///   more after.
/// - `stop` (the receiver stops): every run is stopped as above, nothing starts any more, and
///   `stopped` follows once no run is left. Files keep their journal entries: their hand-offs run
///   at the next start.
struct HandOffSchedule: Equatable {
    /// How a run ended.
    enum Outcome: Equatable {
        /// The hand-off is done (or was found done by another receiver): its journal entry is gone.
        case succeeded
        /// The export or the command failed, or the run was stopped.
        case failed
        /// Another process holds the file's journal entry (another receiver runs its hand-off, or
        /// a command left by a receiver that was killed still runs).
        case busy
    }

    /// What happens to a file's hand-off.
    enum Event: Equatable {
        /// The file was finished (or its journal entry found at start), at time `now`.
        case enqueued(path: String, now: Int64)
        /// A run ended.
        case runEnded(path: String, outcome: Outcome, now: Int64)
        /// Time passed (a wake-up the schedule asked for).
        case tick(now: Int64)
        /// The receiver stops.
        case stop(now: Int64)
    }

    /// Why a run is being stopped.
    enum Halt: Equatable {
        /// It ran longer than `timeout`.
        case timedOut
        /// The receiver stops.
        case stopping
    }

    /// What the runner must do.
    enum Action: Equatable {
        /// Start the hand-off of `path` (attempt `attempt`, counting from 1).
        case start(path: String, attempt: Int)
        /// The hand-off of `path` is done: forget it.
        case completed(path: String)
        /// The run failed (`timedOut`: it was stopped at its time limit): it is retried at `at`.
        case retry(path: String, at: Int64, afterAttempt: Int, timedOut: Bool)
        /// The file's journal entry is held elsewhere: look again at `at` (`checks`: how many times
        /// in a row it was found held).
        case busy(path: String, at: Int64, checks: Int)
        /// Send SIGTERM to the run's process group (or keep it from starting its command).
        case terminate(path: String, reason: Halt)
        /// Send SIGKILL to the run's process group.
        case kill(path: String)
        /// The run ended because the receiver stops: its journal entry stays for the next start.
        case keptForNextStart(path: String)
        /// After `stop`: no run is left.
        case stopped
        /// Call back with `.tick` at `at`: the earliest time something is due.
        case wake(at: Int64)
    }

    /// The schedule's numbers (nanoseconds).
    struct Limits: Equatable {
        /// Runs at once that started less than `patience` ago.
        var slots = 2
        var patience: Int64 = 10 * second
        /// Runs at once in all.
        var ceiling = 16
        /// A run's time limit (`--on-finalize-timeout`).
        var timeout: Int64 = 600 * second
        /// From SIGTERM to SIGKILL.
        var grace: Int64 = 5 * second
        var firstBackoff: Int64 = second
        var maximumBackoff: Int64 = 300 * second
        var maximumBusyWait: Int64 = 10 * second
        /// One run at a time, in enqueue order, whatever failed.
        var inOrder = false

        static let second: Int64 = 1_000_000_000
    }

    private struct Run: Equatable {
        var startedAt: Int64
        var halted: Halt?
        var killAt: Int64?
    }

    private struct Job: Equatable {
        /// Enqueue order.
        var sequence: Int
        var dueAt: Int64
        var failures = 0
        var busyChecks = 0
        var run: Run?
        /// Finished again while running: run once more.
        var again = false
    }

    let limits: Limits
    private var jobs: [String: Job] = [:]
    private var nextSequence = 0
    private var stopping = false
    private var stoppedReported = false

    init(limits: Limits = Limits()) {
        var limits = limits
        limits.slots = max(1, limits.slots)
        limits.ceiling = max(limits.slots, limits.ceiling)
        self.limits = limits
    }

    /// Files with a hand-off not yet done.
    var pending: Int { jobs.count }
    /// Hand-offs running now.
    var running: Int { jobs.values.filter { $0.run != nil }.count }

    /// The delay before attempt `failures + 1` after `failures` failed ones.
    func backoff(afterFailures failures: Int) -> Int64 {
        doubling(from: limits.firstBackoff, times: failures - 1, upTo: limits.maximumBackoff)
    }

    /// The delay before looking again at a file found held elsewhere `checks` times in a row.
    func busyWait(afterChecks checks: Int) -> Int64 {
        doubling(from: limits.firstBackoff, times: checks - 1, upTo: limits.maximumBusyWait)
    }

    private func doubling(from first: Int64, times: Int, upTo maximum: Int64) -> Int64 {
        var delay = min(first, maximum)
        for _ in 0..<max(times, 0) {
            guard delay < maximum else { break }
            delay = delay > maximum / 2 ? maximum : delay * 2
        }
        return delay
    }

    mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        let now: Int64
        switch event {
        case .enqueued(let path, let time):
            now = time
            if var job = jobs[path] {
                if job.run != nil { job.again = true } else { job.dueAt = now }
                jobs[path] = job
            } else {
                jobs[path] = Job(sequence: nextSequence, dueAt: now)
                nextSequence += 1
            }
        case .runEnded(let path, let outcome, let time):
            now = time
            guard var job = jobs[path], let run = job.run else { break }
            job.run = nil
            if outcome == .succeeded, !job.again {
                jobs[path] = nil
                actions.append(.completed(path: path))
            } else if stopping {
                jobs[path] = job
                actions.append(.keptForNextStart(path: path))
            } else if job.again {
                job.again = false
                job.failures = 0
                job.busyChecks = 0
                job.dueAt = now
                jobs[path] = job
            } else if outcome == .busy {
                job.busyChecks += 1
                job.dueAt = now + busyWait(afterChecks: job.busyChecks)
                jobs[path] = job
                actions.append(.busy(path: path, at: job.dueAt, checks: job.busyChecks))
            } else {
                job.failures += 1
                job.busyChecks = 0
                job.dueAt = now + backoff(afterFailures: job.failures)
                jobs[path] = job
                actions.append(.retry(path: path, at: job.dueAt, afterAttempt: job.failures, timedOut: run.halted == .timedOut))
            }
        case .tick(let time):
            now = time
        case .stop(let time):
            now = time
            if !stopping {
                stopping = true
                for path in runningPaths() {
                    guard var job = jobs[path], var run = job.run else { continue }
                    if run.halted == nil { actions.append(.terminate(path: path, reason: .stopping)) }
                    run.halted = run.halted ?? .stopping
                    run.killAt = min(run.killAt ?? .max, now + limits.grace)
                    job.run = run
                    jobs[path] = job
                }
            }
        }
        // Time limits, and SIGKILL for runs that outlived their grace.
        for path in runningPaths() {
            guard var job = jobs[path], var run = job.run else { continue }
            if run.halted == nil, now - run.startedAt >= limits.timeout {
                run.halted = .timedOut
                run.killAt = now + limits.grace
                actions.append(.terminate(path: path, reason: .timedOut))
            } else if let killAt = run.killAt, killAt <= now {
                run.killAt = nil
                actions.append(.kill(path: path))
            }
            job.run = run
            jobs[path] = job
        }
        if !stopping {
            actions += startDue(now: now)
        } else if !stoppedReported, running == 0 {
            stoppedReported = true
            actions.append(.stopped)
        }
        if let next = nextWake(now: now) { actions.append(.wake(at: next)) }
        return actions
    }

    /// Paths with a run, in enqueue order.
    private func runningPaths() -> [String] {
        jobs.filter { $0.value.run != nil }.sorted { $0.value.sequence < $1.value.sequence }.map(\.key)
    }

    /// Runs that hold one of the `slots`: started less than `patience` ago.
    private func counting(now: Int64) -> Int {
        jobs.values.filter { job in job.run.map { now - $0.startedAt < limits.patience } ?? false }.count
    }

    /// Jobs due and not running, fewest failures first, then in enqueue order (`inOrder`: only the
    /// oldest job, and only while none runs).
    private func due(now: Int64) -> [String] {
        if limits.inOrder {
            guard running == 0, let (path, job) = jobs.min(by: { $0.value.sequence < $1.value.sequence }), job.dueAt <= now else { return [] }
            return [path]
        }
        return jobs.filter { $0.value.run == nil && $0.value.dueAt <= now }
            .sorted { ($0.value.failures, $0.value.sequence) < ($1.value.failures, $1.value.sequence) }
            .map(\.key)
    }

    private mutating func startDue(now: Int64) -> [Action] {
        var actions: [Action] = []
        var inSlots = counting(now: now)
        var total = running
        for path in due(now: now) {
            guard inSlots < limits.slots, total < limits.ceiling, var job = jobs[path] else { break }
            job.run = Run(startedAt: now)
            jobs[path] = job
            inSlots += 1
            total += 1
            actions.append(.start(path: path, attempt: job.failures + 1))
        }
        return actions
    }

    /// The earliest future time something is due: a waiting job, a time limit, a SIGKILL, or (when
    /// jobs wait for a slot) the moment a run stops holding one.
    private func nextWake(now: Int64) -> Int64? {
        var times: [Int64] = []
        let waitingForSlot = !stopping && !due(now: now).isEmpty
        for job in jobs.values {
            if let run = job.run {
                if run.halted == nil { times.append(run.startedAt + limits.timeout) }
                if let killAt = run.killAt { times.append(killAt) }
                if waitingForSlot, now - run.startedAt < limits.patience { times.append(run.startedAt + limits.patience) }
            } else if !stopping, job.dueAt > now {
                times.append(job.dueAt)
            }
        }
        return times.filter { $0 > now }.min()
    }
}
