import CaptureCodecs
import CaptureCore
import CaptureLocalCopy
import CaptureWire
import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import NIOCore
import NIOPosix
import Synchronization

/// One capture streamed to a receiver and any backup receivers, with nothing lost on any of them:
/// capture-send as a library.
///
/// It takes an `AudioSource`, an `AudioEncoder` and a `Configuration`, and assembles the rest: the
/// stream's description, the packet log with its disk spool (one acknowledgement cursor per
/// receiver), the capture pipeline, a `StreamSender` per receiver on shared threads, and the
/// delivery of streams earlier runs left in the spool. Its lifecycle follows the Audio Queue's:
///
/// | Audio Queue | CaptureStreamer |
/// |---|---|
/// | `AudioQueueNewInput` | `init`: buffers derived and allocated, spool created; nothing runs |
/// | `AudioQueueStart` | `start()`: capture begins, each receiver's link connects |
/// | `AudioQueuePause` / `AudioQueueStart` | `pause()` / `resume()`: capture pauses; delivery goes on |
/// | `AudioQueueStop(inImmediate:)` | `stop(immediate:)`: capture ends (immediately: buffers not yet encoded are dropped); delivery goes on until every receiver has everything |
/// | | `deferBackground()`: background deliveries end once the foreground ones are over; what they lack stays in their spools |
/// | | `stopDelivering()`: ends delivery now; what is unacknowledged stays in the spool |
/// | | `waitUntilFinished()` / `finished()`: the `Outcome` |
/// | | `run()`: the streamer as a swift-service-lifecycle `Service` (start, graceful stop, cancellation) |
/// | `AudioQueueDispose` | `dispose()`: capture released, the spool removed when every receiver has the whole stream, else synced for a later run |
///
/// Progress and link changes come through `events`, an `AsyncSequence` that ends after
/// `.finished`. A backup can cost itself its copy, never the main receiver its audio or its pace: a
/// backup that makes no progress for `Configuration.backupGiveUpAfter` (unreachable, or connected
/// without acknowledging anything new, or breaking the protocol) is dropped, and so, at once, is a
/// backup whose backlog would make the main receiver's audio overflow or hold up a source read
/// faster than real time (`BackupRoom`). The spool then stops keeping audio for it, and its
/// `LinkOutcome` says why and what its file lacks. A background destination (`Priority.background`,
/// lossless later) is sent only while every foreground one is caught up (`ForegroundGate`,
/// `SendPacing`), is never given up, and gives way first when the spool runs out (`SpoolBudget`).
///
/// Concurrency: each receiver's delivery is a child task of one run task (`StreamSender.run()`,
/// which never blocks a thread); capture runs on the capture queue's own real-time threads, and
/// its end is awaited on a thread of its own (`CaptureQueue.waitForCompletion()` blocks, and
/// blocking is right there, never in the task pool). The run task then writes the `Outcome`.
///
/// Sendability: the mutable run state is one `RunState` in a `Mutex`; the pipeline, logs and
/// senders are thread-safe themselves.
public final class CaptureStreamer: Service, Sendable {
    /// The first encoding's stream as the handshake describes it (format, cookie, priming, start
    /// time, clock, layout).
    public var description: StreamDescription { encodings[0].description }
    /// The first encoding's packet log: what is captured and not yet acknowledged by every receiver
    /// of that encoding, and its spool.
    public var log: PacketLog { encodings[0].log }
    /// Every encoding of the capture, in the order of their first destinations.
    public let encodings: [EncodedStream]
    /// Progress, link changes and the outcome, as they happen; ends after `.finished`.
    public let events: AsyncStream<Event>

    private let pipeline: CapturePipeline
    private let configuration: Configuration
    private let links: [Link]
    private let logger: Logger
    private let inputSampleRate: Double
    private let group: MultiThreadedEventLoopGroup
    private let spoolReads: NIOThreadPool
    private let eventSink: AsyncStream<Event>.Continuation
    private let foregroundGate: ForegroundGate
    private let state: Mutex<RunState>

    /// What changes while a run goes on.
    private struct RunState {
        var phase = Phase.created
        var captureResult: Result<CaptureQueue.Completion, SenderError>?
        var localCopyOutcome: LocalCopy.Outcome?
        var linkResults: [Result<StreamSummary, SenderError>?]
        var stoppedDelivering = false
        /// `deferBackground()` was called: background deliveries end once every foreground one has.
        var backgroundDeferred = false
        /// The background links ended by that deferral (their audio stays in the spool).
        var deferredLinks: Set<Int> = []
        var earlier: [EarlierStreams] = []
        /// The run: every delivery and the end of capture, then the outcome.
        var run: Task<Outcome, Never>?
        var outcome: Outcome?
        var progressReports: Task<Void, Never>?
    }

