import CaptureCore
import Foundation

/// One thread of the `WriterPool`: runs the disk operations handed to it. A stream is bound to one
/// lane for its whole life, so its operations keep their order without a queue of its own.
///
/// Operations run by priority, in the order submitted within each (`Priority`): first the pool's
/// rounds (what a round takes from its streams, and the news that it is durable, so the Acks), then
/// the streams' own operations (audio, gaps, finishing, detaching), then new work (opening a
/// stream's files, sweeping the index). A job of a higher priority submitted while others run goes
/// next, between two of them. So a burst of slow opens (thousands of field units reconnecting at
/// once after a receiver restarts) holds back neither the streams already recording nor any Ack by
/// more than the operation running at that moment. A write still queued when a round takes its
/// stream's audio simply goes into the next round.
///
/// Sendability (`@unchecked Sendable`): `queues`, `stopping`, `stopped` and `thread` are read and written only under `condition`.
final class WriterLane: @unchecked Sendable {
    /// Which queue a job joins.
    enum Priority: Int, CaseIterable {
        /// A step of the pool's round (taking streams' audio, reporting it durable).
        case round
        /// A stream's own operation.
        case stream
        /// Opening a stream's files, or other new work.
        case opening
    }

    private let condition = NSCondition()
    // Guarded by `condition`: the jobs of each priority, highest first.
    private var queues: [[() -> Void]] = Priority.allCases.map { _ in [] }
    private var queued = 0
    private var stopping = false
    private var stopped = false
    private var thread: Thread?

    init(name: String) {
        let thread = Thread { [self] in
            DetachedThread.nameCurrentThread(name)
            run()
        }
        self.thread = thread
        thread.start()
    }

    /// Queues `job`; once the lane has stopped it runs at once on the caller's thread, so no
    /// completion is lost.
    func submit(_ priority: Priority = .stream, _ job: @escaping () -> Void) {
        condition.lock()
        if stopped {
            condition.unlock()
            job()
            return
        }
        queues[priority.rawValue].append(job)
        queued += 1
        if queued == 1 { condition.signal() }
        condition.unlock()
    }

    /// Blocks until every job queued so far has run.
    func drain() {
        let done = DispatchSemaphore(value: 0)
        submit(.opening) { done.signal() }
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
        while true {
            condition.lock()
            while queued == 0 && !stopping { condition.wait() }
            let done = queued == 0
            condition.unlock()
            if done { break }
            runJobs(above: Priority.allCases.count)
        }
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    /// Runs the queued jobs whose priority is above `level` (a raw value; the count of priorities:
    /// all), highest first, until none is queued; before each, those above its own.
    private func runJobs(above level: Int) {
        while true {
            condition.lock()
            guard let index = queues[0..<level].firstIndex(where: { !$0.isEmpty }) else {
                condition.unlock()
                return
            }
            let batch = queues[index]
            queues[index].removeAll(keepingCapacity: true)
            queued -= batch.count
            condition.unlock()
            for job in batch {
                runJobs(above: index)
                job()
            }
        }
    }
}
