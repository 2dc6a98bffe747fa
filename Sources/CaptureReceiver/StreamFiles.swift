import CAF
import CaptureCore
import CaptureWire
import Foundation

/// A stream's file, open for writing, and where its sender continues.
struct OpenedStream {
    var writer: StreamWriter
    var resume: StreamPosition
    /// The file was an earlier connection's (or another receiver's), continued.
    var resumed: Bool
    /// How a new file was named when its natural name was taken.
    var naming: FileNaming? = nil
    /// For a stream that continues another (`Hello.continues`): whether the link was proven.
    var continuation: ContinuationLink? = nil
}

/// Where a new stream begins and what it continues, once its `Hello.continues` was checked.
struct StreamBeginning: Equatable {
    var resume: StreamPosition
    var link: ContinuationLink?

    /// The `info` entries of a stream that continues another: which stream, when proven, so the two
    /// recordings can be joined (`first sample` says where this one begins); and the audio its
    /// sender reports lost before it (`Continuation.lost_from_sample_time`), whether or not the link
    /// could be proven, so that the file itself says what is missing.
    var info: [(key: String, value: String)] {
        var entries: [(key: String, value: String)] = []
        if case .linked(let continued, _)? = link { entries.append(("continues stream id", continued.uuidString.lowercased())) }
        if let lost = lostBefore { entries.append(("audio lost before this file", lost)) }
        return entries
    }

    /// What the sender reports lost before this stream: samples and seconds, and of which stream.
    var lostBefore: String?

    init(resume: StreamPosition, link: ContinuationLink?, hello: ValidatedHello? = nil) {
        self.resume = resume
        self.link = link
        lostBefore = hello.flatMap(Self.lostBefore(_:))
    }

    /// "samples 0-360000 (seconds 0.000-7.500) of stream ID: acknowledged by its receiver, then lost
    /// by that receiver's storage; in no file", from a continuing Hello that reports a loss.
    static func lostBefore(_ hello: ValidatedHello) -> String? {
        let message = hello.message
        guard message.hasContinues, message.continues.hasLostFromSampleTime, let continued = UUID(wireBytes: message.continues.streamID) else { return nil }
        let from = message.continues.lostFromSampleTime
        let to = message.startSampleTime
        let rate = hello.format.sampleRate
        let seconds = String(format: "%.3f-%.3f", Double(from) / rate, Double(to) / rate)
        return "samples \(from)-\(to) (seconds \(seconds)) of stream \(continued.uuidString.lowercased()): acknowledged by its receiver, then lost by that receiver's storage; in no file"
    }
}

/// The receiver's file factory: opens the file of an accepted stream. It claims the stream in the
/// `StreamIndex` (so no other receiver or connection writes it), then reopens the unfinished file its
/// entry names, or, for a stream the index does not know, creates its file (a unique name in the
/// output folder and a CAF file with the stream's format, magic cookie and `info` entries, plus its
/// position log), and binds the stream's `StreamWriter` to a `WriterPool` lane. Built once, by
/// `CaptureReceiverServer.start`, with what every stream's files need.
struct StreamFiles: Sendable {
    let configuration: ReceiverConfiguration
    let pool: WriterPool
    let index: StreamIndex

    init(configuration: ReceiverConfiguration, pool: WriterPool) {
        self.configuration = configuration
        self.pool = pool
        index = StreamIndex(outputDirectory: configuration.outputDirectory)
    }

    /// Opens the stream's file on a lane of the pool (opening comes after the streams' own
    /// operations there: `WriterLane.Priority`) and calls `completion` there. `mayCreate` is false
    /// when the sender resumes audio a new file could not hold (it no longer has the stream's
    /// beginning): then an unknown stream is `.notResumable`. `owner` is who asks: a stream whose
    /// entry names another owner is refused (`.notStreamOwner`); a new stream is created with it.
    func open(
        hello: ValidatedHello, mayCreate: Bool, owner: StreamOwner, start: Date, peer: String, events: StreamWriterEvents,
        completion: @escaping @Sendable (Result<OpenedStream, StorageError>) -> Void
    ) {
        pool.onOpeningLane { lane in
            completion(open(hello: hello, mayCreate: mayCreate, owner: owner, start: start, peer: peer, events: events, lane: lane))
        }
    }