    private enum Phase { case created, running, finished, disposed }

    /// One encoding of the capture as a stream of its own: its stream id and name, its description,
    /// its packet log (one cursor per receiver of this encoding) and spool.
    public struct EncodedStream: Sendable {
        /// The encoding's label (`AudioEncoder.encodingLabel`), recorded by the receiver.
        public var label: String
        /// The stream's id.
        public var streamID: UUID
        /// The stream's name: the configuration's for the first encoding, with the label after it
        /// for the others (so that files of one capture at one receiver do not share a name).
        public var streamName: String
        /// The stream as the handshake describes it.
        public var description: StreamDescription
        /// Its packet log.
        public var log: PacketLog
        /// The receiver its spool is bound to (its first destination): a later run delivers what
        /// this run left there.
        public var spoolDestination: Receiver
        /// Whether its destinations are foreground or background ones.
        public var priority: Priority = .foreground
    }

    /// One receiver and the sender that serves it.
    private struct Link {
        var role: Role
        var receiver: Receiver
        /// Index into `encodings`.
        var encoding: Int
        /// The receiver's cursor in its encoding's log.
        var destination: LogDestination
        var sender: StreamSender
        var priority: Priority
    }

    /// A receiver and the encoder whose stream it gets, how urgently, and how fast at most.
    public struct Destination {
        public var receiver: Receiver
        public var encoder: any AudioEncoder
        /// Foreground (live) or background (delivered after the live streams, "lossless later").
        public var priority: Priority
        /// The most this receiver is sent, in bits per second of audio payload; nil for no limit.
        public var maxBitsPerSecond: Int?

        public init(receiver: Receiver, encoder: any AudioEncoder, priority: Priority = .foreground, maxBitsPerSecond: Int? = nil) {
            self.receiver = receiver
            self.encoder = encoder
            self.priority = priority
            self.maxBitsPerSecond = maxBitsPerSecond
        }
    }

    /// How a destination's delivery ranks against the others'.
    public enum Priority: String, Sendable, Equatable {
        /// Sent as soon as captured: the live stream.
        case foreground
        /// Sent only while every foreground destination is caught up, one entry at a time while
        /// their streams go on, so that it never delays their acknowledgements. Its spool keeps
        /// everything until it is acknowledged, across restarts; it gives way first when
        /// `spoolCapacity` runs out (`SpoolBudget`); `deferBackground()` leaves it in the spool.
        case background
    }

    /// Prepares a run of one encoding sent to the configuration's receiver and backups.
    public convenience init(source: any AudioSource, encoder: any AudioEncoder, configuration: Configuration, logger: Logger) throws(CaptureStreamerError) {
        let destinations = ([configuration.receiver] + configuration.backups).map { Destination(receiver: $0, encoder: encoder) }
        try self.init(source: source, destinations: destinations, configuration: configuration, logger: logger)
    }

