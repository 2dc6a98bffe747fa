import Foundation

/// One thread of the `WriterPool`: runs the disk operations handed to it one after another, in the
/// order they were submitted. A stream is bound to one lane for its whole life, so its operations
/// keep their order without a queue of its own.
///
/// Sendability (`@unchecked Sendable`): `jobs`, `stopping`, `stopped` and `thread` are read and written only under `condition`.
final class WriterLane: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var jobs: [() -> Void] = []
    private var stopping = false
    private var stopped = false
    private var thread: Thread?

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        self.thread = thread
        thread.start()
    }

    /// Queues `job`; once the lane has stopped it runs at once on the caller's thread, so no
    /// completion is lost.
    func submit(_ job: @escaping () -> Void) {
        condition.lock()
        if stopped {
            condition.unlock()
            job()
            return
        }
        jobs.append(job)
        if jobs.count == 1 { condition.signal() }
        condition.unlock()
    }

    /// Blocks until every job queued so far has run.
    func drain() {
        let done = DispatchSemaphore(value: 0)
        submit { done.signal() }
        done.wait()
    }

    /// Runs what is queued, then ends the thread and waits for it to end.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !stopped { condition.wait() }
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty { break }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job() }
            condition.lock()
        }
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}
