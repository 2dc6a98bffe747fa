import CaptureCore
import CaptureWire
import Foundation

/// One connection's whole life at the receiver, as a pure state machine: the handshake, the
/// decision on the Hello, opening the stream's file, streaming with backpressure, finishing, and
/// letting go of the file when the connection ends first. Events in (`ReceiverSessionEvent`),
/// actions out (`ReceiverSessionAction`); it does no I/O, so every path — a close while the file
/// opens, a finish failing after the sender left, a shutdown during a resume — is a table test.
/// The protocol's own rules (order, sequences, sample times) stay in `ReceiverStreamState` inside it.
///
/// Two things run side by side and end independently: the **file** (none → opening → streaming →
/// finishing or releasing → done) and the **connection** (open → closing → closed). The session is
/// over when both are done; the stream table then holds the stream as finished or resumable. Each
/// `State` case carries the file side's data in that state; the connection side, the settings and
/// the protocol's rules live beside it, as they span every state.
public struct ReceiverSession: Sendable {
    /// The connection's side.
    public enum Connection: Sendable, Equatable {
        case open
        /// The session asked for the close; the connection has not reported closed yet.
        case closing
        case closed
    }

    /// What the session needs to know of the receiver's configuration.
    public struct Settings: Sendable, Equatable {
        /// Sent in HelloAccepted.
        public var heartbeatIntervalMilliseconds: UInt32
        /// Sent in HelloAccepted.
        public var maximumFrameBytes: Int
        /// False when a lost connection finalizes its file at once (`--resume-window 0`).
        public var keepsInterruptedStreams: Bool
        /// How long an interrupted stream stays resumable (for log lines).
        public var resumeWindow: Duration
        /// The connection runs over TLS (how a silent hang-up is explained).
        public var usesTLS: Bool
        /// Audio handed to the file and not yet durable above which reading stops.
        public var pauseReadingAbove: Int
        /// ... and below which it starts again.
        public var resumeReadingBelow: Int
        /// Limits applied to the Hello.
        public var helloLimits: ValidatedHello.Limits
        /// The handshake timeout as log lines and Error frames state it.
        public var handshakeTimeoutText: String
        /// The idle timeout as log lines and Error frames state it.
        public var idleTimeoutText: String

        public init(
            heartbeatIntervalMilliseconds: UInt32 = 5_000, maximumFrameBytes: Int = WireProtocol.defaultMaxFrameBytes,
            keepsInterruptedStreams: Bool = true, resumeWindow: Duration = .seconds(86_400), usesTLS: Bool = false,
            pauseReadingAbove: Int = 8 << 20, resumeReadingBelow: Int = 2 << 20,
            helloLimits: ValidatedHello.Limits = ValidatedHello.Limits(),
            handshakeTimeoutText: String = "10 s", idleTimeoutText: String = "20 s"
        ) {
            self.handshakeTimeoutText = handshakeTimeoutText
            self.idleTimeoutText = idleTimeoutText
            self.heartbeatIntervalMilliseconds = heartbeatIntervalMilliseconds
            self.maximumFrameBytes = maximumFrameBytes
            self.keepsInterruptedStreams = keepsInterruptedStreams
            self.resumeWindow = resumeWindow
            self.usesTLS = usesTLS
            self.pauseReadingAbove = pauseReadingAbove
            self.resumeReadingBelow = resumeReadingBelow
            self.helloLimits = helloLimits
        }
    }

    /// Where the stream's file is, with the data of that state.
    public private(set) var state: State = .handshaking
    /// Where the connection is.
    public private(set) var connection: Connection = .open

    private let settings: Settings
    /// How log lines name a setting to change.
    private let settingNames: any SettingNaming
    private var protocolState: ReceiverStreamState
    /// The receiver is shutting down: a file let go of is finalized (and stays resumable).
    private var receiverShuttingDown = false
    /// Invalid levels were logged once already.
    private var reportedInvalidLevels = false

    /// A session with `settings`, whose log lines name settings as `settingNames` does.
    public init(settings: Settings = Settings(), settingNames: any SettingNaming = LibrarySettingNames()) {
        self.settings = settings
        self.settingNames = settingNames
        protocolState = ReceiverStreamState(limits: settings.helloLimits)
    }

