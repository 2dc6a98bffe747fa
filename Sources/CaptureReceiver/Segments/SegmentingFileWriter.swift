import CaptureWire
import CAF
import CaptureCore
import Foundation

/// One stream's recording on disk: the CAF file being written, its position log and the stream's
/// claim in the `StreamIndex`, cut into segment files at the boundaries of a `SegmentClock` when
/// asked (`--segment`). It writes audio and gaps where the stream's timeline puts them (audio the
/// file already holds is dropped; linear PCM gaps are filled with silence and every gap is marked),
/// finishes files, and carries out the steps of the commit log's rounds and checkpoints on them. What
/// it writes goes into the stream's `PendingRound`; when audio is acknowledged is the `StreamWriter`'s
/// business, which owns this writer and calls it on its lane only.
///
/// At a segment boundary the audio before it ends one file, which is finalized (and so durable) with
/// its position recorded; the next file is created with its pre-roll (VBR), made durable with its
/// position log, and only then does the stream's index entry name it. A crash at any step leaves a
/// stream that resumes in one file or the other without losing or repeating a sample
/// (docs/RECORDINGS.md).
final class SegmentingFileWriter {
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

    /// Writing failed: the error, and the file it failed on when it is not the one being written.
    struct Failure: Error {
        var error: StorageError
        var file: String?
    }

    /// Audio a recording writes before its writeback is started (`CAFWriter.writebackAfter`): 8 s
    /// of an Opus stream at 128 kb/s. The checkpoints' syncs then find little to write, and the
    /// commit log's rounds never wait behind a burst of every stream's audio since the last one.
    /// Each start costs a system call that submits its own I/O (on a VM, a notification of the
    /// virtual disk): at 10,000 streams, starting it every 32 KiB took 9 % of the receiver's CPU.
    static let writebackAfter = 131_072

    /// How every recording's writer writes: writeback started every `writebackAfter` bytes, and the
    /// audio written back released from the page cache (the receiver never reads it back).
    private static func startWritingBehind(_ writer: CAFWriter) {
        writer.writebackAfter = writebackAfter
        writer.releasesWrittenBackPages = true
    }

    /// The stream's format.
    let format: StreamFormat
    /// The directory whose file system holds the file (what a sync round flushes); computed once,
    /// since every round asks every stream for it.
    let directory: String
    /// The output folder: the log names files relative to it.
    private let outputDirectory: String
    private let metrics: (any ReceiverMetricsRecorder)?
    /// Told of every file finished (`--on-finalize`).
    private let handOff: FinishedFileHandOff?
    private let events: StreamWriterEvents
    private var writer: CAFWriter?
    private var positionLog: StreamPositionLog?
    /// The stream's claim in the `StreamIndex`: held while the file is open here (and while a file
    /// given up is stranded).
    private var claim: StreamClaim?
    /// The file being written now.
    private(set) var currentPath: String
    /// The stream position just past what the file holds (audio, PCM silence, or a VBR gap's
    /// jump): audio before it is already in this file or the one before (resent after a reconnect
    /// that followed a segment cut) and is dropped.
    private var fileEnd: Int64
    /// The stream's sample index of the file's first frame (Hello's `start_sample_time`): markers
    /// are placed relative to it.
    private var originSampleTime: Int64
    /// Cutting into segments, when asked.
    private var segmenting: SegmentState?
    /// The gaps marked in the current file.
    private(set) var gapCount = 0
    /// The last sequence the file's position log records (or was written to record, by a
    /// checkpoint): acknowledged audio past it is in the commit log and the file only.
    private(set) var recordedSequence: UInt64
    /// The file's packets once everything up to the stream position last written was appended
    /// (before a message being cut at a segment boundary).
    private var packetsAtWritten: Int64
    /// Files finished at segment boundaries so far: each holds, durably, everything written before
    /// its cut.
    private(set) var finishedFiles = 0
    /// The files and their folder entries are durable. A new stream's files are created without
    /// fsync; its first round makes them durable (with every other new stream's: one syncfs), or,
    /// when this stream syncs alone, an fsync of each does.
    private(set) var entriesDurable: Bool

