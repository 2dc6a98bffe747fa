import CAF
import CaptureCore
import Foundation
import Logging
import NIOCore

/// Keeps the receiver's promise to streams whose connection was lost: their files stay unfinished
/// and claimable in the `StreamIndex` for `ReceiverConfiguration.resumeWindow`, so their senders can
/// resume them here or on any receiver sharing the output folder; after that, whichever receiver
/// sweeps first finalizes them. A stream some receiver holds (its claim is locked) is never touched,
/// so receivers sharing a folder sweep it side by side, and the streams of a receiver that crashed
/// are finalized by the others.
enum AbandonedStreamSweeper {
    /// What a sweep does with an unclaimed, unfinished stream.
    enum Mode {
        /// Finalize the streams last made durable before the date (their resume window has passed),
        /// and remove them from the index; then, while more than `maximumWaiting` streams still
        /// wait, those waiting longest too.
        case expire(before: Date, maximumWaiting: Int = .max)
        /// Finalize every unclaimed unfinished file so readers open it complete while the receiver is
        /// down, keeping its position log and index entry: its sender can still resume it.
        case finalizeResumable
    }

    /// At start-up: enters into the index the unfinished files of the output folder that have no
    /// entry (files recorded before the index existed), logs the streams waiting for their sender,
    /// and sweeps every `min(window, 60 s)` on the writer pool.
    static func start(configuration: ReceiverConfiguration, writerPool: WriterPool, eventLoop: any EventLoop, logger: Logger) {
        let index = StreamIndex(outputDirectory: configuration.outputDirectory)
        for (stream, path) in enterUnindexedFiles(index: index, logger: logger) {
            logger.notice("an unfinished stream is waiting for its sender to resume it", metadata: [
                "path": "\(path)", "stream-id": "\(stream)",
            ])
        }
        let window = configuration.resumeWindow
        let maximumWaiting = configuration.maximumWaitingStreams
        let metrics = configuration.metrics
        let sweepNow: @Sendable () -> Void = {
            writerPool.submit {
                let result = sweep(
                    index: index, mode: .expire(before: Date().addingTimeInterval(-window.inSeconds), maximumWaiting: maximumWaiting), handOff: configuration.handOff,
                    logger: logger, settingNames: configuration.settingNames,
                    replayingLogs: { stream, claim in writerPool.replayAbandonedLogs(stream: stream, claim: claim) })
                metrics?.waitingStreams(result.waiting)
            }
        }
        sweepNow()
        let period = TimeAmount(max(.seconds(1), min(window, .seconds(60))))
        eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in sweepNow() }
    }

    /// Enters the output folder's unfinished files that have no index entry into the index, and
    /// returns every stream waiting for its sender (unfinished, and held by no receiver now).
    static func enterUnindexedFiles(index: StreamIndex, logger: Logger) -> [(stream: UUID, path: String)] {
        for found in ResumableFiles.scan(directory: index.outputDirectory, logger: logger) {
            if case .success(let claim) = index.claimNew(found.stream, relativePath: index.relativePath(of: found.path)) {
                claim.release(removingEntry: false)
            } else if case .success(let claim) = index.claimExisting(found.stream) {
                removeStalePositionLog(of: found.path, claim: claim, index: index, logger: logger)
                claim.release(removingEntry: false)
            }
        }
        var waiting: [(stream: UUID, path: String)] = []
        for stream in index.streams() {
            guard case .success(let claim) = index.claimExisting(stream) else { continue }
            let path = index.unfinishedFile(of: claim)
            claim.release(removingEntry: false)
            if let path { waiting.append((stream, path)) }
        }
        return waiting.sorted { $0.path < $1.path }
    }

    /// A receiver that crashed after recording a stream as finished, before removing its file's
    /// position log, leaves that log behind: the file is complete, and its stream answers a resume
    /// with EndAccepted, so the log only makes the file look resumable. Removed under the claim.
    private static func removeStalePositionLog(of path: String, claim: StreamClaim, index: StreamIndex, logger: Logger) {
        guard let record = index.finishedRecord(of: claim), record.complete,
              index.absolutePath(relative: record.relativePath) == path
        else { return }
        do throws(DurableFileError) {
            try StreamPositionLog.remove(cafPath: path)
            logger.notice("removed the position log a crash left beside a finished stream's file", metadata: ["path": "\(path)"])
        } catch {
            logger.warning("cannot remove the position log a crash left beside a finished stream's file", metadata: [
                "path": "\(path)", "error": "\(error.description)",
            ])
        }
    }

    /// Finalizes an abandoned stream's file under its claim and records where it ends in its entry
    /// (a `FinishedStreamRecord` that is not complete), so that a stream continuing it begins right
    /// after (PROTOCOL.md §8.1); the entry leaves the index one resume window later. Releases the claim.
    private static func finalizeAbandoned(path: String, claim: StreamClaim, index: StreamIndex, handOff: FinishedFileHandOff?, logger: Logger) -> Bool {
        var journal: (@Sendable (String, Int64) -> Void)?
        if let handOff {
            let relative = index.relativePath(of: path)
            journal = { path, frames in handOff.journal(path: path, relativePath: relative, frames: frames, complete: false) }
        }
        guard let file = ResumableFiles.finalizeAbandoned(path: path, logger: logger, beforeRemovingLog: journal) else {
            claim.release(removingEntry: false)
            return false
        }
        guard let end = file.end else {
            claim.release(removingEntry: true)
            return true
        }
        let record = FinishedStreamRecord(
            relativePath: index.relativePath(of: path), frames: file.frames, packets: file.packets,
            end: end, complete: false)
        do throws(DurableFileError) {
            try claim.recordFinished(record, owner: index.entry(of: claim)?.owner)
            claim.release(removingEntry: false)
        } catch {
            claim.release(removingEntry: true)
        }
        return true
    }

    /// What a sweep did.
    struct SweepResult: Equatable {
        /// Files finalized.
        var finalized: Int
        /// Unfinished streams nobody holds that are still waiting for their senders afterwards.
        var waiting: Int
    }

    /// Goes through the index once: every stream nobody holds is claimed for a moment and dealt with
    /// as `mode` says; entries whose file is finished or missing are removed. `replayingLogs` runs
    /// before a file is finalized, under its claim: the commit logs of receivers that died may hold
    /// acknowledged audio the file lacks (`WriterPool.replayAbandonedLogs`).
    @discardableResult
    static func sweep(
        index: StreamIndex, mode: Mode, handOff: FinishedFileHandOff? = nil, logger: Logger, settingNames: any SettingNaming = LibrarySettingNames(),
        replayingLogs: ((UUID, StreamClaim) -> Result<Void, StorageError>)? = nil
    ) -> SweepResult {
        var finalized = 0
        var waiting: [(stream: UUID, since: Date)] = []
        for stream in index.streams() {
            guard case .success(let claim) = index.claimExisting(stream) else { continue }
            guard let path = index.unfinishedFile(of: claim) else {
                if index.finishedRecord(of: claim) != nil {
                    // Finished: kept for the resume window so a sender that missed its EndAccepted
                    // gets it again, then removed.
                    var expired = false
                    if case .expire(let cutoff, _) = mode { expired = (index.entryModified(stream) ?? .distantPast) < cutoff }
                    claim.release(removingEntry: expired)
                    continue
                }
                // Finished without a record (a crash while finishing) or never named.
                claim.release(removingEntry: true)
                continue
            }
            switch mode {
            case .expire(let cutoff, _):
                let since = ResumableFiles.lastDurable(path) ?? .distantPast
                guard since < cutoff else {
                    waiting.append((stream, since))
                    claim.release(removingEntry: false)
                    continue
                }
                if case .failure(let error)? = replayingLogs?(stream, claim) {
                    logger.warning("not finalizing an abandoned stream's file yet: \(error.description)", metadata: ["path": "\(path)"])
                    claim.release(removingEntry: false)
                    continue
                }
                let done = finalizeAbandoned(path: path, claim: claim, index: index, handOff: handOff, logger: logger)
                if done { finalized += 1 }
            case .finalizeResumable:
                guard FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)) else {
                    claim.release(removingEntry: false)
                    continue
                }
                do throws(CAFError) {
                    _ = try CAFRecovery.recover(path: path)
                    finalized += 1
                } catch {
                    logger.error("cannot finalize a detached stream's file; run `capture-recv recover` on it", metadata: [
                        "path": "\(path)", "error": "\(error.description)",
                    ])
                }
                claim.release(removingEntry: false)
            }
        }
        guard case .expire(_, let maximumWaiting) = mode, waiting.count > maximumWaiting else {
            return SweepResult(finalized: finalized, waiting: waiting.count)
        }
        // Too many streams wait: finalize those waiting longest, so an address that opens and drops
        // streams cannot fill the folder with unfinished files for a whole resume window.
        let excess = waiting.sorted { $0.since < $1.since }.prefix(waiting.count - maximumWaiting)
        var finalizedEarly = 0
        for candidate in excess {
            guard case .success(let claim) = index.claimExisting(candidate.stream) else { continue }
            guard let path = index.unfinishedFile(of: claim) else {
                claim.release(removingEntry: false)
                continue
            }
            if case .failure(let error)? = replayingLogs?(candidate.stream, claim) {
                logger.warning("not finalizing an abandoned stream's file yet: \(error.description)", metadata: ["path": "\(path)"])
                claim.release(removingEntry: false)
                continue
            }
            logger.warning("more interrupted streams wait for their senders than \(settingNames.name(of: .maximumWaitingStreams)) allows; finalizing the one waiting longest", metadata: [
                "path": "\(path)", "stream-id": "\(candidate.stream)", "max-waiting-streams": "\(maximumWaiting)",
            ])
            let done = finalizeAbandoned(path: path, claim: claim, index: index, handOff: handOff, logger: logger)
            if done { finalizedEarly += 1 }
        }
        return SweepResult(finalized: finalized + finalizedEarly, waiting: waiting.count - finalizedEarly)
    }
}