    // MARK: - What the state holds

    /// The session is over: the file is done and the connection closed.
    public var isFinished: Bool {
        guard case .done = state else { return false }
        return connection == .closed
    }

    /// The stream's Hello, once it arrived valid.
    public var hello: ValidatedHello? {
        switch state {
        case .handshaking: nil
        case .deciding(let deciding): deciding.hello
        case .opening(let opening): opening.hello
        case .streaming(let streaming): streaming.file.hello
        case .finishing(let finishing): finishing.file.hello
        case .releasing(let releasing): releasing.file.hello
        case .done(let outcome): outcome.hello
        }
    }

    /// The accepted Hello's stream, once accepted (nil while deciding, and for a refused Hello).
    public var streamID: UUID? {
        switch state {
        case .handshaking, .deciding: nil
        case .opening(let opening): opening.streamID
        case .streaming, .finishing, .releasing: readOpenedFile { $0.streamID }
        case .done(let outcome): outcome.acceptedStreamID
        }
    }

    /// The stream's file as this connection opened it, once open (a copy: see `readOpenedFile`).
    public var openedFile: StreamFileRecord? { readOpenedFile { copy $0 } }

    /// The stream's file, once open (with segments: its first).
    public var filePath: String? { readOpenedFile { $0.filePath } }

    /// The file being written now: `filePath`, or with segments the latest segment's.
    public var currentFilePath: String? { readOpenedFile { $0.currentFilePath } }

    /// The last durable position (what the last Ack said); zero until a file is open.
    public var lastDurable: StreamPosition {
        readOpenedFile { $0.durability.lastDurable } ?? .start
    }

    /// Audio handed to the file and not yet durable, in bytes.
    public var bytesNotDurable: Int { readOpenedFile { $0.durability.bytesNotDurable } ?? 0 }

    /// The file was let go of unfinished, for its sender to resume (here or at another receiver).
    public var leftResumable: Bool {
        guard case .done(.resumable) = state else { return false }
        return true
    }

    /// The file name the sender is told (the last path component), or empty before a file is open.
    private var fileName: String { readOpenedFile { $0.fileName } ?? "" }

    // MARK: - Reaching the state's data without copying it
    //
    // `openedFile` and `hello` return a copy of what they find: a retain of everything the record
    // holds, and a buffer shared with the state, which the next change then copies. The getters
    // above that return a part of the record, and what runs for every piece of audio and every
    // Ack, reach the state's data in place with these instead.

    /// What `read` makes of the open file's record, in whichever state holds it (nil before a file
    /// is open); the record is read where it is, not copied.
    private func readOpenedFile<Result>(_ read: (borrowing StreamFileRecord) -> Result) -> Result? {
        switch state {
        case .handshaking, .deciding, .opening, .done(.noStream), .done(.helloRefused), .done(.notOpened): nil
        case .streaming(let streaming): read(streaming.file)
        case .finishing(let finishing): read(finishing.file)
        case .releasing(let releasing): read(releasing.file)
        case .done(.finished(let file)), .done(.resumable(let file)), .done(.finalizedIncomplete(let file)): read(file)
        }
    }

    /// Changes the streaming state in place; nil (and nothing changes) when not streaming. The
    /// state is taken out of `state` while `change` runs, so that the byte accounting's buffer is
    /// not shared, and so not copied on write; `change` cannot reach `self` meanwhile.
    private mutating func changeStreaming<Result>(_ change: (inout StreamingState) -> Result) -> Result? {
        guard case .streaming(var streaming) = state else { return nil }
        state = .handshaking
        defer { state = .streaming(streaming) }
        return change(&streaming)
    }

