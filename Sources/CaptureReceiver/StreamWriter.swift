import CaptureWire
import CAF
import CaptureCore
import Dispatch
import Foundation

/// When the receiver makes written audio durable and so can acknowledge it: the `WriterPool` runs
/// one round for every stream with new audio, committing it to the receiver's commit log, and now
/// and then a checkpoint that makes the recordings themselves durable (docs/DURABILITY.md, "The
/// commit log").
public struct SyncPolicy: Sendable, Equatable {
    /// Longest time written audio waits before a round starts (`--sync-ms`).
    public var interval: Duration
    /// Bytes in one stream not yet in a round that start a round at once.
    public var bytes: Int
    /// Longest time between checkpoints while audio arrives.
    public var checkpointInterval: Duration
    /// Commit log bytes since the last checkpoint that start a checkpoint at once. 1 GiB (as
    /// PostgreSQL's `max_wal_size`): every checkpoint costs each stream's files a few pages written
    /// twice (the partial last pages of the audio, its packet sizes and its position log), about
    /// 14 KB a stream measured at 2,000 and 5,000 streams, so the fewer the better; what bounds it
    /// is the log's size on disk and the replay after a crash (at most this much, read in order).
    public var checkpointBytes: UInt64

    public init(interval: Duration = .milliseconds(200), bytes: Int = 2 << 20, checkpointInterval: Duration = .seconds(30), checkpointBytes: UInt64 = 1 << 30) {
        self.interval = interval
        self.bytes = bytes
        self.checkpointInterval = checkpointInterval
        self.checkpointBytes = checkpointBytes
    }
}

/// What one round takes from a stream: its number in the log, the file, what it wrote there since
/// its last round (the round record's body, `RoundRecordBody`) and the position that reaches, and
/// whether the file is new (its creation not yet durable).
struct RoundTake {
    var subject: UInt64
    var file: LoggedFile
    /// The file's absolute path.
    var path: String
    var roundBody: [UInt8]
    var position: StreamPositionRecord
    var needsCreationSync: Bool
}

/// One stream's storage on its `WriterPool` lane (one of the pool's few threads), so the network's
/// event loop never waits on the disk: it hands the stream's audio and gaps to its recording (a
/// `SegmentingFileWriter`, which writes them into the stream's `PendingRound` as it goes) and takes
/// part in the receiver's commit log. The pool's round commits the pending round to the log, and
/// only then is `StreamWriterEvents.durable` told, and only then does the receiver acknowledge. The
/// recording itself is made durable by the pool's checkpoints, and whenever the stream lets go of it
/// (detach, finish, segment cut).
///
/// Sendability (`@unchecked Sendable`): every mutable field, and the recording, is touched only on
/// `lane`, a serial thread of the pool that owns them (the public operations submit their work
/// there, and the pool calls the rest there); `format` and `directory` read fields of the recording
/// that never change.
public final class StreamWriter: @unchecked Sendable {
    /// The path of the file the writer opened with (with segments, later files have their own).
    public let path: String
    /// The stream's format.
    public var format: StreamFormat { recording.format }
    /// The directory whose file system holds the recording (what a sync round flushes).
    var directory: String { recording.directory }

    /// The pool thread every operation of this stream runs on, in order.
    let lane: WriterLane
    /// The stream's number in the commit log (its records' subject).
    let subject: UInt64
    /// The stream's id (named in the log, so replay can claim it).
    let stream: UUID
    private let pool: WriterPool
    private let events: StreamWriterEvents
    private let metrics: (any ReceiverMetricsRecorder)?
    // State below is touched on `lane` only.
    /// The files: written, cut into segments, finished, synced.
    private let recording: SegmentingFileWriter
    /// What the recording received since the stream's last round.
    private var round: PendingRound
    /// A file the stream let go of before it could make it durable by itself and record where it
    /// ends (its gathered audio could not be written, its sync failed, or its position record could
    /// not be written: a full disk, say). The commit log holds what was acknowledged, so each
    /// checkpoint tries again, and none completes until the file is durable and its position
    /// recorded. Meanwhile the stream stays claimed, so no one resumes the file without it.
    private var stranded: StrandedFile?
    private var written: StreamPosition
    private var durable: StreamPosition
    /// The position the last round took (committed, or being committed, to the log).
    private var submitted: StreamPosition
    private var awaitingRound = false
    private var failure: StorageError?
    /// A detach waiting for the sync round that makes everything written durable.
    private var pendingDetach: (finalizing: Bool, completion: @Sendable () -> Void)?