    /// Prepares a run: the first destination is the main receiver, the others backups. Destinations
    /// that share an encoder (the same instance) share its stream: one encoder, one packet log and
    /// spool with a cursor per receiver. Each distinct encoder is a stream of its own (its own stream
    /// id, spool and resume secret), all fed by one capture and linked by the capture's id
    /// (`Configuration.captureID`) in their Hellos. Describes the streams, creates the spools (unless
    /// `spoolRoot` is nil), the logs and the capture pipeline. Nothing is captured or sent before
    /// `start()`. (`configuration.receiver` and `backups` are not used: `destinations` says who gets what.)
    public init(source: any AudioSource, destinations: [Destination], configuration: Configuration, logger: Logger) throws(CaptureStreamerError) {
        guard let first = destinations.first else { throw .invalidState("a streamer needs at least one receiver") }
        guard first.priority == .foreground else {
            throw .invalidState("the main receiver (the first destination) is sent the live stream: it cannot be a background destination")
        }
        for destination in destinations where destination.priority == .background {
            guard configuration.spoolRoot != nil else {
                throw .invalidState("the background destination \(destination.receiver) needs a spool: its audio waits there until it is acknowledged, across restarts")
            }
            guard !destinations.contains(where: { $0.priority == .foreground && $0.encoder === destination.encoder }) else {
                throw .invalidState("the background destination \(destination.receiver) needs an encoder of its own: a foreground destination's stream cannot wait for it")
            }
        }
        self.configuration = configuration
        self.logger = logger
        inputSampleRate = source.format.sampleRate
        let startTime = Date()
        let clock = ClockSynchronization.current()
        let (stream, sink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1_024))
        events = stream
        eventSink = sink
        // Group the destinations by encoder, in the order of their first appearance.
        var encoders: [any AudioEncoder] = []
        var encodingOf: [Int] = []
        var receiversOf: [[Int]] = []
        for (index, destination) in destinations.enumerated() {
            if let existing = encoders.firstIndex(where: { $0 === destination.encoder }) {
                encodingOf.append(existing)
                receiversOf[existing].append(index)
            } else {
                encodingOf.append(encoders.count)
                receiversOf.append([index])
                encoders.append(destination.encoder)
            }
        }
        let budget = SpoolBudget(capacity: configuration.spoolCapacity)
        var streams: [EncodedStream] = []
        var spools: [StreamSpool] = []
        var secrets: [[UInt8]] = []
        for (number, encoder) in encoders.enumerated() {
            let label = encoder.encodingLabel
            let description = StreamDescription(
                format: encoder.outputFormat, magicCookie: encoder.magicCookie, primingFrames: encoder.primingFrames, startTime: startTime,
                clock: clock,
                // Opus carries its channel mapping in the OpusHead; a layout is passed on for linear PCM.
                channelLayout: encoder.outputFormat.isLinearPCM ? source.channelLayout : nil,
                capture: encoders.count > 1 ? CaptureLink(captureID: configuration.captureID, encoding: label) : nil
            )
            let streamID = number == 0 ? configuration.streamID : UUID()
            let streamName = number == 0 ? configuration.streamName : Self.encodingStreamName(configuration.streamName, label: label)
            let resumeSecret = ResumeSecret.make()
            let spoolDestination = destinations[receiversOf[number][0]].receiver
            let background = destinations[receiversOf[number][0]].priority == .background
            var spool: StreamSpool?
            if let root = configuration.spoolRoot {
                do throws(SpoolError) {
                    var meta = SpoolMeta(
                        streamID: streamID, streamName: streamName, destination: spoolDestination.identity,
                        description: description, resumeSecret: resumeSecret)
                    if background { meta.background = true }
                    spool = try StreamSpool.create(root: root, meta: meta)
                } catch {
                    spools.forEach { $0.removeAll() }
                    throw .spool(error)
                }
            }
            if let spool { spools.append(spool) }
            let overflow = OverflowRecorder(
                directory: configuration.spoolRoot ?? FileManager.default.currentDirectoryPath, streamName: streamName,
                streamID: streamID, description: description)
            // The main receiver sets the pace of a source read faster than real time; a stream only
            // backups get never holds the capture up (it overflows, loudly, instead).
            let report = Self.storageReporter(
                logger, background: background ? (label, spoolDestination.description) : nil, settingNames: configuration.settingNames)
            let log = PacketLog(
                producerIsRealTime: source.isRealTime || !receiversOf[number].contains(0), spool: spool, capacity: configuration.spoolCapacity, overflow: overflow,
                destinations: receiversOf[number].count, budget: budget,
                events: { event in
                    report(event)
                    sink.yield(.storage(event))
                })
            budget.add(log, background: background)
            streams.append(EncodedStream(
                label: label, streamID: streamID, streamName: streamName, description: description, log: log, spoolDestination: spoolDestination,
                priority: background ? .background : .foreground))
            secrets.append(resumeSecret)
        }
        encodings = streams
        var localCopy: LocalCopy?
        if let settings = configuration.localCopy {
            do throws(LocalCopyError) {
                localCopy = try LocalCopy(
                    settings: settings, format: source.format, startTime: startTime,
                    info: [("title", configuration.streamName), ("source", configuration.sourceHost), ("encoding application", configuration.application),
                           ("stream id", configuration.streamID.uuidString.lowercased())],
                    stopped: { reason in
                        logger.critical("THE LOCAL COPY STOPPED: \(reason); the stream goes on", metadata: ["path": "\(settings.path)"])
                        sink.yield(.localCopyStopped(reason: reason))
                    })
            } catch {
                spools.forEach { $0.removeAll() }
                throw .localCopy(error)
            }
        }
        do throws(CaptureError) {
            pipeline = try CapturePipeline(
                source: source, encodings: zip(encoders, streams).map { ($0, $1.log) }, configuration: configuration.queue, localCopy: localCopy)
        } catch {
            _ = localCopy?.finish()
            spools.forEach { $0.removeAll() }
            throw .capture(error)
        }
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        spoolReads = NIOThreadPool(numberOfThreads: 1)
        let gate = ForegroundGate(caughtUp: configuration.queue.bufferDuration + ForegroundGate.allowedLag)
        var links: [Link] = []
        for (index, destination) in destinations.enumerated() {
            let receiver = destination.receiver
            let role: Role = index == 0 ? .main : .backup(index)
            let number = encodingOf[index]
            let encoded = streams[number]
            var sending = SenderConfiguration(
                host: receiver.host, port: receiver.port, streamName: encoded.streamName, streamID: encoded.streamID,
                windowBytes: configuration.windowBytes, connectTimeout: configuration.connectTimeout, idleTimeout: configuration.idleTimeout,
                heartbeatInterval: configuration.heartbeatInterval, application: configuration.application,
                sourceHost: configuration.sourceHost, authToken: receiver.authToken)
            sending.resumeSecret = secrets[number]
            sending.tls = receiver.tls
            sending.settingNames = configuration.settingNames
            sending.reconnect = configuration.reconnect
            sending.destination = LogDestination(index: receiversOf[number].firstIndex(of: index) ?? 0)
            sending.maxBitsPerSecond = destination.maxBitsPerSecond
            if destination.priority == .background {
                // Never given up for lack of progress: it waits for the foreground by design, and
                // its spool keeps its audio until it is acknowledged, across restarts.
                sending.foreground = { gate.state }
            } else if role != .main {
                sending.giveUpAfter = configuration.backupGiveUpAfter
            }
            var linkLogger = logger
            if role != .main { linkLogger[metadataKey: "link"] = "\(role) \(receiver)" }
            if encoders.count > 1 { linkLogger[metadataKey: "encoding"] = "\(encoded.label)" }
            let name = receiver.description
            let sender = StreamSender(
                configuration: sending, description: encoded.description, log: encoded.log, logger: linkLogger,
                threads: (group: group, spoolReads: spoolReads),
                linkChanged: { state in sink.yield(.link(role: role, receiver: name, state: state)) })
            if destination.priority == .foreground {
                let log = encoded.log, cursor = sending.destination, rate = encoded.description.format.sampleRate
                gate.add(ForegroundGate.Member(link: index) {
                    if log.givenUpRoom(for: cursor) != nil { return .finished }
                    let lag = rate > 0 ? Double(max(0, log.progress.appendedEndSampleTime - log.progress(for: cursor).acknowledgedEndSampleTime)) / rate : 0
                    return .running(connected: sender.linkState == .streaming, lagSeconds: lag, baseLagSeconds: lag)
                })
            }
            links.append(Link(role: role, receiver: receiver, encoding: number, destination: sending.destination, sender: sender, priority: destination.priority))
        }
        self.links = links
        foregroundGate = gate
        state = Mutex(RunState(linkResults: Array(repeating: nil, count: links.count)))
    }

    /// The sent stream's format (the encoder's output).
    public var outputFormat: StreamFormat { pipeline.outputFormat }

    /// Whether the encoder covers frames lost to overruns with encoded silence (Opus) rather than
    /// the stream recording them as gaps (PCM).
    public var fillsLostFrames: Bool { pipeline.fillsLostFrames }

    /// Starts capture and delivery (and the delivery of earlier streams left in the spool).
    public func start() throws(CaptureStreamerError) {
        let starting: Bool = state.withLock { state in
            guard state.phase == .created else { return false }
            state.phase = .running
            return true
        }
        guard starting else { throw .invalidState("a streamer starts once; create a new one to stream again") }
        spoolReads.start()
        if configuration.deliversEarlierStreams, let root = configuration.spoolRoot {
            // Each receiver a stream's spool is bound to gets the earlier streams bound to it.
            var seen: [SpoolDestination] = []
            var started: [EarlierStreams] = []
            let current = Set(encodings.map(\.streamID))
            for encoded in encodings where !seen.contains(encoded.spoolDestination.identity) {
                seen.append(encoded.spoolDestination.identity)
                let template = senderTemplate(for: encoded.spoolDestination)
                started.append(EarlierStreams(
                    root: root, excluding: current, destination: encoded.spoolDestination.identity, template: template,
                    foreground: { [foregroundGate] in foregroundGate.state }, logger: logger))
            }
            state.withLock { $0.earlier = started }
        }
        // Capture's end is awaited only once it started: a queue never started reports `.stopped` at once.
        var startFailure: CaptureError?
        do throws(CaptureError) {
            try pipeline.start()
        } catch {
            startFailure = error
        }
        let run = Task { [self] in
            await withTaskGroup(of: Void.self) { tasks in
                for (index, link) in links.enumerated() {
                    tasks.addTask { await self.deliver(link, index: index) }
                }
                tasks.addTask { await self.awaitCaptureEnd() }
            }
            return await finish()
        }
        state.withLock { $0.run = run }
        if let startFailure {
            stopDelivering()
            throw .capture(startFailure)
        }
        startProgressReports()
    }

    /// One receiver's delivery, from start to end, and what its end means for the others.
    private func deliver(_ link: Link, index: Int) async {
        let result = await link.sender.run()
        switch result {
        case .success(let summary):
            eventSink.yield(.delivered(role: link.role, receiver: link.receiver.description, summary))
        case .failure(let error):
            // A backup that will not be served again (refused, given up) must not keep audio in
            // the spool: only the receiver a spool is bound to is delivered to after a restart. A
            // background delivery keeps it whatever ended it: its spool is bound to it, and a
            // later run delivers what it lacks.
            if link.role != .main, link.priority == .foreground { encodings[link.encoding].log.dropDestination(link.destination) }
            eventSink.yield(.deliveryFailed(role: link.role, receiver: link.receiver.description, error))
        }
        if link.priority == .foreground { foregroundGate.finished(link: index) }
        let allDone: Bool = state.withLock { state in
            state.linkResults[index] = result
            return state.linkResults.allSatisfy { $0 != nil }
        }
        endDeferredBackgroundIfDue()
        // Nothing delivers any more: capture has nowhere to go (a refused stream, a stop).
        if allDone { stopCaptureAtOnce() }
    }

    /// Waits for capture to end, on a thread of its own: the queue's end is a blocking wait, and
    /// the local copy's finish writes to disk; neither may hold a thread of the task pool.
    private func awaitCaptureEnd() async {
        let pipeline = self.pipeline
        let settingNames = configuration.settingNames
        let (result, copy) = await BlockingWork.run("capture end") {
            let result = pipeline.waitAndFinish(settingNames: settingNames)
            // Nothing more is captured: the local copy ends with the last buffer taken.
            return (result, pipeline.localCopy?.finish())
        }
        state.withLock { state in
            state.captureResult = result
            state.localCopyOutcome = copy
        }
        eventSink.yield(.captureEnded(result))
    }

    /// Pauses capture (the source stops; what was captured is still encoded and delivered).
    public func pause() { pipeline.queue.pause() }

    /// Resumes capture after `pause()`.
    public func resume() throws(CaptureStreamerError) {
        do throws(CaptureError) { try pipeline.queue.resume() } catch { throw .capture(error) }
    }

    /// Drops a marker with `label` (may be empty) where the stream stands now: just past the audio
    /// captured and encoded so far. It travels as a protocol `Marker` with its own sequence number,
    /// through the spool like audio, so it reaches each receiver exactly once, across reconnects and
    /// resumes, and lands in the recording's `mark` chunk. Returns its sequence number; throws when
    /// the label is too long or holds a NUL character, when the stream has already ended, or when a
    /// receiver (main or backup) said it does not accept markers. A marker dropped before a receiver
    /// that predates markers first answered stops that receiver's delivery at the marker (it says
    /// so, and keeps the audio in the spool until the receiver is upgraded).
    @discardableResult
    public func mark(label: String = "") throws(CaptureStreamerError) -> UInt64 {
        guard label.utf8.count <= WireProtocol.maximumMarkerLabelBytes else {
            throw .invalidMarker("a marker label has at most \(WireProtocol.maximumMarkerLabelBytes) bytes of UTF-8; this one has \(label.utf8.count): shorten it")
        }
        guard !label.utf8.contains(0) else { throw .invalidMarker("a marker label must not contain a NUL character") }
        let running = state.withLock { $0.phase == .running }
        guard running else { throw .invalidState("a marker can be dropped only while the stream runs (after start(), before it ends)") }
        // A receiver known to predate markers would stop getting the stream at the marker (its
        // sequence cannot be skipped): refuse the marker instead, while the audio goes on.
        if let older = links.first(where: { link in
            link.sender.receiverAcceptsMarkers == false && encodings[link.encoding].log.givenUpRoom(for: link.destination) == nil
        }) {
            throw .invalidMarker("the receiver \(older.receiver) does not accept markers (it predates them): upgrade capture-recv there; no marker was dropped")
        }
        // Every encoding gets the marker, where its own stream stands.
        let sequences = encodings.map { $0.log.appendMarker(label: label) }
        guard let sequence = sequences.first, sequence > 0 else { throw .invalidState("the stream has ended: a marker can no longer be added to it") }
        return sequence
    }

    /// Stops capture and returns once it has stopped; delivery goes on until every receiver has
    /// the whole stream (`waitUntilFinished()`). `immediate` drops captured buffers the encoder has
    /// not taken yet, as `AudioQueueStop(queue, true)` does.
    public func stop(immediate: Bool = false) {
        pipeline.queue.stop(immediate: immediate)
    }

    /// Stops waiting for the background destinations: once every foreground destination has its
    /// whole stream (or failed), background deliveries end, and what their receivers have not
    /// acknowledged stays in their spools for `capture-send spool deliver` or the next run
    /// (`LinkOutcome.leftInSpool`). What a Ctrl-C does after `stop()`.
    public func deferBackground() {
        state.withLock { $0.backgroundDeferred = true }
        endDeferredBackgroundIfDue()
    }

    /// Ends the background deliveries once deferred and every foreground delivery is over.
    private func endDeferredBackgroundIfDue() {
        let links = self.links
        let toEnd: [Int] = state.withLock { state in
            guard state.backgroundDeferred else { return [] }
            let foregroundDone = links.indices.allSatisfy { links[$0].priority == .background || state.linkResults[$0] != nil }
            guard foregroundDone else { return [] }
            let pending = links.indices.filter { links[$0].priority == .background && state.linkResults[$0] == nil && !state.deferredLinks.contains($0) }
            state.deferredLinks.formUnion(pending)
            return pending
        }
        toEnd.forEach { links[$0].sender.abandon() }
    }

    /// Stops delivering now, to every receiver: connections close, and what they have not
    /// acknowledged stays in the spool for a later run. Capture stops too.
    public func stopDelivering() {
        let earlier: [EarlierStreams] = state.withLock { state in
            state.stoppedDelivering = true
            return state.earlier
        }
        links.forEach { $0.sender.abandon() }
        earlier.forEach { $0.abandon() }
    }

    /// Blocks until capture and every delivery are over, and returns how they went: for a
    /// synchronous caller such as a command's main thread (`WaitForTask`); async code awaits
    /// `finished()`. Call it after `start()`.
    public func waitUntilFinished() -> Outcome {
        WaitForTask.run { [self] in await finished() }
    }

    /// Waits until capture and every delivery are over, and returns how they went. Before
    /// `start()`, nothing runs: a stopped outcome without links.
    public func finished() async -> Outcome {
        let (outcome, run) = state.withLock { ($0.outcome, $0.run) }
        if let outcome { return outcome }
        if let run { return await run.value }
        return Outcome(capture: .success(.stopped), links: [], stoppedDelivering: true, earlierStreamFailures: [], earlierStreamLosses: [])
    }

    /// Runs the streamer as a swift-service-lifecycle `Service`, in a `ServiceGroup` beside an
    /// embedding program's other services: starts it (unless `start()` already did) and returns
    /// once capture and every delivery are over; `finished()` then gives the `Outcome`.
    /// - A graceful shutdown of the group (SIGTERM, SIGINT) stops capture without waiting and
    ///   defers the background destinations: everything captured is still delivered to the
    ///   foreground receivers, as capture-send's first Ctrl-C does.
    /// - Cancellation (the group's escalation once its graceful shutdown takes too long, or the
    ///   task's) stops delivering at once: what the receivers have not acknowledged stays in the
    ///   spool for a later run.
    ///
    /// It throws only when the start fails; a delivery that failed is in the `Outcome`. Call
    /// `dispose()` after it returns.
    public func run() async throws {
        if state.withLock({ $0.phase == .created }) { try start() }
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                _ = await finished()
            } onGracefulShutdown: { [self] in
                pipeline.queue.requestStop(immediate: false)
                deferBackground()
            }
        } onCancel: { [self] in
            stopDelivering()
        }
    }

    /// Releases capture and the threads, closes the logs, and removes each encoding's spool once the
    /// receiver it is bound to (its first destination) has the whole stream (a later run delivers
    /// only to that one, so whatever a backup lacks is not kept); otherwise the spool is synced for a
    /// later run to deliver. Call it after `waitUntilFinished()`; calling it earlier stops
    /// delivering first.
    public func dispose() {
        let wasRunning: Bool = state.withLock { state in
            defer { if state.phase != .disposed { state.phase = .disposed } }
            return state.phase == .running
        }
        if wasRunning {
            stopDelivering()
            _ = waitUntilFinished()
        }
        pipeline.queue.dispose()
        _ = pipeline.localCopy?.finish()
        for encoded in encodings {
            if encoded.log.isComplete || encoded.log.isComplete(for: .main) { encoded.log.removeSpool() } else { encoded.log.flushSpool() }
        }
        try? group.syncShutdownGracefully()
        try? spoolReads.syncShutdownGracefully()
    }

    /// The figures now: capture, the log and every receiver's link.
    public var status: Status {
        let capture = pipeline.queue.statistics
        return Status(
            secondsCaptured: Double(capture.framesCaptured + capture.framesLost) / inputSampleRate,
            overruns: capture.overruns, framesLost: capture.framesLost, log: log.progress,
            outputSampleRate: pipeline.outputFormat.sampleRate,
            links: links.map { link in
                LinkStatus(
                    role: link.role, receiver: link.receiver.description, state: link.sender.linkState, usesTLS: link.receiver.tls != nil,
                    progress: encodings[link.encoding].log.progress(for: link.destination), encoding: encodings[link.encoding].label,
                    streamProgress: encodings[link.encoding].log.progress, sampleRate: encodings[link.encoding].description.format.sampleRate)
            },
            localCopy: pipeline.localCopy?.progress,
            encodings: encodings.map { EncodingStatus(label: $0.label, progress: $0.log.progress, sampleRate: $0.description.format.sampleRate) })
    }

    /// The levels of the audio captured since the last call (for a meter), and resets them.
    public func takeLevels() -> LevelMeter.Reading { pipeline.takeLevels() }

    /// The EBU R128 loudness of the capture as of the last packets encoded; nil before any, or when
    /// the capture is not linear PCM.
    public var loudness: Loudness? { pipeline.loudness }

    // MARK: - Inside

    /// Stops capture without waiting for it (`awaitCaptureEnd()` sees it end).
    private func stopCaptureAtOnce() {
        encodings.forEach { $0.log.close() }  // a producer waiting for room must not hold the stop up
        pipeline.queue.requestStop(immediate: true)
    }

    /// The run's end, once every delivery and capture are over: the outcome, kept and announced.
    private func finish() async -> Outcome {
        let (capture, results, stopped, earlier, copy, deferred, reports) = state.withLock { state in
            defer { state.progressReports = nil }
            return (state.captureResult, state.linkResults, state.stoppedDelivering, state.earlier, state.localCopyOutcome, state.deferredLinks, state.progressReports)
        }
        reports?.cancel()
        encodings.forEach { $0.log.close() }
        let statistics = pipeline.queue.statistics
        if statistics.overruns > 0 {
            let recorded = pipeline.fillsLostFrames
                ? "encoded as silence in its place (the file keeps the capture's timeline)"
                : "recorded as marked gaps of silence in the file"
            logger.warning("capture overruns: audio was lost and \(recorded)", metadata: [
                "overruns": "\(statistics.overruns)", "frames-lost": "\(statistics.framesLost)",
            ])
        }
        // Earlier streams are waited for only when not stopped (a stop leaves them in the spool).
        var earlierResults: (failures: [String], losses: [String]) = ([], [])
        if !stopped {
            for streams in earlier {
                let results = await streams.finished()
                earlierResults.failures += results.failures
                earlierResults.losses += results.losses
            }
        }
        let outcome = Outcome(
            capture: capture ?? .success(.stopped),
            links: links.indices.map { index in
                LinkOutcome(role: links[index].role, receiver: links[index].receiver.description, encoding: encodings[links[index].encoding].label,
                            result: results[index] ?? .failure(.connectionLost(.deliveryDidNotRun)),
                            priority: links[index].priority, leftInSpool: leftInSpool(link: index, deferred: deferred))
            },
            stoppedDelivering: stopped, earlierStreamFailures: earlierResults.failures, earlierStreamLosses: earlierResults.losses,
            localCopy: copy)
        state.withLock { state in
            state.outcome = outcome
            if state.phase == .running { state.phase = .finished }
        }
        eventSink.yield(.finished(outcome))
        eventSink.finish()
        return outcome
    }

    /// What a background link left in its spool, when its delivery was deferred (`deferBackground()`)
    /// or stopped (`stopDelivering()`) before its receiver had everything.
    private func leftInSpool(link index: Int, deferred: Set<Int>) -> LeftInSpool? {
        let link = links[index]
        guard link.priority == .background, case .failure = state.withLock({ $0.linkResults[index] }) ?? .failure(.connectionLost(.deliveryDidNotRun)) else { return nil }
        return Self.leftInSpool(encodings[link.encoding], destination: link.destination, deferred: deferred.contains(index))
    }

    /// What each background receiver has not acknowledged and its spool keeps, now (nothing for a
    /// receiver that has it all): for a line written while the run stops, before its outcome.
    public func backgroundLeftInSpool() -> [(encoding: EncodedStream, receiver: Receiver, left: LeftInSpool)] {
        links.filter { $0.priority == .background }.compactMap { link in
            let encoded = encodings[link.encoding]
            return Self.leftInSpool(encoded, destination: link.destination, deferred: false).map { (encoded, link.receiver, $0) }
        }
    }

    /// What `encoded`'s spool keeps that `destination` has not acknowledged; nil when it keeps
    /// nothing for it (no spool, or everything acknowledged).
    private static func leftInSpool(_ encoded: EncodedStream, destination: LogDestination, deferred: Bool) -> LeftInSpool? {
        guard let spool = encoded.log.spool, spool.exists, !encoded.log.isComplete(for: destination) else { return nil }
        let progress = encoded.log.progress(for: destination)
        let rate = encoded.description.format.sampleRate
        return LeftInSpool(
            seconds: rate > 0 ? Double(max(0, progress.appendedEndSampleTime - progress.acknowledgedEndSampleTime)) / rate : 0,
            bytes: progress.unacknowledgedBytes, spoolDirectory: spool.directory, deferred: deferred)
    }

    /// Yields `.progress` every `progressInterval` until the run's end.
    private func startProgressReports() {
        guard let interval = configuration.progressInterval, interval > .zero else { return }
        let reports = Task { [self] in
            while (try? await Task.sleep(for: interval)) != nil {
                eventSink.yield(.progress(status))
            }
        }
        // A run that ended already (a quick failure) has nothing more to report.
        let ended: Bool = state.withLock { state in
            guard state.outcome == nil else { return true }
            state.progressReports = reports
            return false
        }
        if ended { reports.cancel() }
    }

    /// The settings that deliver earlier streams to `receiver` (their stream ids, names and secrets
    /// come from their spools).
    private func senderTemplate(for receiver: Receiver) -> SenderConfiguration {
        var template = SenderConfiguration(
            host: receiver.host, port: receiver.port, streamName: configuration.streamName,
            windowBytes: configuration.windowBytes, connectTimeout: configuration.connectTimeout, idleTimeout: configuration.idleTimeout,
            heartbeatInterval: configuration.heartbeatInterval, application: configuration.application,
            sourceHost: configuration.sourceHost, authToken: receiver.authToken)
        template.tls = receiver.tls
        template.settingNames = configuration.settingNames
        template.reconnect = configuration.reconnect
        return template
    }

    /// The stream name of an encoding after the first: `NAME-LABEL`, the name cut (at a character)
    /// so that the whole stays within the 255 bytes a receiver accepts.
    static func encodingStreamName(_ name: String, label: String) -> String {
        let suffix = "-" + label
        var base = name
        while base.utf8.count + suffix.utf8.count > 255, !base.isEmpty { base.removeLast() }
        return base + suffix
    }

    /// Logs the log's storage events loudly; `background`: the encoding's label and receiver, for a
    /// background encoding, which gives way first when the spool is full (`SpoolBudget`).
    static func storageReporter(
        _ logger: Logger, background: (label: String, receiver: String)? = nil, settingNames: any SettingNaming = LibrarySettingNames()
    ) -> @Sendable (PacketLogEvent) -> Void {
        let spoolLimit = settingNames.name(of: .spoolLimit)
        return { event in
            switch event {
            case .overflowStarted(let path) where background != nil:
                let label = background?.label ?? "", receiver = background?.receiver ?? ""
                logger.critical("THE SPOOL IS FULL (\(spoolLimit)): the background encoding \(label) for \(receiver) gives way to the live stream: its audio from here on is not kept in the spool but in a local file, and \(receiver)'s recording will have a gap here naming that file", metadata: [
                    "file": "\(path)", "encoding": "\(label)", "receiver": "\(receiver)",
                ])
            case .overflowStarted(let path):
                logger.critical("the spool is full (\(spoolLimit)): audio now goes to a local file and the receiver will get a gap here", metadata: ["file": "\(path)"])
            case .overflowEnded(let path, let frames):
                logger.critical("overflow ended: the receiver's file has a gap whose audio is in the local file", metadata: ["file": "\(path)", "frames": "\(frames)"])
            case .audioLost(let loss):
                logger.critical("AUDIO IS BEING LOST: \(loss.message(naming: settingNames))")
            case .spoolFailed(let reason):
                logger.error("the disk spool failed; unacknowledged audio is kept in memory only and would not survive a crash", metadata: ["reason": "\(reason)"])
            }
        }
    }
}

/// Why a `CaptureStreamer` could not be made or started.
public enum CaptureStreamerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The spool could not be created.
    case spool(SpoolError)
    /// Capture could not be set up, started or resumed.
    case capture(CaptureError)
    /// The call does not fit the streamer's state.
    case invalidState(String)
    /// A marker's label cannot be recorded (too long, or a NUL character).
    case invalidMarker(String)
    /// The local copy (`Configuration.localCopy`) cannot be made.
    case localCopy(LocalCopyError)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .spool(let error): return error.message(naming: naming)
        case .capture(let error): return error.message(naming: naming)
        case .invalidState(let reason): return reason
        case .invalidMarker(let reason): return reason
        case .localCopy(let error): return error.message(naming: naming)
        }
    }
}