    /// A writer over an open CAF file and its position log, whose position log records `start`.
    init(
        writer: CAFWriter, positionLog: StreamPositionLog, claim: StreamClaim?, start: StreamPosition, originSampleTime: Int64,
        segments: Segments?, handOff: FinishedFileHandOff?, outputDirectory: String, events: StreamWriterEvents, metrics: (any ReceiverMetricsRecorder)?,
        entriesDurable: Bool
    ) {
        format = writer.format
        directory = (writer.path as NSString).deletingLastPathComponent
        self.outputDirectory = outputDirectory
        self.metrics = metrics
        self.handOff = handOff
        self.events = events
        self.claim = claim
        self.positionLog = positionLog
        self.originSampleTime = originSampleTime
        self.entriesDurable = entriesDurable
        currentPath = writer.path
        recordedSequence = start.lastSequence
        packetsAtWritten = writer.packetCount
        // Right after a segment cut the file holds pre-roll and audio past the durable position.
        // A resumed file's counts come from the file: added without overflow.
        let fileFrames = originSampleTime.addingReportingOverflow(writer.frameCount)
        let fileStart = originSampleTime.addingReportingOverflow(Int64(clamping: writer.primingFrames))
        fileEnd = max(start.endSampleTime, fileFrames.overflow ? .max : fileFrames.partialValue)
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
        Self.startWritingBehind(writer)
        self.writer = writer
    }

    /// Whether a file is open for writing.
    var isOpen: Bool { writer != nil }

    /// The current file's packets (nil once it is closed).
    var packetCount: Int64? { writer?.packetCount }

    /// The current file's path relative to the output folder (as the stream index names it).
    var relativePath: String {
        let prefix = outputDirectory.hasSuffix("/") ? outputDirectory : outputDirectory + "/"
        return currentPath.hasPrefix(prefix) ? String(currentPath.dropFirst(prefix.count)) : currentPath
    }

    /// The stream position `position` in the current file's terms (its packets now).
    func record(at position: StreamPosition) -> StreamPositionRecord {
        StreamPositionRecord(position: position, packets: writer?.packetCount ?? packetsAtWritten)
    }

    // MARK: - Writing

    /// Writes `audio` where the timeline puts it, cutting files at segment boundaries; `written` is
    /// the stream position before it (what a file finished at a cut records). What is written goes
    /// into `round`.
    func write(_ audio: TimedAudio, after written: StreamPosition, round: inout PendingRound) throws(Failure) {
        guard writer != nil else { return }
        if var rest = audio.dropping(before: fileEnd, format: format) {
            while let boundary = segmenting?.boundary, rest.end > boundary {
                if rest.first < boundary {
                    let parts = rest.split(at: boundary, format: format)
                    try append(parts.before, round: &round)
                    try cut(remainder: parts.remainder, nextAudioStart: parts.after.first, firstValid: boundary, written: written, round: &round)
                    rest = parts.after
                } else {
                    // The boundary fell where no audio is (a VBR gap): the next file begins with this audio.
                    try cut(remainder: 0, nextAudioStart: rest.first, firstValid: rest.first, written: written, round: &round)
                }
            }
            try append(rest, round: &round)
        }
        packetsAtWritten = writer?.packetCount ?? packetsAtWritten
    }

