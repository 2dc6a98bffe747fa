import CaptureCommitLog
import CaptureCore
import Foundation

/// This receiver's own commit log, open for appending: the records of each round go in, one
/// `commit()` makes them durable (one fdatasync of one file however many streams the round holds),
/// and a checkpoint lets the log before it be reused. It lives in a folder of its own under the log
/// root (`OUT/.commit-log` or `--log-dir`), locked for as long as the receiver runs, so that a
/// receiver sharing the root knows this one is alive and never replays its log.
///
/// Made by `LogRecovery.openReceiverLog` once every abandoned log is replayed.
///
/// Sendability (`@unchecked Sendable`): `named` and the `CommitLog` are used only on the
/// `WriterPool`'s commit thread: the pool gets the log before it starts that thread, and closes it
/// in `shutDown` only once it has seen, under its `condition`, that thread stop; `directory` is
/// immutable. The compiler cannot see that ownership.
final class ReceiverLog: @unchecked Sendable {
    /// The log's folder.
    let directory: String
    /// Held (locked) for the receiver's life; closing it releases the lock.
    private let lock: DurableFile
    private let log: CommitLog
    /// The file each stream number's rounds are about, as a file record in the log names it since
    /// the checkpoint now being taken (or the last one): replay from a checkpoint meets a stream's
    /// file record before its rounds.
    private var named: [UInt64: String] = [:]

    init(directory: String, lock: DurableFile, log: CommitLog) {
        self.directory = directory
        self.lock = lock
        self.log = log
    }

    /// Everything before it is durable.
    var durableEnd: LogPosition { log.durableEnd }
    /// Where replay would begin now.
    var checkpoint: LogPosition { log.checkpoint }

    /// Appends a stream's round (its record's body, `RoundRecordBody`), preceded by the record
    /// naming its file when the log does not name it yet since the checkpoint being taken.
    func append(subject: UInt64, file: LoggedFile, roundBody: [UInt8]) throws(CommitLogError) {
        if named[subject] != file.relativePath {
            try log.append(ReceiverLogRecord.file(file).encoded(subject: subject))
            named[subject] = file.relativePath
        }
        try log.append(CommitLogRecord(kind: ReceiverLogRecord.roundKind, subject: subject, body: roundBody))
    }

    /// Makes everything appended durable; the position everything before which is durable.
    @discardableResult
    func commit() throws(CommitLogError) -> LogPosition { try log.commit() }

    /// Where a checkpoint begins (right after a commit): replay from here needs no record before it,
    /// so from now on every stream's next round names its file again.
    func beginCheckpoint() -> LogPosition {
        named.removeAll(keepingCapacity: true)
        return log.durableEnd
    }

    /// The recordings hold everything before `position` durably: replay begins there from now on,
    /// and the segments before it are reused.
    func completeCheckpoint(through position: LogPosition) throws(CommitLogError) {
        try log.checkpoint(through: position)
    }

    /// Closes the log and releases its lock.
    func close() {
        log.close()
        lock.close()
    }
}