    /// `open`, on `lane`.
    private func open(
        hello: ValidatedHello, mayCreate: Bool, owner: StreamOwner, start: Date, peer: String, events: StreamWriterEvents, lane: WriterLane
    ) -> Result<OpenedStream, StorageError> {
        let stream = hello.streamID
        // A few rounds: another receiver may create or finish the stream between two steps.
        var waitedForReplays = false
        for _ in 0..<4 {
            switch index.claimExisting(stream) {
            case .success(let claim):
                // The receiver that wrote the stream last may have died with acknowledged audio of
                // it in its commit log only: that log is replayed first.
                if case .failure(let error) = pool.replayAbandonedLogs(stream: stream, claim: claim) {
                    claim.release(removingEntry: false)
                    return .failure(error)
                }
                let text: String
                do throws(DurableFileError) {
                    text = try claim.contents()
                } catch {
                    claim.release(removingEntry: false)
                    return .failure(.cannotCreate("cannot read the stream index entry \(claim.entryPath): \(error.description)"))
                }
                let entry = StreamIndexEntry(text: text)
                // The id alone grants nothing: the stream's owner must be the one asking.
                if let recorded = entry?.owner, let refusal = recorded.refusal(of: owner) {
                    claim.release(removingEntry: false)
                    return .failure(.notStreamOwner(refusal))
                }
                if case .finished(let finished)? = entry?.stream, !finished.complete {
                    // Finalized after its resume window: it cannot be resumed; its sender continues
                    // it as a new stream (PROTOCOL.md §8.1).
                    claim.release(removingEntry: false)
                    return .failure(.notResumable)
                }
                if case .finished(let finished)? = entry?.stream, index.absolutePath(relative: finished.relativePath) != nil {
                    // Finished within its resume window: the sender missed the EndAccepted.
                    claim.release(removingEntry: false)
                    return .failure(.alreadyFinished(finished))
                }
                guard case .recording(let relative)? = entry?.stream, let path = index.absolutePath(relative: relative), ResumableFiles.isUnfinished(path) else {
                    // The entry outlived its file's recording (a crash between finishing the file and
                    // removing the entry, or before the file was named): the stream is unknown.
                    claim.release(removingEntry: true)
                    continue
                }
                if entry?.owner == nil {
                    // Entered from a folder scan (recorded before owners were kept): its first
                    // resume binds it to that sender from now on.
                    try? claim.record(StreamIndexEntry(stream: .recording(relativePath: relative), owner: owner))
                }
                return reopen(path: path, claim: claim, hello: hello, start: start, peer: peer, events: events, lane: lane)
                    .map { OpenedStream(writer: $0.0, resume: $0.1, resumed: true) }
            case .failure(.held):
                if !waitedForReplays {
                    // This receiver may hold it for a moment itself, replaying a dead receiver's
                    // log for another stream's takeover: wait for that, then look again.
                    waitedForReplays = true
                    pool.waitForTakeoverReplays()
                    continue
                }
                return .failure(.streamBusy("stream \(stream) is being recorded on another connection or by another receiver sharing \(configuration.outputDirectory)"))
            case .failure(.missing), .failure(.exists):
                guard mayCreate else { return .failure(.notResumable) }
                switch index.claimNew(stream) {
                case .success(let claim):
                    let beginning: StreamBeginning
                    switch Self.beginning(of: hello, owner: owner, index: index) {
                    case .success(let found):
                        beginning = found
                    case .failure(let error):
                        claim.release(removingEntry: true)
                        return .failure(error)
                    }
                    return create(hello: hello, beginning: beginning, owner: owner, claim: claim, start: start, peer: peer, events: events, lane: lane)
                        .map { OpenedStream(writer: $0.writer, resume: beginning.resume, resumed: false, naming: $0.naming, continuation: beginning.link) }
                case .failure(.failed(let error)):
                    return .failure(.cannotCreate("cannot enter stream \(stream) in the stream index: \(error.description)"))
                case .failure:
                    // Another receiver entered the stream a moment ago: continue with its entry.
                    continue
                }
            case .failure(.failed(let error)):
                return .failure(.cannotCreate("cannot claim stream \(stream) in the stream index: \(error.description)"))
            }
        }
        return .failure(.streamBusy("stream \(stream) is being entered by another receiver sharing \(configuration.outputDirectory)"))
    }

