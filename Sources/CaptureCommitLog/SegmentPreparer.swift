import CaptureCore
import Foundation

/// Makes the commit log's next segment ahead of need, on a thread of its own, so that no round waits
/// while 64 MiB of zeros are written and synced. PostgreSQL likewise creates WAL segments before the
/// writer reaches them (`PreallocXlogFiles`) rather than in the commit path.
///
/// The log asks for a segment with `prepare(_:)` after a commit, and takes it with `take(_:)` when a
/// batch first reaches it: a segment still being made is waited for (the round would otherwise make
/// it itself, from the start), one never asked for is left to the log. A failure is not reported
/// here: the log makes the segment itself when it needs it, and reports what fails then. Before the
/// log lists, renames or removes segments (a checkpoint recycling them), it calls `quiesce()`, so
/// the folder never changes under it, and asks again afterwards.
///
/// Sendability (`@unchecked Sendable`): `state` is touched only under `condition`; `folder` and
/// `segmentSize` are immutable.
final class SegmentPreparer: @unchecked Sendable {
    private enum State {
        case idle
        case requested(UInt64)
        case making(UInt64)
        case made(UInt64, DurableFile)
        case stopping
    }

    private let folder: CommitLogFolder
    private let segmentSize: UInt64
    private let condition = NSCondition()
    private var state = State.idle
    private var thread: Thread?

    init(folder: CommitLogFolder, segmentSize: UInt64) {
        self.folder = folder
        self.segmentSize = segmentSize
    }

    /// Asks for segment `number` to be made (nothing happens when it exists by then). A segment made
    /// earlier and never taken is closed: the log reopens it from the folder when it gets there.
    func prepare(_ number: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        switch state {
        case .stopping, .making, .requested:
            return
        case .made(let made, let file):
            guard made != number else { return }
            file.close()
        case .idle:
            break
        }
        state = .requested(number)
        if thread == nil {
            let thread = Thread { [self] in
                DetachedThread.nameCurrentThread("log segments")
                run()
            }
            self.thread = thread
            thread.start()
        }
        condition.broadcast()
    }

    /// Segment `number` if this preparer made it (waiting while it is being made); nil when it was
    /// not asked for, or could not be made.
    func take(_ number: UInt64) -> DurableFile? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            switch state {
            case .requested(let requested) where requested == number:
                // Not begun yet: the log makes it now, and the thread leaves it alone.
                state = .idle
                return nil
            case .making(let making) where making == number:
                condition.wait()
            case .made(let made, let file) where made == number:
                state = .idle
                return file
            default:
                return nil
            }
        }
    }

    /// Leaves the folder alone from now until the next `prepare(_:)`: a request not yet begun is
    /// dropped, and a segment being made is waited for (one made stays for `take`).
    func quiesce() {
        condition.lock()
        defer { condition.unlock() }
        if case .requested = state { state = .idle }
        while case .making = state { condition.wait() }
    }

    /// Waits until the segment asked for is made (or found to exist, or failed).
    func waitUntilPrepared() {
        condition.lock()
        defer { condition.unlock() }
        while true {
            switch state {
            case .requested, .making: condition.wait()
            case .idle, .made, .stopping: return
            }
        }
    }

    /// Stops the thread (after the segment being made, if any); a segment made and not taken is closed.
    func stop() {
        condition.lock()
        while case .making = state { condition.wait() }
        if case .made(_, let file) = state { file.close() }
        state = .stopping
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            switch state {
            case .stopping:
                condition.unlock()
                return
            case .requested(let number):
                state = .making(number)
                condition.unlock()
                let made = make(number)
                condition.lock()
                if case .making = state {
                    if let made {
                        state = .made(number, made)
                    } else {
                        state = .idle
                    }
                } else {
                    made?.close()
                }
                condition.broadcast()
            case .idle, .making, .made:
                condition.wait()
            }
        }
    }

    /// Makes segment `number` unless it exists; nil when it exists or could not be made.
    private func make(_ number: UInt64) -> DurableFile? {
        do throws(CommitLogError) {
            if let existing = try folder.openSegment(number) {
                existing.close()
                return nil
            }
            return try folder.makeSegment(number, size: segmentSize)
        } catch {
            return nil
        }
    }
}