    /// Records a gap of `length` frames at `sampleTime`: a marker in the file where it begins, and
    /// linear PCM silence over it (cut at segment boundaries like audio); `written` is the stream
    /// position before it.
    func writeGap(sampleTime: Int64, length: Int64, reason: String, after written: StreamPosition, round: inout PendingRound) throws(Failure) {
        guard let writer else { return }
        let end = sampleTime + length
        if end > fileEnd || (length == 0 && sampleTime >= fileEnd) {
            // The marker goes in the file where the gap begins (it may have begun in the one before).
            let start = max(sampleTime, fileEnd)
            let name = CAFMarker.gapName(length: length, reason: reason)
            do throws(CAFError) {
                try writer.addMarker(framePosition: start - originSampleTime, name: name)
            } catch {
                throw Failure(error: .writeFailed(error.description))
            }
            round.marker(framePosition: start - originSampleTime, name: name)
            gapCount += 1
            try fillGap(from: start, to: end, written: written, round: &round)
        }
        packetsAtWritten = self.writer?.packetCount ?? packetsAtWritten
    }

    /// Records a gap of `length` frames at `sampleTime` whose frames the audio carries as encoded
    /// silence (protocol FilledGap): a gap marker where it begins, named like any gap's, and nothing
    /// else (the audio already covers it). It goes in the current file, at its start when the gap
    /// began in a file before it. A marker the file already holds (sent again after a crash) is not
    /// added or counted twice.
    func writeFilledGap(sampleTime: Int64, length: Int64, reason: String, round: inout PendingRound) throws(Failure) {
        guard let writer else { return }
        let position = max(sampleTime, originSampleTime) - originSampleTime
        let name = CAFMarker.gapName(length: length, reason: reason)
        let added: Bool
        do throws(CAFError) {
            added = try writer.addMarker(framePosition: position, name: name)
        } catch {
            throw Failure(error: .writeFailed(error.description))
        }
        if added {
            round.marker(framePosition: position, name: name)
            gapCount += 1
        }
    }

    /// Records a marker with `label` at `sampleTime` in the file that holds that point (the current
    /// one: a marker covers no frames, so it stands where the last message ended). It is named
    /// `CAFMarker.userMarkerName(label:)`, beside the gaps' markers. A marker the file already holds
    /// (the same point and name, written before a crash and sent again) is not added twice.
    func writeMarker(sampleTime: Int64, label: String, round: inout PendingRound) throws(Failure) {
        guard let writer else { return }
        let position = max(sampleTime, originSampleTime) - originSampleTime
        let name = CAFMarker.userMarkerName(label: label)
        let added: Bool
        do throws(CAFError) {
            added = try writer.addMarker(framePosition: position, name: name)
        } catch {
            throw Failure(error: .writeFailed(error.description))
        }
        if added { round.marker(framePosition: position, name: name) }
    }

    /// Appends audio to the current file (and remembers VBR packets for pre-roll).
    private func append(_ audio: TimedAudio, round: inout PendingRound) throws(Failure) {
        guard let writer else { throw Failure(error: .writeFailed("\(currentPath) was already closed")) }
        let started = ContinuousClock.now
        let appended: Result<Void, CAFError> = audio.payload.withUnsafeBytes { bytes in
            Result { () throws(CAFError) in try writer.append(bytes, packetSizes: audio.packetSizes, frameCount: audio.frameCount) }
        }
        metrics?.diskWrite(duration: ContinuousClock.now - started)
        if case .failure(let error) = appended { throw Failure(error: .writeFailed(error.description)) }
        segmenting?.preroll?.remember(audio)
        round.audio(audio)
        fileEnd = audio.end
    }

    /// Moves the file past a gap: linear PCM as silence (a hole, no disk blocks: see appendSilence),
    /// cut at segment boundaries like audio; VBR by its timeline only.
    private func fillGap(from start: Int64, to end: Int64, written: StreamPosition, round: inout PendingRound) throws(Failure) {
        var position = start
        while position < end {
            var stop = end
            if let boundary = segmenting?.boundary, boundary <= position {
                try cut(remainder: 0, nextAudioStart: position, firstValid: position, written: written, round: &round)
            }
            if let boundary = segmenting?.boundary { stop = min(end, boundary) }
            if format.isLinearPCM {
                guard let writer else { throw Failure(error: .writeFailed("\(currentPath) was already closed")) }
                do throws(CAFError) {
                    try writer.appendSilence(frameCount: stop - position)
                } catch {
                    throw Failure(error: .writeFailed(error.description))
                }
                round.silence(frames: stop - position)
            } else {
                segmenting?.preroll?.forget()
            }
            fileEnd = stop
            position = stop
        }
    }