    /// A writer over an open CAF file and its position log, continuing at `start` (what is durable).
    /// `StreamFiles` creates both for a new stream, or reopens them to resume one.
    init(
        writer: CAFWriter, positionLog: StreamPositionLog, claim: StreamClaim?, stream: UUID, start: StreamPosition, originSampleTime: Int64 = 0,
        segments: SegmentingFileWriter.Segments? = nil, handOff: FinishedFileHandOff? = nil, lane: WriterLane, pool: WriterPool,
        events: StreamWriterEvents, metrics: (any ReceiverMetricsRecorder)?, entriesDurable: Bool = true
    ) {
        self.stream = stream
        subject = pool.takeSubject()
        path = writer.path
        round = PendingRound(packetsBefore: writer.packetCount)
        recording = SegmentingFileWriter(
            writer: writer, positionLog: positionLog, claim: claim, start: start, originSampleTime: originSampleTime, segments: segments,
            handOff: handOff, outputDirectory: pool.outputDirectory, events: events, metrics: metrics, entriesDurable: entriesDurable)
        self.lane = lane
        self.pool = pool
        self.events = events
        self.metrics = metrics
        written = start
        durable = start
        submitted = start
    }

    /// Appends audio packets for `sequence`, whose frames end at `endSampleTime`.
    public func write(sequence: UInt64, payload: Data, packetSizes: [UInt32], frameCount: Int, endSampleTime: Int64) {
        lane.submit { [self] in
            let audio = TimedAudio(first: endSampleTime - Int64(frameCount), payload: payload, packetSizes: packetSizes, frameCount: frameCount)
            record(through: StreamPosition(lastSequence: sequence, endSampleTime: endSampleTime)) { recording, after, round throws(SegmentingFileWriter.Failure) in
                try recording.write(audio, after: after, round: &round)
            }
        }
    }