    /// Where a new stream begins, and whether the stream its Hello says it continues
    /// (`Hello.continues`, PROTOCOL.md §8.1) may be continued by it. A continuation must prove that it
    /// owns the continued stream the way a resume does (§6.1.2): the continued stream's owner, as its
    /// index entry records it, must accept the Hello's resume secret and the connection's identity;
    /// otherwise it is refused (`.notStreamOwner`), so no stranger's file claims to continue a stream
    /// or takes its continuation's name. A proven continuation begins right after where the continued
    /// stream's file ends when the index records that (its sender may hold audio the file already has:
    /// what was written but whose acknowledgement never reached it), else at the Hello's first
    /// sequence, and its file names the stream it continues. When the index no longer knows the
    /// continued stream (its record expired, or it was recorded on storage this receiver does not
    /// share) nothing can be proven: the stream is recorded as a new one that claims nothing.
    static func beginning(of hello: ValidatedHello, owner: StreamOwner, index: StreamIndex) -> Result<StreamBeginning, StorageError> {
        let start = StreamPosition.beginning(of: hello)
        guard hello.message.hasContinues, let continued = UUID(wireBytes: hello.message.continues.streamID) else {
            return .success(StreamBeginning(resume: start, link: nil, hello: hello))
        }
        let claim: StreamClaim
        switch index.claimExisting(continued) {
        case .success(let claimed):
            claim = claimed
        case .failure(.held):
            return .failure(.streamBusy("stream \(continued), which stream \(hello.streamID) continues, is held by another connection or receiver"))
        case .failure(.failed(let error)):
            return .failure(.cannotCreate("cannot read the stream index entry of stream \(continued), which stream \(hello.streamID) continues: \(error.description)"))
        case .failure(.missing), .failure(.exists):
            return .success(StreamBeginning(resume: start, link: .unverified(continued), hello: hello))
        }
        defer { claim.release(removingEntry: false) }
        guard let entry = index.entry(of: claim) else {
            return .success(StreamBeginning(resume: start, link: .unverified(continued), hello: hello))
        }
        if let recorded = entry.owner, let refusal = recorded.refusal(of: owner, continuing: true) {
            return .failure(.notStreamOwner("it claims to continue stream \(continued), but \(refusal)"))
        }
        var fileEnd: Int64?
        if case .finished(let record) = entry.stream { fileEnd = record.end.endSampleTime }
        guard case .finished(let record) = entry.stream, !record.complete,
              record.end.lastSequence < WireProtocol.maximumSequence, record.end.lastSequence > start.lastSequence,
              (hello.message.startSampleTime...hello.timelineEnd).contains(record.end.endSampleTime)
        else { return .success(StreamBeginning(resume: start, link: .linked(continued, fileEnd: fileEnd), hello: hello)) }
        return .success(StreamBeginning(
            resume: record.end, link: .linked(continued, fileEnd: fileEnd), hello: hello))
    }

    /// Creates a new stream's files under its fresh `claim`, and names the file in the claimed entry.
    private func create(
        hello: ValidatedHello, beginning: StreamBeginning, owner: StreamOwner, claim: StreamClaim, start: Date, peer: String,
        events: StreamWriterEvents, lane: WriterLane
    ) -> Result<(writer: StreamWriter, naming: FileNaming?), StorageError> {
        let resume = beginning.resume
        let maker = RecordingFileMaker(hello: hello, start: start, peer: peer, configuration: configuration)
        let created: RecordingFile
        do throws(StorageError) {
            created = try maker.createFirstFile(at: resume, extraInfo: beginning.info)
        } catch {
            claim.release(removingEntry: true)
            return .failure(error)
        }
        let caf = created.writer
        let path = caf.path
        let origin = StreamPositionRecord(position: resume, packets: 0)
        do throws(DurableFileError) {
            // No fsync here: the stream's first round makes the new files and their folder entries
            // durable (one syncfs for every new stream) before anything written to them is
            // acknowledged.
            let positionLog = try StreamPositionLog.createForNewFile(cafPath: path, initial: origin)
            try claim.record(StreamIndexEntry(stream: .recording(relativePath: index.relativePath(of: path)), owner: owner))
            return .success((StreamWriter(
                writer: caf, positionLog: positionLog, claim: claim, stream: hello.streamID,
                start: resume, originSampleTime: resume.nextSampleTime,
                segments: configuration.segmentLength.map { SegmentingFileWriter.Segments(length: $0, maker: maker) }, handOff: configuration.handOff,
                lane: lane, pool: pool, events: events, metrics: pool.metrics, entriesDurable: false
            ), created.naming))
        } catch {
            // The file holds no audio yet: leave nothing behind, so a retry starts cleanly.
            caf.close()
            try? DurableFile.remove(path)
            try? DurableFile.remove(CAFWriter.journalPath(for: path))
            try? StreamPositionLog.remove(cafPath: path)
            claim.release(removingEntry: true)
            return .failure(.cannotCreate("cannot create \(path): \(error.description)"))
        }
    }

