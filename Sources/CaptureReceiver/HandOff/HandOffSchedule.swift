/// When each finished file's hand-off runs (`--on-finalize`): a pure state machine, events in,
/// actions out. At most one run per file at a time; at most `maximumRunning` runs at once; a failed
/// run is retried after 1 s, 2 s, 4 s... up to `maximumBackoff`, forever (at least once); a file
/// finished again while its hand-off runs (a segment cut repeated after a crash) runs once more after.
struct HandOffSchedule: Equatable {
    /// What happens to a file's hand-off.
    enum Event: Equatable {
        /// The file was finished (or its journal entry found at start), at time `now` (ns).
        case enqueued(path: String, now: Int64)
        /// A run ended.
        case runEnded(path: String, succeeded: Bool, now: Int64)
        /// Time passed (a wake-up the schedule asked for).
        case tick(now: Int64)
    }

    /// What the runner must do.
    enum Action: Equatable {
        /// Start the hand-off of `path` (attempt `attempt`, counting from 1).
        case start(path: String, attempt: Int)
        /// The hand-off of `path` succeeded: remove its journal entry.
        case completed(path: String)
        /// The run failed: it is retried at `at` (ns).
        case retry(path: String, at: Int64, afterAttempt: Int)
        /// Call back with `.tick` at `at` (ns): the earliest retry that is waiting.
        case wake(at: Int64)
    }

    private struct Job: Equatable {
        var failures = 0
        var running = false
        var dueAt: Int64
        /// Finished again while running: run once more.
        var again = false
    }

    let maximumRunning: Int
    let firstBackoff: Int64
    let maximumBackoff: Int64
    private var jobs: [String: Job] = [:]
    /// Paths in the order they were enqueued (runs start oldest first).
    private var order: [String] = []

    init(maximumRunning: Int = 2, firstBackoff: Int64 = 1_000_000_000, maximumBackoff: Int64 = 300_000_000_000) {
        self.maximumRunning = max(1, maximumRunning)
        self.firstBackoff = firstBackoff
        self.maximumBackoff = maximumBackoff
    }

    /// Files with a hand-off not yet done.
    var pending: Int { jobs.count }
    /// Hand-offs running now.
    var running: Int { jobs.values.filter(\.running).count }

    /// The delay before attempt `failures + 1` after `failures` failed ones.
    func backoff(afterFailures failures: Int) -> Int64 {
        var delay = firstBackoff
        for _ in 1..<max(failures, 1) {
            delay *= 2
            if delay >= maximumBackoff { return maximumBackoff }
        }
        return min(delay, maximumBackoff)
    }

    mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        let now: Int64
        switch event {
        case .enqueued(let path, let time):
            now = time
            if var job = jobs[path] {
                if job.running { job.again = true } else { job.dueAt = now }
                jobs[path] = job
            } else {
                jobs[path] = Job(dueAt: now)
                order.append(path)
            }
        case .runEnded(let path, let succeeded, let time):
            now = time
            guard var job = jobs[path], job.running else { break }
            job.running = false
            if job.again {
                job.again = false
                job.failures = 0
                job.dueAt = now
                jobs[path] = job
            } else if succeeded {
                jobs[path] = nil
                order.removeAll { $0 == path }
                actions.append(.completed(path: path))
            } else {
                job.failures += 1
                job.dueAt = now + backoff(afterFailures: job.failures)
                jobs[path] = job
                actions.append(.retry(path: path, at: job.dueAt, afterAttempt: job.failures))
            }
        case .tick(let time):
            now = time
        }
        var runningCount = running
        for path in order where runningCount < maximumRunning {
            guard var job = jobs[path], !job.running, job.dueAt <= now else { continue }
            job.running = true
            jobs[path] = job
            runningCount += 1
            actions.append(.start(path: path, attempt: job.failures + 1))
        }
        // Jobs already due but without a free slot start when a run ends.
        if let next = jobs.values.filter({ !$0.running && $0.dueAt > now }).map(\.dueAt).min() {
            actions.append(.wake(at: next))
        }
        return actions
    }
}
