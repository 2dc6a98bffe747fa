import CaptureCore

/// Why the commit log cannot be read or written, in words that tell the operator what to do. The
/// log may hold audio the receiver has acknowledged and nowhere else, so every error that could
/// lose it stops the receiver rather than letting it start over.
public enum CommitLogError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A file of the log could not be opened, read or examined.
    case unreadable(path: String, reason: String)
    /// The log's control file is damaged or of an unknown format.
    case damagedControl(path: String, reason: String)
    /// Segment files exist but the control file that says where reading starts is missing.
    case missingControl(directory: String)
    /// A batch in the middle of the log is damaged: later batches are intact, so this is not a
    /// write cut short by a crash but bytes changed on the disk.
    case damaged(path: String, position: LogPosition, reason: String)
    /// A segment file in the log's chain belongs to another log.
    case foreignSegment(path: String, logID: UInt64)
    /// No new segment could be made: the log's volume is full.
    case logVolumeFull(directory: String, segmentSize: UInt64)
    /// Writing or syncing the log failed; the log takes nothing more until the receiver restarts.
    case writeFailed(DurableFileError)
    /// A record larger than a segment can hold.
    case recordTooLarge(size: Int, limit: Int)
    /// A new log was asked for with a segment size the log cannot use.
    case unusableSegmentSize(UInt64)
    /// The log failed earlier (`writeFailed`) and takes nothing more.
    case failedEarlier(String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .unreadable(let path, let reason):
            return "cannot read the commit log file \(path): \(reason). It may hold acknowledged audio, so the receiver does not start without it: "
                + "make it readable again (or restore it)"
        case .damagedControl(let path, let reason):
            return "the commit log's control file \(path) is damaged (\(reason)). Restore it from a backup; "
                + "or, giving up the audio acknowledged since the last checkpoint, move the log's folder aside and start again"
        case .missingControl(let directory):
            return "the commit log in \(directory) has segment files but no control file. Restore the control file; "
                + "or, giving up the audio acknowledged since the last checkpoint, move the folder aside and start again"
        case .damaged(let path, let position, let reason):
            return "the commit log is damaged at \(position) in \(path) (\(reason)) while later records are intact: the disk changed "
                + "bytes that were written and synced. Check the disk; to start anyway, move the log's folder aside (audio acknowledged "
                + "since the last checkpoint is then lost from the recordings)"
        case .foreignSegment(let path, let logID):
            return "the commit log segment \(path) belongs to another log (id \(String(logID, radix: 16))): move it out of the log's folder"
        case .logVolumeFull(let directory, let segmentSize):
            return "the commit log's volume is full: no new \(segmentSize >> 20) MiB segment fits in \(directory). Free space there, "
                + "or give \(naming.name(of: .commitLogFolder)) another volume; audio not yet acknowledged stays with the senders"
        case .writeFailed(let error):
            return "writing the commit log failed: \(error). The receiver acknowledges nothing more until it is restarted "
                + "(a failed sync cannot be retried safely)"
        case .recordTooLarge(let size, let limit):
            return "a commit log record of \(size) bytes does not fit in a segment (at most \(limit)): use larger segments"
        case .unusableSegmentSize(let size):
            return "a commit log segment of \(size) bytes cannot be used: it must be a multiple of \(LogGeometry.alignment) bytes from \(LogGeometry.minimumSegmentSize) to \(LogGeometry.maximumSegmentSize)"
        case .failedEarlier(let reason):
            return "the commit log failed earlier and takes nothing more (\(reason)): restart the receiver"
        }
    }
}