    /// Changes the open file's record in place, in whichever state holds it (nothing before a file
    /// is open), taking the state out of `state` as `changeStreaming` does.
    private mutating func changeOpenedFile(_ change: (inout StreamFileRecord) -> Void) {
        switch state {
        case .handshaking, .deciding, .opening, .done(.noStream), .done(.helloRefused), .done(.notOpened):
            return
        case .streaming(var streaming):
            state = .handshaking
            change(&streaming.file)
            state = .streaming(streaming)
        case .finishing(var finishing):
            state = .handshaking
            change(&finishing.file)
            state = .finishing(finishing)
        case .releasing(var releasing):
            state = .handshaking
            change(&releasing.file)
            state = .releasing(releasing)
        case .done(.finished(var file)):
            state = .handshaking
            change(&file)
            state = .done(.finished(file))
        case .done(.resumable(var file)):
            state = .handshaking
            change(&file)
            state = .done(.resumable(file))
        case .done(.finalizedIncomplete(var file)):
            state = .handshaking
            change(&file)
            state = .done(.finalizedIncomplete(file))
        }
    }

    /// Handles one event and returns what to do, in order.
    public mutating func handle(_ event: ReceiverSessionEvent) -> [ReceiverSessionAction] {
        var actions: [ReceiverSessionAction] = []
        switch event {
        case .preambleReceived(let version):
            guard connection == .open else { break }
            do {
                try protocolState.receivePreamble(version: version)
            } catch {
                fail(.wire(error), &actions)
            }
        case .messageReceived(let message, let now):
            receive(message, at: now, &actions)
        case .inputFailed(let error):
            fail(.wire(error), &actions)
        case .helloDecided(let decision):
            decided(decision, &actions)
        case .fileOpened(let path, let resume, let resumed, let naming, let continuation):
            opened(path: path, resume: resume, resumed: resumed, naming: naming, continuation: continuation, &actions)
        case .fileOpenFailed(let error):
            openFailed(error, &actions)
        case .durable(let position):
            durable(position, &actions)
        case .storageFailed(let error, let file):
            let name = (file ?? currentFilePath).map { ($0 as NSString).lastPathComponent } ?? fileName
            actions.append(.log(.init(.error, "cannot write the stream", ["error": error.description])))
            fail(.refused(.storageFailed, "the receiver cannot write \(name): \(error.description)"), &actions)
        case .segmentStarted(let path, let naming):
            guard openedFile != nil else { break }
            changeOpenedFile { $0.currentFilePath = path }
            actions.append(.log(.init(.debug, "next segment file", ["file": path])))
            if let naming { actions.append(.log(naming.logLine)) }
        case .fileFinished(let result):
            finished(result, &actions)
        case .fileReleased(let result):
            released(result, &actions)
        case .handshakeTimedOut:
            switch state {
            case .handshaking, .deciding, .opening:
                fail(.timeout("the handshake did not complete within \(settings.handshakeTimeoutText)"), &actions)
            default:
                break
            }
        case .readIdle:
            fail(.timeout("no data from the sender for \(settings.idleTimeoutText); the connection is considered dead"), &actions)
        case .writeIdle(let now):
            // Heartbeats only once the sender was told HelloAccepted (PROTOCOL.md §9): before that
            // the only frame a sender accepts is HelloAccepted or Error.
            guard connection == .open else { break }
            switch state {
            case .streaming, .finishing:
                actions.append(.send(.heartbeat(.with { $0.sentUnixNs = now })))
            default:
                break
            }
        case .transportFailed(let reason):
            guard connection == .open else { break }
            actions.append(.log(.init(.warning, "connection error", ["error": reason])))
            close(&actions)
        case .closeQuietly:
            close(&actions)
        case .closedByTransport:
            if connection == .open { connection = .closing }
        case .connectionClosed:
            connectionClosed(&actions)
        case .shutdownRequested:
            receiverShuttingDown = true
            fail(.refused(.shuttingDown, "the receiver is shutting down; reconnect later"), &actions)
        }
        return actions
    }

    // MARK: - Messages