    /// Records a gap of `length` frames at `sampleTime` for `sequence`.
    public func recordGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String) {
        lane.submit { [self] in
            record(through: StreamPosition(lastSequence: sequence, endSampleTime: sampleTime + length)) { recording, after, round throws(SegmentingFileWriter.Failure) in
                try recording.writeGap(sampleTime: sampleTime, length: length, reason: reason, after: after, round: &round)
            }
        }
    }

    /// Records a marker with `label` at `sampleTime` for `sequence` (it covers no frames).
    public func recordMarker(sequence: UInt64, sampleTime: Int64, label: String) {
        lane.submit { [self] in
            record(through: StreamPosition(lastSequence: sequence, endSampleTime: sampleTime)) { recording, after, round throws(SegmentingFileWriter.Failure) in
                try recording.writeMarker(sampleTime: sampleTime, label: label, round: &round)
            }
        }
    }

    /// Records a gap of `length` frames at `sampleTime` for `sequence` whose frames the audio carries
    /// as encoded silence: a gap marker, without moving the timeline (the stream stands where the
    /// message before it ended).
    public func recordFilledGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String) {
        lane.submit { [self] in
            record(through: StreamPosition(lastSequence: sequence, endSampleTime: written.endSampleTime)) { recording, after, round throws(SegmentingFileWriter.Failure) in
                try recording.writeFilledGap(sampleTime: sampleTime, length: length, reason: reason, round: &round)
            }
        }
    }

    /// Writes one message into the recording (`step`, given the position before it and the pending
    /// round), and then counts the stream as written through `position`. When the recording finished
    /// a file at a segment cut meanwhile, that file holds, durably, everything written before the
    /// message (its position log says so), so that much is durable without a round.
    private func record(
        through position: StreamPosition,
        _ step: (SegmentingFileWriter, StreamPosition, inout PendingRound) throws(SegmentingFileWriter.Failure) -> Void
    ) {
        guard failure == nil, recording.isOpen else { return }
        let filesFinished = recording.finishedFiles
        var failed: SegmentingFileWriter.Failure?
        do throws(SegmentingFileWriter.Failure) {
            try step(recording, written, &round)
        } catch {
            failed = error
        }
        if recording.finishedFiles != filesFinished {
            submitted = written
            if durable != written {
                durable = written
                events.durable(durable)
            }
        }
        if let failed { return fail(failed.error, file: failed.file) }
        written = position
        askForRound()
    }

    /// Finalizes the file (sizes, packet table, markers) after everything submitted before, records
    /// the finished stream in the stream index (so a sender that missed the EndAccepted gets it again
    /// for the resume window), and calls `completion` with the result. `end` is nil for a stream
    /// finalized without its end (its connection lost, and the receiver told not to wait for it):
    /// it then leaves the index.
    public func finish(_ end: StreamEnd?, completion: @escaping @Sendable (Result<FinishedFile, StorageError>) -> Void) {
        lane.submit { [self] in
            if let failure { return completion(.failure(failure)) }
            let finished: FinishedFile
            do throws(StorageError) {
                finished = try recording.finish(end, written: written)
            } catch {
                if recording.isOpen { fail(error) }
                return completion(.failure(error))
            }
            durable = written
            events.durable(durable)
            completion(.success(finished))
        }
    }

    /// Waits until what was written is committed to the log, then makes the file durable by itself
    /// and closes it, leaving it resumable: the stream's connection is gone but its sender may come
    /// back, here or (shared storage) at another receiver, which then finds everything acknowledged
    /// in the file. With `finalizing` (a receiver shutting down) the file is also finalized, so every
    /// reader opens it complete; its position log stays, and a resume reopens it where it ended. The
    /// audio is committed by a round started at once (many streams detaching together share it), or,
    /// once the pool no longer runs rounds (shut down), by syncing this stream's files alone.
    public func detach(finalizing: Bool = false, completion: @escaping @Sendable () -> Void) {
        lane.submit { [self] in
            guard failure == nil, recording.isOpen, written != durable else { return close(finalizing: finalizing, completion: completion) }
            if written != submitted {
                // Not yet in a round (one in flight covers `submitted` and reports it).
                if !awaitingRound { awaitingRound = pool.needsRound(self) }
                guard awaitingRound else {
                    synchronizeAlone()
                    return close(finalizing: finalizing, completion: completion)
                }
                pool.startRoundEarly()
            }
            pendingDetach = (finalizing, completion)
        }
    }

    /// Makes the file durable by itself and records its position (finalizing it when asked and
    /// still healthy), closes it, and lets the stream go, leaving it resumable. Whoever continues
    /// the stream next (this receiver or another sharing the folder) finds in the file everything
    /// this receiver acknowledged, without its commit log.
    private func close(finalizing: Bool, completion: @escaping @Sendable () -> Void) {
        var synced = false
        if recording.isOpen {
            if finalizing, failure == nil {
                do throws(CAFError) {
                    try recording.finalize()
                    synced = true
                } catch {
                    // Left unfinalized: still resumable, and `capture-recv recover` finishes it.
                    synchronizeAlone()
                    synced = failure == nil
                }
            } else {
                synchronizeAlone()
                synced = failure == nil
            }
        }
        // Only acknowledged audio the position log does not yet cover needs the file kept; a
        // stream that failed before anything past it was acknowledged lets go as it is (its
        // sender still holds the rest).
        let keep = durable.lastSequence > recording.recordedSequence
        if let file = recording.close(end: recording.record(at: written), synced: synced, keep: keep) {
            stranded = file
            pool.coverAtNextCheckpoint(self, path: file.path, position: file.end)
        }
        completion()
    }

    // MARK: - Rounds and checkpoints (called on `lane` by the pool)

    /// What the round commits for this stream: what it wrote since its last round and the position
    /// that reaches; nil when there is nothing new (or the file is closed or failed).
    func takeRound() -> RoundTake? {
        awaitingRound = false
        guard failure == nil, let packets = recording.packetCount, written != submitted else { return nil }
        let position = StreamPositionRecord(position: written, packets: packets)
        let body = round.take(position: position)
        submitted = written
        return RoundTake(
            subject: subject, file: LoggedFile(stream: stream, relativePath: recording.relativePath), path: recording.currentPath, roundBody: body,
            position: position, needsCreationSync: !recording.entriesDurable)
    }

    /// The round's file system sync made this new stream's files and entries durable.
    func creationMadeDurable() { recording.creationMadeDurable() }

    /// Makes this new stream's files, position log, index entry and their folders durable by
    /// themselves (FUSE, or a failed file system sync). False when it failed (and the stream with it).
    func makeCreationDurable() -> Bool {
        guard failure == nil, recording.isOpen else { return false }
        do throws(StorageError) {
            try recording.makeCreationDurable()
            return true
        } catch {
            fail(error)
            return false
        }
    }

    /// Makes this file's audio and journal durable by itself (a checkpoint on FUSE, or after the
    /// file system sync failed), when the stream still writes the file the checkpoint covers: a file
    /// it let go of was made durable then. False when it failed.
    func synchronizeForCheckpoint(path: String) -> Bool {
        forCheckpoint(path: path) { recording throws(CAFError) in try recording.synchronizeForCheckpoint(path: path) }
    }

    /// Writes what the file's writer gathers in memory to the file (for the checkpoint's syncfs),
    /// when the stream still writes the file the checkpoint covers. False when it failed.
    func flushForCheckpoint(path: String) -> Bool {
        forCheckpoint(path: path) { recording throws(CAFError) in try recording.flushForCheckpoint(path: path) }
    }

    /// A checkpoint's step for the file at `path`: a stranded file's retry, or `step` on the
    /// recording (which does nothing unless it still writes that file). False when it failed.
    private func forCheckpoint(path: String, _ step: (SegmentingFileWriter) throws(CAFError) -> Void) -> Bool {
        if let retried = retryStranded(path: path) { return retried }
        do throws(CAFError) {
            try step(recording)
            return true
        } catch {
            fail(.writeFailed(error.description))
            return false
        }
    }

    /// A checkpoint's retry of the stranded file at `path`: makes it durable, records where it ends
    /// and lets the stream go. Nil when this stream has no stranded file there; false when it failed
    /// again (the checkpoint then fails too).
    private func retryStranded(path: String) -> Bool? {
        guard var file = stranded, file.path == path else { return nil }
        let madeDurable = file.makeDurable()
        stranded = file
        guard madeDurable else { return false }
        stranded = nil
        recording.releaseClaim()
        return true
    }

    /// Records the checkpoint's position in the file's position log (its audio is durable by now),
    /// synced when asked (else the checkpoint's second syncfs makes it durable), when the stream
    /// still writes that file. False when it failed.
    func recordCheckpoint(path: String, position: StreamPositionRecord, synchronizing: Bool) -> Bool {
        do throws(StorageError) {
            try recording.recordCheckpoint(path: path, position: position, synchronizing: synchronizing)
            return true
        } catch {
            fail(error)
            return false
        }
    }

    /// The round committed `position` to the log: tell the session layer (unless the stream ended
    /// meanwhile; finishing and detaching report on their own).
    func roundMadeDurable(_ record: StreamPositionRecord) {
        guard failure == nil, recording.isOpen else { return }
        recording.creationMadeDurable()
        let position = record.position
        if position != durable, position.lastSequence >= durable.lastSequence {
            durable = position
            events.durable(position)
        }
        if let detach = pendingDetach, durable == written {
            pendingDetach = nil
            close(finalizing: detach.finalizing, completion: detach.completion)
        }
    }

    /// Fails the stream because the file system sync failed and its files could not be synced alone.
    func failSync(_ error: StorageError) { fail(error) }

    // MARK: - Private

    private func askForRound() {
        if !awaitingRound {
            awaitingRound = pool.needsRound(self)
        }
        if round.bytes >= pool.policy.bytes { pool.startRoundEarly() }
    }

    /// Syncs this stream's files by themselves (one stream letting go of its file, or detaching
    /// once the pool runs no more rounds): everything written becomes durable, and so acknowledged.
    private func synchronizeAlone() {
        guard failure == nil, recording.isOpen else { return }
        let started = ContinuousClock.now
        defer { metrics?.diskWrite(duration: ContinuousClock.now - started) }
        do throws(StorageError) {
            try recording.synchronize()
        } catch {
            return fail(error)
        }
        submitted = written
        round.restart(packetsBefore: recording.packetCount ?? 0)
        if durable != written {
            durable = written
            events.durable(durable)
        }
    }

    /// Fails the stream; `file` is the file it failed on (default: the one being written).
    private func fail(_ error: StorageError, file: String? = nil) {
        guard failure == nil else { return }
        failure = error
        events.failed(error, file ?? recording.currentPath)
        if let detach = pendingDetach {
            pendingDetach = nil
            close(finalizing: detach.finalizing, completion: detach.completion)
        }
    }
}
