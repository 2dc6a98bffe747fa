import CaptureCommitLog
import CaptureCore
import CaptureErrorText
import Foundation
import Logging

/// Finds the commit logs under a log root and replays the ones no running receiver holds: at a
/// receiver's start (its own log from before a crash, and any other abandoned one), and when a
/// receiver takes over a stream on shared storage (the dead receiver's log may hold acknowledged
/// audio of that stream that its file lacks).
///
/// Each log has a folder of its own under the root, with a `lock` file that its receiver holds
/// (`flock`) for as long as it runs, and a `replaying` file while its receiver replays logs at
/// start. A log whose lock is free belongs to no running receiver: whoever takes the lock replays
/// it and marks it replayed (a checkpoint at its end). A log whose lock is held belongs to a running
/// receiver, which made every stream it let go durable before letting it go (so a takeover need
/// not read its log), unless that receiver is still replaying: then a takeover waits (the stream is
/// busy for a moment).
enum LogRecovery {
    /// The log root's default place in the output folder.
    static let defaultFolderName = ".commit-log"
    static let lockFileName = "lock"
    static let replayingFileName = "replaying"

    /// Why the receiver's log could not be opened at start.
    typealias OpenFailure = CommitLogStartFailure

    /// Replays every log under `root` that no running receiver holds, then opens this receiver's
    /// log: one of those (reused, its segments already made) or a new one.
    static func openReceiverLog(root: String, outputDirectory: String, segmentSize: UInt64, logger: Logger) throws(OpenFailure) -> ReceiverLog {
        do throws(DurableFileError) {
            try makeFolder(root)
        } catch {
            throw .cannotMakeFolder(path: root, reason: SystemErrorText.errno(error.code))
        }
        var adopted: (directory: String, lock: DurableFile, log: CommitLog)?
        for name in logFolders(root) {
            let directory = (root as NSString).appendingPathComponent(name)
            guard let lock = tryLock(directory) else { continue }
            let replayed: CommitLog?
            do throws(CommitLogError) {
                replayed = try replay(directory: directory, outputDirectory: outputDirectory, holding: nil, logger: logger)
            } catch {
                lock.close()
                throw .log(error)
            }
            // At start every held stream is waited for, so the log is replayed whole.
            guard let log = replayed else {
                lock.close()
                throw .other("the commit log \(directory) could not be replayed whole: start the receiver again")
            }
            if adopted == nil {
                adopted = (directory, lock, log)
            } else {
                // Replayed and marked so: nothing in it is needed any more.
                log.close()
                try? FileManager.default.removeItem(atPath: directory)
                lock.close()
            }
        }
        if let adopted {
            return ReceiverLog(directory: adopted.directory, lock: adopted.lock, log: adopted.log)
        }
        let directory = (root as NSString).appendingPathComponent(UUID().uuidString.lowercased())
        do throws(DurableFileError) {
            try makeFolder(directory)
        } catch {
            throw .cannotMakeFolder(path: directory, reason: SystemErrorText.errno(error.code))
        }
        guard let lock = tryLock(directory) else {
            throw .other("cannot lock the new commit log folder \(directory): another process took it")
        }
        let log: CommitLog
        do throws(CommitLogError) {
            log = try CommitLogReader(directory: directory, segmentSize: segmentSize).startWriting()
        } catch {
            lock.close()
            throw .log(error)
        }
        do throws(DurableFileError) {
            try DurableFile.synchronizeDirectory(root)
        } catch {
            log.close()
            lock.close()
            throw .other("cannot make the commit log folder \(directory) durable: \(error.description)")
        }
        return ReceiverLog(directory: directory, lock: lock, log: log)
    }