    private mutating func receive(_ message: WireMessage, at now: Int64?, _ actions: inout [ReceiverSessionAction]) {
        guard connection == .open else { return }
        let action: ReceiverAction
        do {
            action = try protocolState.receive(message, atUnixNanoseconds: now)
        } catch {
            return fail(.wire(error), &actions)
        }
        switch action {
        case .decideOnHello(let hello):
            state = .deciding(DecidingState(hello: hello))
            actions.append(.decide(hello))
        case .writeAudio(let audio):
            guard case .streaming = state, let channelCount = readOpenedFile({ $0.hello.format.channelCount }) else { return }
            let frames = Int(audio.frameCount)
            let measured = levels(of: audio, channelCount: channelCount, &actions)
            actions.append(.write(AudioWrite(
                sequence: audio.sequence, payload: audio.payload, packetSizes: audio.packetSizes,
                frameCount: frames, endSampleTime: audio.firstSampleTime + Int64(frames), levels: measured)))
            let pauseAbove = settings.pauseReadingAbove
            let pausesReading = changeStreaming { streaming in
                streaming.file.durability.handOver(sequence: audio.sequence, bytes: audio.payload.count)
                guard !streaming.readingPaused, streaming.file.durability.bytesNotDurable > pauseAbove else { return false }
                streaming.readingPaused = true
                return true
            }
            if pausesReading == true { actions.append(.setReading(false)) }
        case .recordGap(let gap):
            guard case .streaming = state else { return }
            actions.append(.log(.init(.warning, "gap in stream", [
                "sample": "\(gap.sampleTime)", "frames": "\(gap.lengthFrames)", "reason": gap.reason,
            ], repeatable: true)))
            actions.append(.recordGap(gap))
            changeOpenedFile { $0.durability.handOver(sequence: gap.sequence, bytes: 0) }
        case .recordFilledGap(let gap):
            guard case .streaming = state else { return }
            actions.append(.log(.init(.warning, "gap in stream", [
                "sample": "\(gap.sampleTime)", "frames": "\(gap.lengthFrames)", "reason": gap.reason, "carried": "as silence",
            ], repeatable: true)))
            actions.append(.recordFilledGap(gap))
            changeOpenedFile { $0.durability.handOver(sequence: gap.sequence, bytes: 0) }
        case .recordMarker(let marker):
            guard case .streaming = state else { return }
            actions.append(.log(.init(.info, "marker in stream", [
                "sample": "\(marker.sampleTime)", "label": marker.label,
            ], repeatable: true)))
            actions.append(.recordMarker(marker))
            changeOpenedFile { $0.durability.handOver(sequence: marker.sequence, bytes: 0) }
        case .ignoreDuplicate:
            sendAck(&actions)
        case .heartbeat:
            break
        case .finishStream(let end):
            guard case .streaming(let streaming) = state else { return }
            state = .finishing(FinishingState(file: streaming.file, endOfStream: end))
            if streaming.readingPaused { actions.append(.setReading(true)) }
            actions.append(.finishFile(StreamEnd(position: StreamPosition(lastSequence: end.lastSequence, endSampleTime: end.endSampleTime), remainderFrames: Int(end.remainderFrames), reason: end.reason)))
        case .peerError(let error):
            actions.append(.log(.init(.warning, "sender reported an error", ["code": "\(error.code)", "message": error.message])))
            if error.fatal { close(&actions) }
        }
    }

    /// The valid levels an AudioData carries, or nil. Invalid levels are ignored (the audio is
    /// kept: levels are for display) and logged once per connection.
    private mutating func levels(of audio: Capture_V1_AudioData, channelCount: Int, _ actions: inout [ReceiverSessionAction]) -> AudioLevels? {
        switch AudioLevels.check(audio, channelCount: channelCount) {
        case .absent:
            return nil
        case .valid(let levels):
            return levels
        case .invalid(let reason):
            if !reportedInvalidLevels {
                reportedInvalidLevels = true
                actions.append(.log(.init(.warning, "ignoring the levels the sender sends with its audio: they break the protocol's rules; the audio is recorded", [
                    "reason": reason, "sequence": "\(audio.sequence)",
                ])))
            }
            return nil
        }
    }

    // MARK: - Handshake