    /// Ends the current file at its segment boundary and goes on in the next: finalizes the file
    /// (`remainder`: VBR frames of its last packet past the boundary), which makes it durable, and
    /// records `written` as where it ends; creates the next file, beginning with the pre-roll that
    /// ends at `nextAudioStart` (VBR), with its first valid sample at `firstValid`, and makes it and
    /// its position log durable; then names it in the stream's index entry, durably, and removes the
    /// old file's position log. `round` restarts in the new file: what it held is durable in the
    /// finished one. A failure fails the stream: its sender resumes where the durable state says.
    private func cut(remainder: Int, nextAudioStart: Int64, firstValid: Int64, written: StreamPosition, round: inout PendingRound) throws(Failure) {
        guard let writer, let claim, var state = segmenting else { throw Failure(error: .writeFailed("\(currentPath) was already closed")) }
        let finished = currentPath
        do throws(CAFError) {
            try writer.finalize(remainderFrames: format.isVariableBitRate ? remainder : 0)
        } catch {
            throw Failure(error: .writeFailed(error.description))
        }
        self.writer = nil
        // The finished file holds every message before the one being cut, durably: its position
        // log says so (the rounds since its last checkpoint are only in the commit log), so that a
        // crash before the entry names the next file resumes this one exactly there.
        do throws(DurableFileError) {
            try positionLog?.append(StreamPositionRecord(position: written, packets: packetsAtWritten))
        } catch {
            throw Failure(error: .writeFailed(CAFError.io(operation: "recording the stream position in", path: error.path, errno: error.code).description), file: finished)
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
            throw Failure(error: error, file: (state.maker.outputDirectory as NSString).appendingPathComponent(state.maker.naturalPath(firstValid: firstValid)))
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
                cafPath: next.path, initial: StreamPositionRecord(position: written, packets: next.packetCount))
            try DurableFile.synchronizeDirectory(DurableFile.folder(of: next.path))
            let owner = (try? claim.contents()).flatMap { StreamIndexEntry(text: $0) }?.owner
            try claim.record(StreamIndexEntry(stream: .recording(relativePath: index.relativePath(of: next.path)), owner: owner), synchronizing: true)
            positionLog = log
            recordedSequence = written.lastSequence
        } catch {
            next.close()
            throw Failure(error: .writeFailed("cannot begin the next segment file \(next.path): \(error)"), file: next.path)
        }
        try? StreamPositionLog.remove(cafPath: finished)
        Self.startWritingBehind(next)
        self.writer = next
        currentPath = next.path
        events.segmentStarted(next.path, created.naming)
        originSampleTime = firstFrame
        fileEnd = nextAudioStart
        gapCount = 0
        finishedFiles += 1
        // The finalized file holds everything written so far, durably; the new file's position log
        // records it, and the log's rounds continue in the new file.
        round.restart(packetsBefore: next.packetCount)
        packetsAtWritten = next.packetCount
        state.boundary = state.clock.nextBoundary(after: firstValid)
        segmenting = state
    }

    // MARK: - Finishing and letting go

    /// Finalizes the file (sizes, packet table, markers), records the finished stream in the stream
    /// index (so a sender that missed the EndAccepted gets it again for the resume window), and
    /// returns what the file holds. `end` is nil for a stream finalized without its end: it then
    /// leaves the index. `written` is the stream position the file holds (every message before the
    /// end).
    func finish(_ end: StreamEnd?, written: StreamPosition) throws(StorageError) -> FinishedFile {
        guard let writer else { throw .writeFailed("\(currentPath) was already closed") }
        do throws(CAFError) {
            try writer.finalize(remainderFrames: format.isVariableBitRate ? end?.remainderFrames ?? 0 : 0)
        } catch {
            throw .writeFailed(error.description)
        }
        self.writer = nil
        if end != nil {
            // The finalized file holds everything written, durably, but the rounds since the last
            // checkpoint are only in the commit log: its position log says so now, so that a crash
            // before the index records the stream finished resumes the file at its end (the sender
            // sends the end again) instead of where the last checkpoint left it. Should this fail,
            // the finished record below, a moment later, says the same.
            try? positionLog?.append(StreamPositionRecord(position: written, packets: writer.packetCount))
        }
        positionLog = nil
        // Journaled before the position log goes: a crash in between leaves the stream
        // resumable, and its end finishes (and journals) the file again.
        journalHandOff(currentPath, frames: writer.frameCount, complete: end != nil)
        // The finished record is written before the position log goes: a crash between the two
        // would otherwise leave an entry naming a file that is neither resumable nor finished, and
        // the sender, missing its EndAccepted, would record the whole stream again in a new file.
        // A crash after the record leaves a stale position log, which start-up removes.
        CrashPoint.finishBeforeRecord.reached()
        // The entry names the file relative to the output folder; it becomes the finished record.
        let entry = (try? claim?.contents()).flatMap { StreamIndexEntry(text: $0) }
        if let claim, let end, let entry, case .recording(let relativePath) = entry.stream, !relativePath.isEmpty {
            let record = FinishedStreamRecord(
                relativePath: relativePath,
                frames: writer.frameCount, packets: writer.packetCount, end: end.position)
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
        CrashPoint.finishAfterRecord.reached()
        try? StreamPositionLog.remove(cafPath: currentPath)
        return FinishedFile(path: currentPath, frames: writer.frameCount, packets: writer.packetCount, bytes: writer.dataByteCount, gaps: gapCount)
    }

    /// Finalizes the file where it ends (a receiver shutting down), which makes it durable; it stays
    /// open until `close`.
    func finalize() throws(CAFError) {
        try writer?.finalize(remainderFrames: 0)
    }

    /// Makes the file and its folder entries durable by themselves.
    func synchronize() throws(StorageError) {
        guard let writer else { return }
        do throws(CAFError) {
            try writer.synchronize()
        } catch {
            throw .writeFailed(error.description)
        }
        try synchronizeEntries()
    }

    /// Closes the file, leaving the stream resumable. When `synced` (the file is durable), `end` is
    /// recorded in its position log. When the file must not be let go of (`keep`: acknowledged audio
    /// lies past what its position log records) and it is not durable, or `end` cannot be recorded,
    /// it is given up instead as a `StrandedFile` for the checkpoints to retry, and the claim is
    /// kept until then. Otherwise the claim is released, so any receiver may resume the stream.
    func close(end: StreamPositionRecord, synced: Bool, keep: Bool) -> StrandedFile? {
        if let writer {
            if !synced, keep {
                writer.releaseDescriptor()
                return strand(StrandedFile(writer: writer, path: currentPath, positionLog: positionLog, end: end))
            }
            writer.close()
            // Everything written is durable: the position log records where a resume continues
            // (a failed stream's stays where it was: nothing acknowledged lies past it).
            if synced, let positionLog {
                do throws(DurableFileError) {
                    try positionLog.append(end)
                } catch {
                    if keep { return strand(StrandedFile(writer: nil, path: currentPath, positionLog: positionLog, end: end)) }
                }
            }
        }
        writer = nil
        positionLog = nil
        releaseClaim()
        return nil
    }

    /// Lets go of the stream's claim (its entry stays: the stream is resumable).
    func releaseClaim() {
        claim?.release(removingEntry: false)
        claim = nil
    }

    private func strand(_ file: StrandedFile) -> StrandedFile {
        writer = nil
        positionLog = nil
        return file
    }

    // MARK: - Rounds and checkpoints

    /// The round's file system sync made this new stream's files and entries durable.
    func creationMadeDurable() { entriesDurable = true }

    /// Makes this new stream's files, position log, index entry and their folders durable by
    /// themselves (FUSE, or a failed file system sync).
    func makeCreationDurable() throws(StorageError) {
        guard let writer else { throw .writeFailed("\(currentPath) was already closed") }
        do throws(CAFError) {
            try writer.synchronize()
        } catch {
            throw .writeFailed(error.description)
        }
        do throws(DurableFileError) {
            try positionLog?.synchronize()
            try claim?.synchronize()
        } catch {
            throw .writeFailed(CAFError.io(operation: "making durable the new files of", path: currentPath, errno: error.code).description)
        }
        try synchronizeEntries()
    }

    /// Makes the file's audio and journal durable by itself (a checkpoint on FUSE, or after the file
    /// system sync failed), when it still writes the file at `path`.
    func synchronizeForCheckpoint(path: String) throws(CAFError) {
        try writer(writing: path)?.synchronize()
    }

    /// Writes what the file's writer gathers in memory to the file (for the checkpoint's syncfs),
    /// when it still writes the file at `path`.
    func flushForCheckpoint(path: String) throws(CAFError) {
        try writer(writing: path)?.flush()
    }

    /// Records the checkpoint's position in the file's position log (its audio is durable by now),
    /// synced when asked, when it still writes the file at `path`.
    func recordCheckpoint(path: String, position: StreamPositionRecord, synchronizing: Bool) throws(StorageError) {
        guard writer(writing: path) != nil, let positionLog else { return }
        do throws(DurableFileError) {
            try positionLog.write(position)
            if synchronizing { try positionLog.synchronize() }
            recordedSequence = max(recordedSequence, position.position.lastSequence)
        } catch {
            throw .writeFailed(CAFError.io(operation: "recording the stream position in", path: error.path, errno: error.code).description)
        }
    }

    /// The writer of the file at `path`, while the stream still writes it (a checkpoint covers that
    /// file only: one the stream let go of was made durable then).
    private func writer(writing path: String) -> CAFWriter? {
        currentPath == path ? writer : nil
    }

    /// Makes the files' folder entries durable if no round has yet (this stream syncing alone).
    private func synchronizeEntries() throws(StorageError) {
        guard !entriesDurable else { return }
        do throws(DurableFileError) {
            try DurableFile.synchronizeDirectory(directory)
            if let claim { try DurableFile.synchronizeDirectory(DurableFile.folder(of: claim.entryPath)) }
        } catch {
            throw .writeFailed(CAFError.io(operation: "making durable the folder of", path: currentPath, errno: error.code).description)
        }
        entriesDurable = true
    }

    /// Journals a finished file for its hand-off (`--on-finalize`), when one is configured.
    private func journalHandOff(_ path: String, frames: Int64, complete: Bool) {
        guard let handOff else { return }
        let outputDirectory = claim.map { DurableFile.folder(of: DurableFile.folder(of: $0.entryPath)) } ?? DurableFile.folder(of: path)
        let relative = path.hasPrefix(outputDirectory + "/") ? String(path.dropFirst(outputDirectory.count + 1)) : (path as NSString).lastPathComponent
        handOff.journal(path: path, relativePath: relative, frames: frames, complete: complete)
    }
}

/// A file its stream let go of before it was durable with its position recorded (`StreamWriter`'s
/// `stranded`): the commit log holds what was acknowledged, so each checkpoint tries again.
struct StrandedFile {
    /// Its writer, until the file is durable (gathered audio included).
    var writer: CAFWriter?
    var path: String
    var positionLog: StreamPositionLog?
    /// Where the file ends: the position a resume continues from.
    var end: StreamPositionRecord

    /// Makes the file durable and records where it ends; false when that failed again.
    mutating func makeDurable() -> Bool {
        do throws(CAFError) {
            if let writer {
                try writer.synchronize()
                writer.close()
                self.writer = nil
            }
        } catch {
            return false
        }
        do throws(DurableFileError) {
            try positionLog?.append(end)
        } catch {
            return false
        }
        return true
    }
}