    /// The stream position of a file's first frame: every file records it (`first sample`: a
    /// segment's, or a continuing stream's, which can lie after the Hello's start when the continued
    /// file already held some of the audio); files from before that record nothing and begin at the
    /// Hello's start sample time.
    private static func firstSample(of path: String, hello: ValidatedHello) -> Int64 {
        guard let recorded = (try? CAFFile.read(path: path))?.info.first(where: { $0.key == "first sample" }).flatMap({ Int64($0.value) }),
              (0...hello.timelineEnd).contains(recorded)
        else { return hello.message.startSampleTime }
        return recorded
    }

    /// The magic cookie the file keeps (PROTOCOL.md §11): Opus mono and stereo files carry none, since
    /// no reader needs it and an Apple reader expects another layout; 3–8 channel Opus keeps the
    /// OpusHead for its channel mapping.
    static func storedCookie(_ hello: ValidatedHello) -> [UInt8] {
        if hello.format.formatID == .opus, hello.format.channelCount <= 2 { return [] }
        return Array(hello.message.magicCookie)
    }

    /// Reopens the unfinalized file of a stream that is coming back (after a lost connection, a
    /// receiver restart, or from another receiver sharing the folder) at exactly what its position log
    /// says is durable, and returns the writer and where the sender must resume. Audio written after
    /// that point (never acknowledged) is cut off; the sender still holds it and resends it. On
    /// failure the claim is released and the file left as it was.
    private func reopen(
        path: String, claim: StreamClaim, hello: ValidatedHello, start: Date, peer: String, events: StreamWriterEvents, lane: WriterLane
    ) -> Result<(StreamWriter, StreamPosition), StorageError> {
        let record: StreamPositionRecord
        do throws(DurableFileError) {
            record = try StreamPositionLog.lastRecord(cafPath: path)
                ?? { let beginning = StreamPosition.beginning(of: hello); return StreamPositionRecord(position: beginning, packets: 0) }()
        } catch {
            claim.release(removingEntry: false)
            return .failure(.cannotCreate("cannot read the position of \(path): \(error.description)"))
        }
        // The position log is a file: a record no stream of this Hello can reach is not resumed.
        guard record.position.lastSequence < WireProtocol.maximumSequence, (hello.message.startSampleTime...hello.timelineEnd).contains(record.position.endSampleTime) else {
            claim.release(removingEntry: false)
            return .failure(.cannotCreate("cannot resume \(path): its position log records sequence \(record.position.lastSequence) at sample \(record.position.endSampleTime), which stream \(hello.streamID) (starting at sample \(hello.message.startSampleTime)) cannot have reached; move the file and its .position file away to start the stream anew"))
        }
        let caf: CAFWriter
        do throws(CAFError) {
            caf = try CAFWriter.resume(
                path: path, keepingPackets: record.packets, writeBehind: configuration.fileWriteBehind,
                holdingDescriptor: configuration.holdsFileDescriptors)
        } catch {
            claim.release(removingEntry: false)
            return .failure(.cannotCreate("cannot reopen \(path) to resume the stream: \(error.description)"))
        }
        guard caf.format == hello.format else {
            caf.close()
            claim.release(removingEntry: false)
            return .failure(.formatChanged("stream \(hello.streamID) was recorded as \(caf.format) in \(path) but now sends \(hello.format); a resumed stream must keep its format (start a new stream)"))
        }
        do throws(DurableFileError) {
            let positionLog = try StreamPositionLog.create(cafPath: path, initial: record)
            let maker = RecordingFileMaker(hello: hello, start: start, peer: peer, configuration: configuration)
            let writer = StreamWriter(
                writer: caf, positionLog: positionLog, claim: claim, stream: hello.streamID,
                start: record.position, originSampleTime: Self.firstSample(of: path, hello: hello),
                segments: configuration.segmentLength.map { SegmentingFileWriter.Segments(length: $0, maker: maker) }, handOff: configuration.handOff,
                lane: lane, pool: pool, events: events, metrics: pool.metrics
            )
            return .success((writer, record.position))
        } catch {
            caf.close()
            claim.release(removingEntry: false)
            return .failure(.cannotCreate("cannot reopen \(path) to resume the stream: \(error.description)"))
        }
    }
}