    private mutating func decided(_ decision: HelloDecision, _ actions: inout [ReceiverSessionAction]) {
        guard case .deciding(let deciding) = state else { return }
        let hello = deciding.hello
        switch decision {
        case .refused(let refusal):
            protocolState.reject()
            state = .done(.helloRefused(hello))
            fail(.refused(refusal.code, refusal.message(naming: settingNames)), &actions)
        case .rateLimited(let message, let retryAfter):
            protocolState.reject()
            state = .done(.helloRefused(hello))
            fail(.rateLimited(message, retryAfterMilliseconds: retryAfter), &actions)
        case .accepted:
            guard connection == .open else {
                // The connection closed while the decision was made: give the stream back.
                state = .done(.notOpened(hello))
                actions.append(.forgetStream(hello.streamID))
                return
            }
            // A new file can hold the stream only if the sender still holds its beginning (for a
            // stream that continues another, the sequence it starts at); if it does not, only an
            // unfinished file of the stream can take it (else it is refused before any file is made).
            var probe = protocolState
            let mayCreate = (try? probe.accept(resumingAt: .beginning(of: hello))) != nil
            state = .opening(OpeningState(hello: hello))
            actions.append(.openFile(hello, mayCreate: mayCreate))
        }
    }

    private mutating func opened(
        path: String, resume: StreamPosition, resumed: Bool, naming: FileNaming?, continuation: ContinuationLink?, _ actions: inout [ReceiverSessionAction]
    ) {
        guard case .opening(let opening) = state else { return }
        let hello = opening.hello
        let file = StreamFileRecord(
            hello: hello, filePath: path, currentFilePath: path, resumed: resumed,
            durability: DurabilityAccount(lastDurable: resume))
        guard connection == .open else {
            return release(file, announcedAcceptance: false, &actions)
        }
        do {
            try protocolState.accept(resumingAt: resume)
        } catch {
            // The sender no longer holds the audio the file needs next: refuse (which closes) and
            // let go of the file, which was never announced as accepted.
            fail(.wire(error), &actions)
            return release(file, announcedAcceptance: false, &actions)
        }
        state = .streaming(StreamingState(file: file, readingPaused: false))
        actions.append(.cancelHandshakeTimeout)
        actions.append(.send(.helloAccepted(.with {
            $0.nextSequence = resume.nextSequence
            $0.nextSampleTime = resume.nextSampleTime
            $0.heartbeatIntervalMs = settings.heartbeatIntervalMilliseconds
            $0.maxFrameBytes = UInt32(clamping: settings.maximumFrameBytes)
            $0.fileName = file.fileName
            $0.resumed = resumed
            if case .linked(_, let fileEnd?)? = continuation { $0.continuedFileEndSampleTime = fileEnd }
            $0.acceptedFrameTypes = WireProtocol.extendedFrameTypes.map { UInt32($0.rawValue) }
        })))
        actions.append(.streamAccepted(StreamAccepted(hello: hello, filePath: path, resumed: resumed, durableSampleTime: resume.nextSampleTime)))
        var metadata = [
            "file": path, "format": "\(hello.format)", "source": hello.message.sourceHost,
            "next-sequence": "\(resume.nextSequence)",
        ]
        if case .linked(let continued, _)? = continuation { metadata["continues"] = continued.uuidString.lowercased() }
        actions.append(.log(.init(.info, resumed ? "stream resumed" : "stream opened", metadata)))
        if let naming { actions.append(.log(naming.logLine)) }
        if let lost = StreamBeginning.lostBefore(hello) {
            actions.append(.log(.init(.error, "the stream's sender reports audio acknowledged and then lost by the receiver's storage before this stream; it is in no file (the file's info names it)", [
                "lost": lost,
            ])))
        }
        if case .unverified(let continued)? = continuation {
            actions.append(.log(.init(.warning, "the stream says it continues a stream this receiver no longer knows (its record expired, or it was recorded on other storage), so that cannot be proven: it is recorded as a new stream that continues nothing", [
                "continues": continued.uuidString.lowercased(),
            ])))
        }
    }

