import CAF
import CaptureMetrics
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
    /// Commit log bytes since the last checkpoint that start a checkpoint at once.
    public var checkpointBytes: UInt64

    public init(interval: Duration = .milliseconds(200), bytes: Int = 2 << 20, checkpointInterval: Duration = .seconds(30), checkpointBytes: UInt64 = 256 << 20) {
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

/// Writes one stream's CAF file on its `WriterPool` lane (one of the pool's few threads), so the
/// network's event loop never waits on the disk. Audio is appended as it arrives and kept as the
/// operations of the stream's next round; the pool's round commits them to the receiver's commit
/// log, and only then is `StreamWriterEvents.durable` told, and only then does the receiver
/// acknowledge. The file itself is made durable by the pool's checkpoints, and whenever the stream
/// lets go of it (detach, finish, segment cut). Linear PCM gaps are filled with silence (so the timeline stays true) and
/// marked with a CAF marker; a gap in a VBR stream is marked only.
///
/// With segments (`--segment`), the writer cuts the stream into files at the boundaries of a
/// `SegmentClock`: the audio before a boundary ends one file, which is finalized (and so durable),
/// the next file is created with its pre-roll (VBR), made durable with its position log, and only
/// then does the stream's index entry name it; a crash at any step leaves a stream that resumes in one
/// file or the other without losing or repeating a sample (docs/RECORDINGS.md).
///
/// `@unchecked Sendable`: every mutable field is touched only on `lane`, a serial thread.
public final class StreamWriter: @unchecked Sendable {
    /// The path of the file the writer opened with (with segments, later files have their own).
    public let path: String
    /// The stream's format.
    public let format: StreamFormat

    /// The pool thread every operation of this stream runs on, in order.
    let lane: WriterLane
    /// The stream's number in the commit log (its records' subject).
    let subject: UInt64
    /// The stream's id (named in the log, so replay can claim it).
    let stream: UUID
    /// The output folder: the log names files relative to it.
    private let outputDirectory: String
    /// What the file received since the stream's last round (encoded as the log records it), and
    /// the packets it held before.
    private var pendingRound = RoundRecordBody()
    private var packetsBeforePending: Int64
    /// The file's packets once everything up to `written` was appended (before a message being
    /// cut at a segment boundary).
    private var packetsAtWritten: Int64
    private let pool: WriterPool
    private let events: StreamWriterEvents
    private let metrics: ReceiverMetrics?
    /// The stream's sample index of the file's first frame (Hello's `start_sample_time`): markers
    /// are placed relative to it.
    private var originSampleTime: Int64
    // State below is touched on `lane` only.
    private var writer: CAFWriter?
    private var positionLog: StreamPositionLog?
    /// The stream's claim in the `StreamIndex`: held while the file is open here.
    private var claim: StreamClaim?
    /// A file the stream let go of before it could make it durable by itself and record where it
    /// ends (its gathered audio could not be written, its sync failed, or its position record could
    /// not be written: a full disk, say). The commit log holds what was acknowledged, so each
    /// checkpoint tries again, and none completes until the file is durable and its position
    /// recorded. Meanwhile the stream stays claimed, so no one resumes the file without it.
    private var stranded: StrandedFile?
    /// The last sequence the file's position log records (or was written to record, by a
    /// checkpoint): acknowledged audio past it is in the commit log and the file only.
    private var recordedSequence: UInt64
    private var written: DurablePosition
    private var durable: DurablePosition
    /// The position the last round took (committed, or being committed, to the log).
    private var submitted: DurablePosition
    private var unsyncedBytes = 0
    private var awaitingRound = false
    private var gapCount = 0
    private var failure: StorageError?
    /// The files and their folder entries are durable. A new stream's files are created without
    /// fsync; its first round makes them durable (with every other new stream's: one syncfs), or,
    /// when this stream syncs alone, an fsync of each does.
    private var entriesDurable: Bool
    /// A detach waiting for the sync round that makes everything written durable.
    private var pendingDetach: (finalizing: Bool, completion: @Sendable () -> Void)?
    /// The file being written now.
    private var currentPath: String
    /// The stream position just past what the file holds (audio, PCM silence, or a VBR gap's
    /// jump): audio before it is already in this file or the one before (resent after a reconnect
    /// that followed a segment cut) and is dropped.
    private var fileEnd: Int64
    /// Cutting into segments, when asked.
    private var segmenting: SegmentState?
    /// Told of every file finished (`--on-finalize`).
    private let handOff: FinishedFileHandOff?

    /// How to cut a stream into segments: their length, and how to make each next file.
    struct Segments: Sendable {
        var length: Duration
        var maker: RecordingFileMaker
    }

    /// A segmented stream's cutting state.
    private struct SegmentState {
        let clock: SegmentClock
        let maker: RecordingFileMaker
        /// Where the current file ends.
        var boundary: Int64
        /// The last packets (VBR), for the next file's pre-roll.
        var preroll: PrerollPackets?
    }

    /// A writer over an open CAF file and its position log, continuing at `start` (what is durable).
    /// `StreamFiles` creates both for a new stream, or reopens them to resume one.
    init(
        writer: CAFWriter, positionLog: StreamPositionLog, claim: StreamClaim?, stream: UUID, start: DurablePosition, originSampleTime: Int64 = 0,
        segments: Segments? = nil, handOff: FinishedFileHandOff? = nil, lane: WriterLane, pool: WriterPool, events: StreamWriterEvents,
        metrics: ReceiverMetrics?, entriesDurable: Bool = true
    ) {
        self.handOff = handOff
        self.stream = stream
        subject = pool.takeSubject()
        outputDirectory = pool.outputDirectory
        packetsBeforePending = writer.packetCount
        packetsAtWritten = writer.packetCount
        currentPath = writer.path
        // Right after a segment cut the file holds pre-roll and audio past the durable position.
        // A resumed file's counts come from the file: added without overflow.
        let fileFrames = originSampleTime.addingReportingOverflow(writer.frameCount)
        let fileStart = originSampleTime.addingReportingOverflow(Int64(clamping: writer.primingFrames))
        fileEnd = max(start.sampleTime, fileFrames.overflow ? .max : fileFrames.partialValue)
        if let segments {
            let clock = segments.maker.segmentClock(length: segments.length)
            segmenting = SegmentState(
                clock: clock, maker: segments.maker,
                boundary: clock.nextBoundary(after: fileStart.overflow ? .max : fileStart.partialValue),
                preroll: writer.format.isVariableBitRate ? PrerollPackets(framesPerPacket: Int64(writer.format.framesPerPacket)) : nil)
            // Resuming in a file: its last packets are the pre-roll of a boundary that follows soon
            // (what the file holds runs contiguously to its end unless a gap intervened, and then
            // the positions do not join and no pre-roll is taken from them).
            if let capacity = segmenting?.preroll?.capacity, let readBack = try? writer.lastPackets(capacity + 1), !readBack.isEmpty {
                segmenting?.preroll?.remember(readBack: readBack, endingAt: fileFrames.overflow ? .max : fileFrames.partialValue)
            }
        }
        self.originSampleTime = originSampleTime
        self.claim = claim
        self.entriesDurable = entriesDurable
        self.path = writer.path
        self.directory = (writer.path as NSString).deletingLastPathComponent
        self.format = writer.format
        self.lane = lane
        self.pool = pool
        self.events = events
        self.metrics = metrics
        writer.writebackAfter = Self.writebackAfter
        self.writer = writer
        self.positionLog = positionLog
        written = start
        durable = start
        recordedSequence = start.sequence
        submitted = start
    }

    /// Audio a recording writes before its writeback is started (`CAFWriter.writebackAfter`): 2 s
    /// of an Opus stream at 128 kb/s. The checkpoints' syncs then find little to write, and the
    /// commit log's rounds never wait behind a burst of every stream's audio since the last one.
    static let writebackAfter = 32_768

    /// The directory whose file system holds the file (what a sync round flushes); computed once,
    /// since every round asks every stream for it.
    let directory: String

    /// Appends audio packets for `sequence`, whose frames end at `endSampleTime`.
    public func write(sequence: UInt64, payload: Data, packetSizes: [UInt32], frameCount: Int, endSampleTime: Int64) {
        lane.submit { [self] in
            guard failure == nil, writer != nil else { return }
            let audio = TimedAudio(first: endSampleTime - Int64(frameCount), payload: payload, packetSizes: packetSizes, frameCount: frameCount)
            if var rest = audio.dropping(before: fileEnd, format: format) {
                while let boundary = segmenting?.boundary, rest.end > boundary {
                    if rest.first < boundary {
                        let parts = rest.split(at: boundary, format: format)
                        guard append(parts.before) else { return }
                        guard cut(remainder: parts.remainder, nextAudioStart: parts.after.first, firstValid: boundary) else { return }
                        rest = parts.after
                    } else {
                        // The boundary fell where no audio is (a VBR gap): the next file begins with this audio.
                        guard cut(remainder: 0, nextAudioStart: rest.first, firstValid: rest.first) else { return }
                    }
                }
                guard append(rest) else { return }
            }
            written = DurablePosition(sequence: sequence, sampleTime: endSampleTime)
            packetsAtWritten = self.writer?.packetCount ?? packetsAtWritten
            askForRound()
        }
    }

    /// Appends audio to the current file (and remembers VBR packets for pre-roll). False when it
    /// failed, and the stream with it.
    private func append(_ audio: TimedAudio) -> Bool {
        guard let writer else { return false }
        let started = ContinuousClock.now
        let appended: Result<Void, CAFError> = audio.payload.withUnsafeBytes { bytes in
            Result { () throws(CAFError) in try writer.append(bytes, packetSizes: audio.packetSizes, frameCount: audio.frameCount) }
        }
        metrics?.diskWrite(duration: ContinuousClock.now - started)
        if case .failure(let error) = appended {
            fail(.writeFailed(error.description))
            return false
        }
        segmenting?.preroll?.remember(audio)
        audio.payload.withUnsafeBytes { pendingRound.appendAudio($0, packetSizes: audio.packetSizes, frameCount: audio.frameCount) }
        fileEnd = audio.end
        unsyncedBytes += audio.payload.count
        return true
    }

    /// Ends the current file at its segment boundary and goes on in the next: finalizes the file
    /// (`remainder`: VBR frames of its last packet past the boundary), which makes it durable; creates
    /// the next file, beginning with the pre-roll that ends at `nextAudioStart` (VBR), with its first
    /// valid sample at `firstValid`, and makes it and its position log durable; then names it in the
    /// stream's index entry, durably, and removes the old file's position log. False when it failed
    /// (the stream fails: its sender resumes where the durable state says).
    private func cut(remainder: Int, nextAudioStart: Int64, firstValid: Int64) -> Bool {
        guard let writer, let claim, var state = segmenting else { return false }
        let finished = currentPath
        do throws(CAFError) {
            try writer.finalize(remainderFrames: format.isVariableBitRate ? remainder : 0)
        } catch {
            fail(.writeFailed(error.description))
            return false
        }
        self.writer = nil
        // The finished file holds every message before the one being cut, durably: its position
        // log says so (the rounds since its last checkpoint are only in the commit log), so that a
        // crash before the entry names the next file resumes this one exactly there.
        do throws(DurableFileError) {
            try positionLog?.append(StreamPositionRecord(sequence: written.sequence, sampleTime: written.sampleTime, packets: packetsAtWritten))
        } catch {
            fail(.writeFailed(CAFError.io(operation: "recording the stream position in", path: error.path, errno: error.code).description), file: finished)
            return false
        }
        positionLog = nil
        // Journaled before the entry names the next file: a crash in between resumes this one,
        // cuts it again and journals it again.
        journalHandOff(finished, frames: writer.frameCount, complete: true)
        CrashPoint.midSegmentCut.reached()
        let preroll = state.preroll?.preroll(endingAt: nextAudioStart)
        let firstFrame = preroll?.first ?? min(nextAudioStart, firstValid)
        let created: RecordingFile
        do throws(StorageError) {
            created = try state.maker.create(firstFrame: firstFrame, firstValid: firstValid)
        } catch {
            fail(error, file: (state.maker.outputDirectory as NSString).appendingPathComponent(state.maker.naturalPath(firstValid: firstValid)))
            return false
        }
        let next = created.writer
        let index = StreamIndex(outputDirectory: state.maker.outputDirectory)
        do {
            if let preroll {
                try next.append([UInt8](preroll.payload), packetSizes: preroll.packetSizes, frameCount: preroll.frameCount)
            }
            try next.synchronize()
            // Resuming in the new file starts at the same stream position as now (nothing of the
            // message being cut counts as written), with its pre-roll kept.
            let log = try StreamPositionLog.create(
                cafPath: next.path, initial: StreamPositionRecord(sequence: written.sequence, sampleTime: written.sampleTime, packets: next.packetCount))
            try DurableFile.synchronizeDirectory(DurableFile.folder(of: next.path))
            let owner = (try? claim.contents()).flatMap { StreamIndexEntry(text: $0) }?.owner
            try claim.record(StreamIndexEntry(stream: .recording(relativePath: index.relativePath(of: next.path)), owner: owner), synchronizing: true)
            positionLog = log
            recordedSequence = written.sequence
        } catch {
            next.close()
            fail(.writeFailed("cannot begin the next segment file \(next.path): \(error)"), file: next.path)
            return false
        }
        try? StreamPositionLog.remove(cafPath: finished)
        next.writebackAfter = Self.writebackAfter
        self.writer = next
        currentPath = next.path
        events.segmentStarted(next.path, created.naming)
        originSampleTime = firstFrame
        fileEnd = nextAudioStart
        gapCount = 0
        // The finalized file holds everything written so far, durably; the new file's position log
        // records it, and the log's rounds continue in the new file.
        pendingRound.discard()
        packetsBeforePending = next.packetCount
        packetsAtWritten = next.packetCount
        submitted = written
        unsyncedBytes = 0
        if durable != written {
            durable = written
            events.durable(durable)
        }
        state.boundary = state.clock.nextBoundary(after: firstValid)
        segmenting = state
        return true
    }

    /// Records a gap of `length` frames at `sampleTime` for `sequence`.
    public func recordGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String) {
        lane.submit { [self] in
            guard failure == nil, writer != nil else { return }
            let end = sampleTime + length
            if end > fileEnd || (length == 0 && sampleTime >= fileEnd) {
                // The marker goes in the file where the gap begins (it may have begun in the one before).
                let start = max(sampleTime, fileEnd)
                guard let writer else { return }
                let name = "gap: \(length) frames not captured (\(reason))"
                do throws(CAFError) {
                    try writer.addMarker(framePosition: start - originSampleTime, name: name)
                } catch {
                    fail(.writeFailed(error.description))
                    return
                }
                pendingRound.appendMarker(framePosition: start - originSampleTime, name: name)
                gapCount += 1
                guard fillGap(from: start, to: end) else { return }
            }
            written = DurablePosition(sequence: sequence, sampleTime: end)
            packetsAtWritten = self.writer?.packetCount ?? packetsAtWritten
            askForRound()
        }
    }

    /// Moves the file past a gap: linear PCM as silence (a hole, no disk blocks: see appendSilence),
    /// cut at segment boundaries like audio; VBR by its timeline only.
    private func fillGap(from start: Int64, to end: Int64) -> Bool {
        var position = start
        while position < end {
            var stop = end
            if let boundary = segmenting?.boundary, boundary <= position {
                guard cut(remainder: 0, nextAudioStart: position, firstValid: position) else { return false }
            }
            if let boundary = segmenting?.boundary { stop = min(end, boundary) }
            if format.isLinearPCM {
                guard let writer else { return false }
                do throws(CAFError) {
                    try writer.appendSilence(frameCount: stop - position)
                } catch {
                    fail(.writeFailed(error.description))
                    return false
                }
                pendingRound.appendSilence(frames: stop - position)
                unsyncedBytes += 1
            } else {
                segmenting?.preroll?.forget()
            }
            fileEnd = stop
            position = stop
        }
        return true
    }

    /// Finalizes the file (sizes, packet table, markers) after everything submitted before, records
    /// the finished stream in the stream index (so a sender that missed the EndAccepted gets it again
    /// for the resume window), and calls `completion` with the result. `end` is nil for a stream
    /// finalized without its end (its connection lost, and the receiver told not to wait for it):
    /// it then leaves the index.
    public func finish(_ end: StreamEnding?, completion: @escaping @Sendable (Result<FinishedFile, StorageError>) -> Void) {
        lane.submit { [self] in
            if let failure { return completion(.failure(failure)) }
            guard let writer else { return completion(.failure(.writeFailed("\(currentPath) was already closed"))) }
            do throws(CAFError) {
                try writer.finalize(remainderFrames: format.isVariableBitRate ? end?.remainderFrames ?? 0 : 0)
            } catch {
                let storageError = StorageError.writeFailed(error.description)
                fail(storageError)
                return completion(.failure(storageError))
            }
            self.writer = nil
            positionLog = nil
            // Journaled before the position log goes: a crash in between leaves the stream
            // resumable, and its end finishes (and journals) the file again.
            journalHandOff(currentPath, frames: writer.frameCount, complete: end != nil)
            try? StreamPositionLog.remove(cafPath: currentPath)
            // The entry names the file relative to the output folder; it becomes the finished record.
            let entry = (try? claim?.contents()).flatMap { StreamIndexEntry(text: $0) }
            if let claim, let end, let entry, case .recording(let relativePath) = entry.stream, !relativePath.isEmpty {
                let record = FinishedStreamRecord(
                    relativePath: relativePath,
                    frames: writer.frameCount, packets: writer.packetCount, lastSequence: end.lastSequence, endSampleTime: end.endSampleTime)
                do throws(DurableFileError) {
                    try claim.recordFinished(record, owner: entry.owner)
                    claim.release(removingEntry: false)
                } catch {
                    // The file is complete; only a lost EndAccepted could not be answered again.
                    claim.release(removingEntry: true)
                }
            } else {
                claim?.release(removingEntry: true)
            }
            claim = nil
            durable = written
            events.durable(durable)
            completion(.success(FinishedFile(path: currentPath, frames: writer.frameCount, packets: writer.packetCount, bytes: writer.dataByteCount, gaps: gapCount)))
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
            guard failure == nil, writer != nil, written != durable else { return close(finalizing: finalizing, completion: completion) }
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
        if let writer {
            var synced = false
            if finalizing, failure == nil {
                do throws(CAFError) {
                    try writer.finalize(remainderFrames: 0)
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
            let end = StreamPositionRecord(sequence: written.sequence, sampleTime: written.sampleTime, packets: writer.packetCount)
            // Only acknowledged audio the position log does not yet cover needs the file kept; a
            // stream that failed before anything past it was acknowledged lets go as it is (its
            // sender still holds the rest).
            let acknowledgedPastRecord = durable.sequence > recordedSequence
            if !synced, acknowledgedPastRecord {
                writer.releaseDescriptor()
                return strand(StrandedFile(writer: writer, path: currentPath, positionLog: positionLog, end: end), completion: completion)
            }
            writer.close()
            // Everything written is durable: the position log records where a resume continues
            // (a failed stream's stays where it was: nothing acknowledged lies past it).
            if synced, let positionLog {
                do throws(DurableFileError) {
                    try positionLog.append(end)
                } catch {
                    if acknowledgedPastRecord {
                        return strand(StrandedFile(writer: nil, path: currentPath, positionLog: positionLog, end: end), completion: completion)
                    }
                }
            }
        }
        writer = nil
        positionLog = nil
        // Resumable: the entry stays, and any receiver sharing the folder may now claim the stream.
        claim?.release(removingEntry: false)
        claim = nil
        completion()
    }

    // MARK: - Rounds and checkpoints (called on `lane` by the pool)

    /// What the round commits for this stream: what it wrote since its last round and the position
    /// that reaches; nil when there is nothing new (or the file is closed or failed).
    func takeRound() -> RoundTake? {
        awaitingRound = false
        guard failure == nil, let writer, written != submitted else { return nil }
        let position = StreamPositionRecord(sequence: written.sequence, sampleTime: written.sampleTime, packets: writer.packetCount)
        let body = pendingRound.take(packetsBefore: packetsBeforePending, position: position)
        packetsBeforePending = writer.packetCount
        unsyncedBytes = 0
        submitted = written
        return RoundTake(
            subject: subject, file: LoggedFile(stream: stream, relativePath: relativePath(of: currentPath)), path: currentPath, roundBody: body,
            position: position, needsCreationSync: !entriesDurable)
    }

    /// The file's path relative to the output folder (as the stream index names it).
    private func relativePath(of path: String) -> String {
        let prefix = outputDirectory.hasSuffix("/") ? outputDirectory : outputDirectory + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }

    /// The round's file system sync made this new stream's files and entries durable.
    func creationMadeDurable() { entriesDurable = true }

    /// Makes this new stream's files, position log, index entry and their folders durable by
    /// themselves (FUSE, or a failed file system sync). False when it failed (and the stream with it).
    func makeCreationDurable() -> Bool {
        guard failure == nil, let writer else { return false }
        do throws(CAFError) {
            try writer.synchronize()
        } catch {
            fail(.writeFailed(error.description))
            return false
        }
        do throws(DurableFileError) {
            try positionLog?.synchronize()
            try claim?.synchronize()
        } catch {
            fail(.writeFailed(CAFError.io(operation: "making durable the new files of", path: path, errno: error.code).description))
            return false
        }
        return synchronizeEntries()
    }

    /// Makes this file's audio and journal durable by itself (a checkpoint on FUSE, or after the
    /// file system sync failed), when the stream still writes the file the checkpoint covers: a file
    /// it let go of was made durable then. False when it failed.
    func synchronizeForCheckpoint(path: String) -> Bool {
        forCheckpoint(path: path) { writer throws(CAFError) in try writer.synchronize() }
    }

    /// Writes what the file's writer gathers in memory to the file (for the checkpoint's syncfs),
    /// when the stream still writes the file the checkpoint covers. False when it failed.
    func flushForCheckpoint(path: String) -> Bool {
        forCheckpoint(path: path) { writer throws(CAFError) in try writer.flush() }
    }

    /// A checkpoint's step for the file at `path`: a stranded file's retry, or `step` on the writer
    /// while the stream still writes that file (nothing to do otherwise). False when it failed.
    private func forCheckpoint(path: String, _ step: (CAFWriter) throws(CAFError) -> Void) -> Bool {
        if let retried = retryStranded(path: path) { return retried }
        guard let writer, currentPath == path else { return true }
        do throws(CAFError) {
            try step(writer)
            return true
        } catch {
            fail(.writeFailed(error.description))
            return false
        }
    }

    /// Lets go of the stream's file without letting go of the stream: see `stranded`.
    private func strand(_ file: StrandedFile, completion: @escaping @Sendable () -> Void) {
        stranded = file
        writer = nil
        positionLog = nil
        pool.coverAtNextCheckpoint(self, path: file.path, position: file.end)
        completion()
    }

    /// A checkpoint's retry of the stranded file at `path`: makes it durable, records where it ends
    /// and lets the stream go. Nil when this stream has no stranded file there; false when it failed
    /// again (the checkpoint then fails too).
    private func retryStranded(path: String) -> Bool? {
        guard var file = stranded, file.path == path else { return nil }
        do throws(CAFError) {
            if let writer = file.writer {
                try writer.synchronize()
                writer.close()
                file.writer = nil
                stranded = file
            }
        } catch {
            return false
        }
        do throws(DurableFileError) {
            try file.positionLog?.append(file.end)
        } catch {
            return false
        }
        stranded = nil
        claim?.release(removingEntry: false)
        claim = nil
        return true
    }

    /// Records the checkpoint's position in the file's position log (its audio is durable by now),
    /// synced when asked (else the checkpoint's second syncfs makes it durable), when the stream
    /// still writes that file. False when it failed.
    func recordCheckpoint(path: String, position: StreamPositionRecord, synchronizing: Bool) -> Bool {
        guard writer != nil, currentPath == path, let positionLog else { return true }
        do throws(DurableFileError) {
            try positionLog.write(position)
            if synchronizing { try positionLog.synchronize() }
            recordedSequence = max(recordedSequence, position.sequence)
            return true
        } catch {
            fail(.writeFailed(CAFError.io(operation: "recording the stream position in", path: error.path, errno: error.code).description))
            return false
        }
    }

    /// Makes the files' folder entries durable if no round has yet (this stream syncing alone).
    private func synchronizeEntries() -> Bool {
        guard !entriesDurable else { return true }
        do throws(DurableFileError) {
            try DurableFile.synchronizeDirectory(directory)
            if let claim { try DurableFile.synchronizeDirectory(DurableFile.folder(of: claim.entryPath)) }
        } catch {
            fail(.writeFailed(CAFError.io(operation: "making durable the folder of", path: path, errno: error.code).description))
            return false
        }
        entriesDurable = true
        return true
    }

    /// The round committed `position` to the log: tell the session layer (unless the stream ended
    /// meanwhile; finishing and detaching report on their own).
    func roundMadeDurable(_ record: StreamPositionRecord) {
        guard failure == nil, writer != nil else { return }
        entriesDurable = true
        let position = DurablePosition(sequence: record.sequence, sampleTime: record.sampleTime)
        if position != durable, position.sequence >= durable.sequence {
            durable = position
            events.durable(position)
        }
        if let detach = pendingDetach, durable == written {
            pendingDetach = nil
            close(finalizing: detach.finalizing, completion: detach.completion)
        }
    }

    /// Journals a finished file for its hand-off (`--on-finalize`), when one is configured.
    private func journalHandOff(_ path: String, frames: Int64, complete: Bool) {
        guard let handOff else { return }
        let outputDirectory = claim.map { DurableFile.folder(of: DurableFile.folder(of: $0.entryPath)) } ?? DurableFile.folder(of: path)
        let relative = path.hasPrefix(outputDirectory + "/") ? String(path.dropFirst(outputDirectory.count + 1)) : (path as NSString).lastPathComponent
        handOff.journal(path: path, relativePath: relative, frames: frames, complete: complete)
    }

    /// Fails the stream because the file system sync failed and its files could not be synced alone.
    func failSync(_ error: StorageError) { fail(error) }

    // MARK: - Private

    private func askForRound() {
        if !awaitingRound {
            awaitingRound = pool.needsRound(self)
        }
        if unsyncedBytes >= pool.policy.bytes { pool.startRoundEarly() }
    }

    /// Syncs this stream's files by themselves (one stream letting go of its file, or detaching
    /// once the pool runs no more rounds): everything written becomes durable, and so acknowledged.
    private func synchronizeAlone() {
        guard failure == nil, let writer else { return }
        let started = ContinuousClock.now
        defer { metrics?.diskWrite(duration: ContinuousClock.now - started) }
        do throws(CAFError) {
            try writer.synchronize()
        } catch {
            fail(.writeFailed(error.description))
            return
        }
        guard synchronizeEntries() else { return }
        unsyncedBytes = 0
        submitted = written
        pendingRound.discard()
        packetsBeforePending = writer.packetCount
        if durable != written {
            durable = written
            events.durable(durable)
        }
    }

    /// Fails the stream; `file` is the file it failed on (default: the one being written).
    private func fail(_ error: StorageError, file: String? = nil) {
        guard failure == nil else { return }
        failure = error
        events.failed(error, file ?? currentPath)
        if let detach = pendingDetach {
            pendingDetach = nil
            close(finalizing: detach.finalizing, completion: detach.completion)
        }
    }
}

/// A file its stream let go of before it was durable with its position recorded (`StreamWriter.stranded`).
struct StrandedFile {
    /// Its writer, until the file is durable (gathered audio included).
    var writer: CAFWriter?
    var path: String
    var positionLog: StreamPositionLog?
    /// Where the file ends: the position a resume continues from.
    var end: StreamPositionRecord
}
