import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Named places in the receiver's storage path where a debug build kills its own process when
/// `CAPTURE_CRASH_AT` names them: the fault injection behind the tests that kill the receiver at
/// every step of a round, a checkpoint, a replay, a segment cut and a takeover, restart it, and
/// check that nothing acknowledged is missing and nothing is there twice (docs/DURABILITY.md).
///
/// `CAPTURE_CRASH_AT=POINT` kills at the first time the point is reached, `POINT:N` at the N-th.
/// The process dies by SIGKILL, as in `kill -9` or the OOM killer: no handler, no flush. Release
/// builds compile every check away.
public enum CrashPoint: String, CaseIterable, Sendable {
    /// Half of a round's batch is written to the commit log (a torn write).
    case midAppend = "mid-append"
    /// A round's batch is written to the commit log but not yet synced.
    case afterAppendBeforeSync = "after-append-before-sync"
    /// A checkpoint synced the recordings and wrote the position records, but did not move the
    /// log's replay point.
    case midCheckpoint = "mid-checkpoint"
    /// A replay wrote a file's first round again, and nothing after it.
    case midReplay = "mid-replay"
    /// A segment cut finalized the old file, before the next one is named in the stream's entry.
    case midSegmentCut = "mid-segment-cut"
    /// A takeover replayed a dead receiver's log into the files but did not mark it replayed.
    case midTakeover = "mid-takeover"
    /// A stream's end finalized its file and journaled its hand-off, before the stream index
    /// records it finished.
    case finishBeforeRecord = "finish-before-record"
    /// The stream index records a stream finished, before its file's position log is removed.
    case finishAfterRecord = "finish-after-record"

    #if DEBUG
    private static let armed: (point: CrashPoint, occurrence: Int)? = {
        guard let value = ProcessInfo.processInfo.environment["CAPTURE_CRASH_AT"], !value.isEmpty else { return nil }
        let parts = value.split(separator: ":", maxSplits: 1)
        guard let point = CrashPoint(rawValue: String(parts[0])) else { return nil }
        let occurrence = parts.count > 1 ? Int(parts[1]) ?? 1 : 1
        return (point, max(1, occurrence))
    }()
    private static let counter = Mutex<Int>(0)
    #endif

    /// Whether this point kills the process the next time it is reached (so a caller can do half
    /// of its work first, as a torn write does).
    public var isArmed: Bool {
        #if DEBUG
        guard let armed = Self.armed, armed.point == self else { return false }
        return Self.counter.withLock { $0 + 1 >= armed.occurrence }
        #else
        return false
        #endif
    }

    /// The point is reached: kills the process when `CAPTURE_CRASH_AT` names it (and this is the
    /// occurrence it names).
    public func reached() {
        #if DEBUG
        guard let armed = Self.armed, armed.point == self else { return }
        let count = Self.counter.withLock { count in
            count += 1
            return count
        }
        guard count >= armed.occurrence else { return }
        StandardStreams.writeError("CAPTURE_CRASH_AT: crashing at \(rawValue) (occurrence \(count))\n")
        kill(getpid(), SIGKILL)
        #endif
    }
}