    private mutating func openFailed(_ error: StorageError, _ actions: inout [ReceiverSessionAction]) {
        guard case .opening(let opening) = state else { return }
        let streamID = opening.streamID
        state = .done(.notOpened(opening.hello))
        actions.append(.forgetStream(streamID))
        switch error {
        case .notResumable:
            // The sender resumes a stream no file here holds: its own rules say why (SEQUENCE_GAP).
            var probe = protocolState
            protocolState.reject()
            do {
                try probe.accept(resumingAt: .beginning(of: opening.hello))
                fail(.refused(.sequenceGap, "stream \(streamID) has no unfinished file in this receiver's output folder"), &actions)
            } catch .cannotResume(_, let oldestHeld, _) {
                // Nothing of the stream is here, so nothing acknowledged was lost here: the Error
                // names no recording end (`held_until_sample_time`), and the sender continues the
                // stream as a new one without reporting a loss (PROTOCOL.md §8.1).
                fail(.refused(.sequenceGap, "stream \(streamID) has no unfinished file in this receiver's output folder (its resume window passed and its file was finalized, or it was never recorded here) and the sender holds nothing before sequence \(oldestHeld): deliver what it holds as a new stream that continues it"), &actions)
            } catch {
                fail(.wire(error), &actions)
            }
            return
        case .streamBusy(let message):
            protocolState.reject()
            return fail(.refused(.streamBusy, message + "; try again later"), &actions)
        case .rateLimited(let message, let retryAfter):
            protocolState.reject()
            return fail(.rateLimited(message, retryAfterMilliseconds: retryAfter), &actions)
        case .notStreamOwner(let message):
            protocolState.reject()
            return fail(.refused(.notStreamOwner, "stream \(streamID) refused: " + message), &actions)
        case .alreadyFinished(let record):
            // The sender missed the EndAccepted of a stream finished here: send it again, so it
            // releases its spool, and nothing is stored twice.
            protocolState.reject()
            guard connection == .open else { return }
            actions.append(.log(.init(.notice, "stream already finished: sending its EndAccepted again", [
                "file": record.relativePath, "last-sequence": "\(record.end.lastSequence)",
            ])))
            actions.append(.send(.endAccepted(.with {
                $0.fileName = record.relativePath
                $0.totalFrames = record.frames
                $0.totalPackets = UInt64(clamping: record.packets)
                $0.lastSequence = record.end.lastSequence
                $0.endSampleTime = record.end.endSampleTime
            })))
            return close(&actions)
        default:
            protocolState.reject()
        }
        if case .formatChanged = error {
            fail(.refused(.badFormat, error.description), &actions)
        } else {
            if connection == .open {
                actions.append(.log(.init(.error, "cannot store the stream; the sender keeps its audio and retries", ["error": error.description])))
            }
            fail(.refused(.storageFailed, "the receiver cannot store the stream now: \(error.description); the sender keeps the audio and retries"), &actions)
        }
    }

    // MARK: - Durability

    private mutating func durable(_ position: StreamPosition, _ actions: inout [ReceiverSessionAction]) {
        // While streaming (every Ack), one change of the state does both. No `switch state` here:
        // the copy of the state a switch holds would make the accounting copy its buffer.
        let resumeBelow = settings.resumeReadingBelow
        let streamingChange = changeStreaming { streaming -> (advanced: Bool, resumesReading: Bool) in
            guard streaming.file.durability.madeDurable(position) else { return (false, false) }
            guard streaming.readingPaused, streaming.file.durability.bytesNotDurable < resumeBelow else { return (true, false) }
            streaming.readingPaused = false
            return (true, true)
        }
        if let streamingChange {
            guard streamingChange.advanced else { return }
            sendAck(&actions)
            if streamingChange.resumesReading { actions.append(.setReading(true)) }
            return
        }
        // Finishing, the file still takes Acks; a file being let go of still records what became
        // durable (what its release states).
        var advanced = false
        changeOpenedFile { advanced = $0.durability.madeDurable(position) }
        if advanced, case .finishing = state { sendAck(&actions) }
    }

    private func sendAck(_ actions: inout [ReceiverSessionAction]) {
        let lastDurable = lastDurable
        guard connection == .open, !lastDurable.coversNothing else { return }
        actions.append(.send(.ack(.with {
            $0.durableSequence = lastDurable.lastSequence
            $0.durableSampleTime = lastDurable.endSampleTime
        })))
    }