    /// Before a receiver continues a stream that another receiver may have written last (shared
    /// storage), while it holds the stream's claim: replays every log under `root` but `own` that
    /// no running receiver holds. `.streamBusy` when a running receiver is still replaying its logs.
    static func replayAbandonedLogs(root: String, own: String, outputDirectory: String, holding: (stream: UUID, claim: StreamClaim), logger: Logger) -> Result<Void, StorageError> {
        for name in logFolders(root) {
            let directory = (root as NSString).appendingPathComponent(name)
            guard directory != own else { continue }
            guard let lock = tryLock(directory) else {
                if FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent(replayingFileName)) {
                    return .failure(.streamBusy("the receiver whose commit log is \(directory) is replaying it at its start; try again in a moment"))
                }
                continue
            }
            defer { lock.close() }
            do throws(CommitLogError) {
                try replay(directory: directory, outputDirectory: outputDirectory, holding: holding, logger: logger)?.close()
            } catch {
                return .failure(.cannotCreate("cannot replay the abandoned commit log \(directory) before continuing stream \(holding.stream): \(error.description)"))
            }
        }
        return .success(())
    }

    /// Replays every log under `root` that no running receiver holds and leaves each marked
    /// replayed (`capture-recv recover`, before it finishes files); the logs replayed.
    static func replayAll(root: String, outputDirectory: String, logger: Logger) throws(OpenFailure) -> Int {
        var replayed = 0
        for name in logFolders(root) {
            let directory = (root as NSString).appendingPathComponent(name)
            guard let lock = tryLock(directory) else {
                logger.warning("a running receiver holds the commit log \(directory): its streams are its own to finish")
                continue
            }
            defer { lock.close() }
            do throws(CommitLogError) {
                try replay(directory: directory, outputDirectory: outputDirectory, holding: nil, logger: logger)?.close()
                replayed += 1
            } catch {
                throw .log(error)
            }
        }
        return replayed
    }

    /// Replays the log in `directory` (locked by the caller) and marks it replayed: the log, open
    /// for appending after its checkpoint moved to its end. A takeover (`holding` a stream's claim)
    /// leaves streams others hold to them; then the log is not marked, and nil is returned.
    @discardableResult
    private static func replay(directory: String, outputDirectory: String, holding: (stream: UUID, claim: StreamClaim)?, logger: Logger) throws(CommitLogError) -> CommitLog? {
        let marker = (directory as NSString).appendingPathComponent(replayingFileName)
        _ = FileManager.default.createFile(atPath: marker, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let reader = try CommitLogReader(directory: directory)
        let start = reader.checkpoint
        let replay = LogReplay(outputDirectory: outputDirectory, holding: holding, waitForClaim: holding == nil ? .seconds(60) : nil)
        try replay.replay(reader)
        if holding != nil { CrashPoint.midTakeover.reached() }
        let summary = replay.summary
        if case .tornTail(let position, _)? = reader.end {
            logger.notice("the commit log \(directory) ends in a batch cut short at \(position) (a crash while it was being written): nothing in it was acknowledged, and it is not replayed")
        }
        for failure in summary.failures {
            logger.error("\(failure)")
        }
        if summary.heldElsewhere > 0 {
            logger.notice("replayed the commit log \(directory) from \(start) for the streams nobody holds (\(summary.files) files); \(summary.heldElsewhere) others are held and replayed by whoever holds them")
            return nil
        }
        let log = try reader.startWriting()
        try log.checkpoint(through: log.durableEnd)
        if summary.records > 0 {
            logger.notice("replayed the commit log \(directory) from \(start): \(summary.records) records into \(summary.files) files (\(summary.skippedRounds) rounds already in their files)")
        }
        return log
    }

    /// The log folders under `root`, sorted.
    /// The receivers' log folders under `root`: named by a UUID, as a receiver names its own. Anything
    /// else there (a note, a folder of the operator's) is not a log and is left alone.
    private static func logFolders(_ root: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { UUID(uuidString: $0) != nil }.sorted()
    }

    /// Locks the log in `directory` without waiting; nil when a running receiver holds it (or the
    /// folder is not a log, or vanished).
    private static func tryLock(_ directory: String) -> DurableFile? {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue,
              let lock = try? DurableFile.open(path: (directory as NSString).appendingPathComponent(lockFileName), create: true)
        else { return nil }
        guard lock.tryLock() else {
            lock.close()
            return nil
        }
        return lock
    }

    private static func makeFolder(_ path: String) throws(DurableFileError) {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue { return }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw DurableFileError(operation: "making the folder", path: path, code: errno) }
        try DurableFile.synchronizeDirectory(DurableFile.folder(of: path))
    }
}

/// Replays the commit logs that no running receiver holds into the recordings they describe: what a
/// receiver does at its start, for `capture-recv recover`, which must put every acknowledged sample
/// into a file before finishing it.
public enum CommitLogReplay {
    /// The default place of the logs for an output folder.
    public static func defaultLogDirectory(outputDirectory: String) -> String {
        (outputDirectory as NSString).appendingPathComponent(LogRecovery.defaultFolderName)
    }

    /// Replays the logs in `logDirectory` (default: `OUT/.commit-log`) into the recordings under
    /// `outputDirectory`; the number of logs replayed. Throws a message for the user when a log
    /// cannot be read.
    public static func replayAbandonedLogs(outputDirectory: String, logDirectory: String?, logger: Logger) throws(ReceiverStartError) -> Int {
        let root = logDirectory ?? defaultLogDirectory(outputDirectory: outputDirectory)
        guard FileManager.default.fileExists(atPath: root) else { return 0 }
        do throws(LogRecovery.OpenFailure) {
            return try LogRecovery.replayAll(root: root, outputDirectory: outputDirectory, logger: logger)
        } catch {
            throw .commitLog(error)
        }
    }
}