    // MARK: - End of stream and release

    private mutating func finished(_ result: Result<FinishedFile, StorageError>, _ actions: inout [ReceiverSessionAction]) {
        guard case .finishing(let finishing) = state else { return }
        let record = finishing.file
        let end = finishing.endOfStream
        switch result {
        case .success(let file):
            state = .done(.finished(record))
            forget(record, announcedAcceptance: true, resumable: false, &actions)
            var metadata = Self.metadata(file)
            metadata["duration"] = "\(String(format: "%.3f", Double(file.frames) / record.hello.format.sampleRate)) s"
            metadata["reason"] = end.reason
            actions.append(.log(.init(.notice, "stream closed", metadata)))
            if connection == .open {
                actions.append(.send(.endAccepted(.with {
                    $0.fileName = record.fileName
                    $0.totalFrames = file.frames
                    $0.totalPackets = UInt64(clamping: file.packets)
                    $0.lastSequence = end.lastSequence
                    $0.endSampleTime = end.endSampleTime
                })))
                close(&actions)
            }
        case .failure(let error):
            // Not finished: the file stays resumable at its last durable position.
            let wasOpen = connection == .open
            state = .streaming(StreamingState(file: record, readingPaused: false))
            if wasOpen {
                fail(.refused(.storageFailed, "could not finish \(record.fileName): \(error.description)"), &actions)
            } else {
                release(record, announcedAcceptance: true, &actions)
            }
        }
    }

    /// The connection is ending while `file` is open: let go of it as the configuration and a
    /// shutdown say. `announcedAcceptance`: the stream was announced as accepted (`.streamAccepted`).
    private mutating func release(_ file: StreamFileRecord, announcedAcceptance: Bool, _ actions: inout [ReceiverSessionAction]) {
        let mode: FileRelease
        if !settings.keepsInterruptedStreams {
            mode = .finalizeIncomplete
            actions.append(.log(.init(.warning, "connection lost before end of stream; finalizing the file with what arrived", ["file": file.filePath])))
        } else {
            mode = receiverShuttingDown ? .finalizeResumable : .keepResumable
        }
        state = .releasing(ReleasingState(file: file, mode: mode, announcedAcceptance: announcedAcceptance))
        actions.append(.releaseFile(mode))
    }

    private mutating func released(_ result: Result<FinishedFile?, StorageError>, _ actions: inout [ReceiverSessionAction]) {
        guard case .releasing(let releasing) = state else { return }
        let record = releasing.file
        let path = record.filePath
        let window = settings.resumeWindow.secondsText
        switch releasing.mode {
        case .finalizeIncomplete:
            switch result {
            case .success(let file?): actions.append(.log(.init(.notice, "stream closed (incomplete)", Self.metadata(file))))
            case .success(nil): break
            case .failure(let error): actions.append(.log(.init(.error, "could not finalize the file", ["error": error.description])))
            }
            state = .done(.finalizedIncomplete(record))
            forget(record, announcedAcceptance: releasing.announcedAcceptance, resumable: false, &actions)
        case .finalizeResumable:
            actions.append(.log(.init(.notice, "shutting down: file finalized; its sender can resume it in the same file after a restart", [
                "file": path, "resume-window-s": window,
            ])))
            state = .done(.resumable(record))
            forget(record, announcedAcceptance: releasing.announcedAcceptance, resumable: true, &actions)
        case .keepResumable:
            actions.append(.log(.init(.warning, "connection lost before end of stream; the file stays open for the sender to resume", [
                "file": path, "resume-window-s": window,
            ])))
            state = .done(.resumable(record))
            forget(record, announcedAcceptance: releasing.announcedAcceptance, resumable: true, &actions)
        }
    }

    /// Lets go of `file`'s stream in the stream table, announcing first (`.streamReleased`) that
    /// this connection no longer holds the stream, when its acceptance was announced.
    private func forget(_ file: StreamFileRecord, announcedAcceptance: Bool, resumable: Bool, _ actions: inout [ReceiverSessionAction]) {
        if announcedAcceptance {
            actions.append(.streamReleased(StreamReleased(streamID: file.streamID, durableSampleTime: file.durability.lastDurable.endSampleTime, resumable: resumable)))
        }
        actions.append(.forgetStream(file.streamID))
    }

    private static func metadata(_ file: FinishedFile) -> [String: String] {
        ["path": file.path, "frames": "\(file.frames)", "bytes": "\(file.bytes)", "gaps": "\(file.gaps)"]
    }

    // MARK: - Closing

    /// Why the session ends its connection.
    enum Failure {
        case wire(WireError)
        case refused(Capture_V1_Error.Code, String)
        /// RATE_LIMITED: temporary; the sender waits `retryAfterMilliseconds`, then tries again.
        case rateLimited(String, retryAfterMilliseconds: UInt32)
        case timeout(String)
    }

    /// Ends the connection for `failure`: logs it, sends an Error frame when the peer can read one,
    /// and closes. Only the first failure counts.
    private mutating func fail(_ failure: Failure, _ actions: inout [ReceiverSessionAction]) {
        guard connection == .open else { return }
        let preambleRead = protocolState.phase != .awaitingPreamble
        var frame: Capture_V1_Error?
        switch failure {
        case .wire(.truncatedPreamble(receivedBytes: 0)) where settings.usesTLS:
            // Over TLS 1.3 a sender that rejects this receiver's certificate hangs up after the
            // handshake, before sending anything.
            actions.append(.log(.init(.warning, "refused: the sender closed the TLS connection before sending anything; it may not trust this receiver's certificate (check its \(settingNames.name(of: .certificateAuthority)) or \(settingNames.name(of: .certificatePin)) and the host name it connects to)", ["code": "TLS"])))
        case .wire(.truncatedPreamble(receivedBytes: 0)):
            // A plaintext connection that closed without a byte: a port probe or health check.
            actions.append(.log(.init(.debug, "connection closed without data")))
        case .wire(let error):
            actions.append(.log(.init(.warning, "refused: \(error.message(naming: settingNames))", ["code": "\(error.code)"])))
            frame = error.peerUnderstandsErrorFrame ? error.errorFrame : nil
        case .refused(let code, let message):
            actions.append(.log(.init(.warning, "refused: \(message)", ["code": "\(code)"])))
            frame = .with { $0.code = code; $0.message = message; $0.fatal = true }
        case .rateLimited(let message, let retryAfter):
            actions.append(.log(.init(.warning, "refused: \(message)", ["code": "RATE_LIMITED"], repeatable: true)))
            frame = .with { $0.code = .rateLimited; $0.message = message; $0.fatal = true; $0.retryAfterMs = retryAfter }
        case .timeout(let message):
            actions.append(.log(.init(.warning, message, ["code": "TIMEOUT"])))
            // A peer that never sent the preamble is not speaking the protocol: no frame (§3).
            frame = preambleRead ? .with { $0.code = .timeout; $0.message = message; $0.fatal = true } : nil
        }
        if let frame { actions.append(.send(.error(frame))) }
        close(&actions)
    }

    /// Asks for the connection's close, and lets go of an open file at once.
    private mutating func close(_ actions: inout [ReceiverSessionAction]) {
        guard connection == .open else { return }
        connection = .closing
        actions.append(.close)
        if case .streaming(let streaming) = state {
            if streaming.readingPaused { actions.append(.setReading(true)) }
            release(streaming.file, announcedAcceptance: true, &actions)
        }
    }

    private mutating func connectionClosed(_ actions: inout [ReceiverSessionAction]) {
        connection = .closed
        switch state {
        case .handshaking:
            state = .done(.noStream)
        case .streaming(let streaming):
            release(streaming.file, announcedAcceptance: true, &actions)
        case .deciding, .opening, .finishing, .releasing, .done:
            // Deciding: the decision gives a reserved stream back. Opening: the file is released
            // once open (or the stream given back if that fails). Finishing: the finish completes;
            // a failure releases the file then.
            break
        }
    }
}

