import CaptureErrorText
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import CaptureSecurity
import Synchronization

/// Where and how a stream is sent.
public struct SenderConfiguration: Sendable {
    /// The receiver's host name or address.
    public var host: String
    /// The receiver's port.
    public var port: Int
    /// The stream's name (the receiver sanitizes it into the file name).
    public var streamName: String
    /// The stream's identity, the same across reconnects.
    public var streamID: UUID
    /// Unacknowledged bytes in flight at most.
    public var windowBytes: Int
    /// Time allowed to establish the TCP connection.
    public var connectTimeout: Duration
    /// Silence from the receiver after which the connection is considered dead.
    public var idleTimeout: Duration
    /// Heartbeat interval on an otherwise idle connection.
    public var heartbeatInterval: Duration
    /// Written into the handshake, and from there into the file's `info` chunk.
    public var application: String
    /// This machine's name, for the file's `info` chunk.
    public var sourceHost: String
    /// Shared secret for receivers that require one (empty for none).
    public var authToken: String
    /// The stream's resume secret (PROTOCOL.md §6.1.1): random bytes made once per stream and kept
    /// with its spool, presented in every Hello; only a sender holding it may resume the stream.
    public var resumeSecret: [UInt8] = ResumeSecret.make()
    /// Set when the stream is already delivered as a new stream that continues it (from its spool).
    public var continuation: StreamContinuation? = nil
    /// TLS settings; nil for a plaintext connection.
    public var tls: SenderTLSConfiguration? = nil
    /// Delays between reconnection attempts.
    public var reconnect: ReconnectPolicy = ReconnectPolicy()
    /// Which of the log's destinations this receiver is (its acknowledgement cursor).
    public var destination: LogDestination = .main
    /// For a backup receiver: how long it may lack audio without making progress (unreachable, or
    /// connected without acknowledging anything new) before `run()` gives up with
    /// `SenderError.gaveUp` (`DeliveryPolicy`); nil to try for ever, as for the main receiver.
    public var giveUpAfter: Duration? = nil
    /// The most this receiver is sent, in bits per second of audio payload (`max-rate`); nil for
    /// no limit.
    public var maxBitsPerSecond: Int? = nil
    /// For a background destination (`priority=background`): where the foreground destinations
    /// stand, looked at every `SendPacing.tickInterval`; it sends only while they are caught up,
    /// one entry at a time while their streams go on. Nil for a foreground destination.
    public var foreground: (@Sendable () -> ForegroundState)? = nil
    /// How the sender's failures and log lines name a setting to change ("connect with TLS"): the
    /// library's words unless the program has its own (capture-send: its flags).
    public var settingNames: any SettingNaming = LibrarySettingNames()

    public init(
        host: String, port: Int, streamName: String, streamID: UUID = UUID(), windowBytes: Int = 4 << 20,
        connectTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(20),
        heartbeatInterval: Duration = .seconds(5), application: String = "capture-send",
        sourceHost: String = ProcessInfo.processInfo.hostName, authToken: String = ""
    ) {
        self.host = host
        self.port = port
        self.streamName = streamName
        self.streamID = streamID
        self.windowBytes = windowBytes
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.heartbeatInterval = heartbeatInterval
        self.application = application
        self.sourceHost = sourceHost
        self.authToken = authToken
    }
}

/// The stream's description for the handshake: format, codec configuration, start time.
public struct StreamDescription: Sendable {
    public var format: StreamFormat
    public var magicCookie: [UInt8]
    public var primingFrames: Int
    /// UTC wall-clock time of sample 0.
    public var startTime: Date
    /// Whether the clock that stamped `startTime` was synchronized.
    public var clock: ClockSynchronization
    /// What each channel carries, when known (linear PCM from a file with a channel mask).
    public var channelLayout: ChannelLayout?
    /// The capture this stream is one encoding of, when the capture feeds several (Hello `capture`).
    public var capture: CaptureLink?

    public init(
        format: StreamFormat, magicCookie: [UInt8], primingFrames: Int, startTime: Date,
        clock: ClockSynchronization = .unknown, channelLayout: ChannelLayout? = nil, capture: CaptureLink? = nil
    ) {
        self.capture = capture
        self.clock = clock
        self.channelLayout = channelLayout
        self.format = format
        self.magicCookie = magicCookie
        self.primingFrames = primingFrames
        self.startTime = startTime
    }
}

/// The capture a stream is one encoding of: the capture's id, shared by every stream it feeds, and
/// the encoding's label (`AudioEncoder.encodingLabel`). The receiver records both in the file and
/// shows a capture's streams together.
public struct CaptureLink: Sendable, Equatable {
    public var captureID: UUID
    public var encoding: String

    public init(captureID: UUID, encoding: String) {
        self.captureID = captureID
        self.encoding = encoding
    }
}

/// Sends one stream's packet log to a receiver over TCP until the receiver confirms the end of the
/// stream, reconnecting whenever the connection is lost.
///
/// Every connection resumes the same stream (same stream id) from the receiver's durable position:
/// the Hello's `resume_from_sequence` is the oldest sequence the log still holds, and sending
/// restarts at `HelloAccepted.next_sequence`. What a connection's end leads to, and when, is
/// `DeliveryPolicy`'s decision; this is its shell (it connects, waits and logs). It stops on a
/// permanent refusal (see `ConnectionOutcome`) or when `abandon()` is called; whatever is not
/// acknowledged then stays in the log's spool. A backup receiver (`giveUpAfter`) is also given up
/// when it makes no progress for that long (checked on a timer while it is connected or waiting),
/// or at once when the log gives it up because its backlog reached the room (`BackupRoom`).
public final class StreamSender: Sendable {
    private let configuration: SenderConfiguration
    private let description: StreamDescription
    private let log: PacketLog
    private let logger: Logger
    private let group: any EventLoopGroup
    /// Where spool reads for resends run: never on the event loop (`PacketFetcher`).
    private let spoolReads: NIOThreadPool
    /// Whether `group` and `spoolReads` are this sender's own, shut down when `run()` returns.
    private let ownsThreads: Bool
    private let control: SenderControl
    /// The stream this sender delivers as: the configured one, or the continuation it switched to.
    private let delivery: Mutex<StreamContinuation?>

    /// A sender with threads of its own (an event loop and a spool reader), or, with `threads`,
    /// on threads shared with other senders, which the caller starts and shuts down.
    public init(
        configuration: SenderConfiguration, description: StreamDescription, log: PacketLog, logger: Logger,
        threads: (group: any EventLoopGroup, spoolReads: NIOThreadPool)? = nil,
        linkChanged: (@Sendable (SenderLinkState) -> Void)? = nil
    ) {
        delivery = Mutex(configuration.continuation)
        self.configuration = configuration
        self.description = description
        self.log = log
        self.logger = logger
        if let threads {
            group = threads.group
            spoolReads = threads.spoolReads
            ownsThreads = false
        } else {
            group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            spoolReads = NIOThreadPool(numberOfThreads: 1)
            ownsThreads = true
        }
        control = SenderControl(
            linkChanged: linkChanged, policy: DeliveryPolicy(reconnect: configuration.reconnect, giveUpAfter: configuration.giveUpAfter))
    }

    /// The receiver, as HOST:PORT.
    public var receiver: String { "\(configuration.host):\(configuration.port)" }

    /// Where the connection stands now.
    public var linkState: SenderLinkState { control.link }

    /// Whether the connection uses TLS.
    public var usesTLS: Bool { configuration.tls != nil }

    /// Whether the receiver accepts markers, as its last HelloAccepted said (nil before the first):
    /// a receiver that predates them is never sent one (PROTOCOL.md §6.10).
    public var receiverAcceptsMarkers: Bool? { control.acceptsMarkers }

    /// Stops trying to deliver: the current connection is closed and `run()` returns `.abandoned`.
    /// What the receiver has not acknowledged stays in the spool for the next run. Cancelling the
    /// task that runs `run()` does the same.
    public func abandon() {
        control.abandon()
    }

    /// Connects, streams, reconnects as often as needed, and returns once the receiver confirmed
    /// the end of the stream, the receiver refused it for good, a backup was given up, or
    /// `abandon()` was called (or the calling task was cancelled). It never blocks a thread: every
    /// wait (for audio, a connection, its end, a backoff) is an event-loop future awaited, and
    /// ends early when delivery stops.
    public func run() async -> Result<StreamSummary, SenderError> {
        if ownsThreads { spoolReads.start() }
        let result = await withTaskCancellationHandler {
            await deliver()
        } onCancel: { [control] in
            control.abandon()
        }
        if ownsThreads {
            try? await group.shutdownGracefully()
            try? await spoolReads.shutdownGracefully()
        }
        return result
    }

    /// `run()`'s loop: one connection after another, as `DeliveryPolicy` decides.
    private func deliver() async -> Result<StreamSummary, SenderError> {
        let destination = configuration.destination
        let tlsContext: NIOSSLContext?
        do throws(SenderError) {
            tlsContext = try configuration.tls?.makeContext()
        } catch {
            return .failure(error)
        }
        // The receiver creates the stream's file at the handshake: the stream is announced only once
        // it has audio, so a run stopped or killed before its first capture buffer leaves no file.
        guard await hasAudio() else { return .failure(error(for: control.stopped ?? .abandoned)) }
        if log.lastSequence == 0 {
            control.link = .finished
            return .success(StreamSummary(fileName: "", totalFrames: 0, totalPackets: 0))
        }
        // A backup the log gives up (its backlog reached the room) is given up here at once.
        let giving = log.addDropListener { [control] dropped, room in
            if dropped == destination { control.giveUp(.fellBehind(room)) }
        }
        defer { log.removeListener(giving) }
        if let room = log.givenUpRoom(for: destination) { control.giveUp(.fellBehind(room)) }
        let watch = configuration.giveUpAfter == nil ? nil : GiveUpWatch(loop: group.next(), check: { [self] in checkProgress() })
        watch?.start()
        defer { watch?.cancel() }
        var generator = SystemRandomNumberGenerator()
        while true {
            if let stop = control.stopped { return .failure(error(for: stop)) }
            let outcome = await connectOnce(tlsContext: tlsContext)
            if !outcome.isDelivered, let stop = control.stopped { return .failure(error(for: stop)) }
            let action = control.decide(.connectionEnded(
                outcome, at: MonotonicClock.now(), backlog: backlog(), complete: log.isComplete(for: destination),
                random: Double.random(in: 0..<1, using: &generator)))
            switch action {
            case .delivered(let summary):
                control.link = .finished
                if let incomplete = incompleteJoins(restIn: summary.fileName) { return .failure(incomplete) }
                return .success(summary)
            case .deliveredUnconfirmed(let refusal):
                // Every packet and the end were acknowledged; the receiver already finished the
                // file and only its confirmation was lost.
                logger.notice("the receiver acknowledged the whole stream; its end confirmation was lost", metadata: ["refusal": "\(refusal.message(naming: configuration.settingNames))"])
                return .success(StreamSummary(fileName: control.fileName, totalFrames: log.streamEnd?.position.endSampleTime ?? 0, totalPackets: 0))
            case .continueAsNewStream(let refusal, let receiverHoldsUntil):
                guard let continuation = await continueAsNewStreamOffLoop(receiverHoldsUntil: receiverHoldsUntil) else {
                    // Nothing held to continue with: everything was acknowledged.
                    control.link = .finished
                    let acknowledgedEnd = log.progress(for: configuration.destination).acknowledgedEndSampleTime
                    guard let lost = Self.lostRange(receiverHoldsUntil: receiverHoldsUntil, oldestHeld: acknowledgedEnd) else { return .failure(refusal) }
                    return .failure(incompleteJoins(restIn: nil, alsoLost: lost) ?? refusal)
                }
                if let lostFrom = continuation.lostFromSampleTime {
                    let lost = lostFrom..<continuation.firstSampleTime
                    logger.error("the receiver lost audio it had acknowledged (its storage did not keep what it confirmed): those seconds are in no file; the audio from here on is delivered as a new stream that continues the stream", metadata: [
                        "lost-seconds": "\(Self.seconds(lost, rate: description.format.sampleRate))",
                        "continues": "\(continuation.continues.uuidString.lowercased())", "stream-id": "\(continuation.streamID.uuidString.lowercased())",
                        "refusal": "\(refusal.message(naming: configuration.settingNames))",
                    ])
                    continue
                }
                logger.warning("the receiver no longer resumes this stream (its resume window passed and its file was finalized, or it lost it): the audio from here on is delivered as a new stream that continues it; the receiver says whether the two recordings join without a hole", metadata: [
                    "continues": "\(continuation.continues.uuidString.lowercased())", "stream-id": "\(continuation.streamID.uuidString.lowercased())",
                    "first-sample": "\(continuation.firstSampleTime)", "first-sample-time": "\(Self.utc(startOf: continuation, description))",
                    "refusal": "\(refusal.message(naming: configuration.settingNames))",
                ])
            case .fail(let error):
                return .failure(error)
            case .giveUp(let reason):
                return .failure(giveUpNow(reason, lastError: outcome))
            case .reconnect(let delay, let error):
                logger.warning("connection to the receiver lost; reconnecting", metadata: [
                    "receiver": "\(receiver)", "reason": "\(error.message(naming: configuration.settingNames))", "retry-in-s": "\(String(format: "%.2f", delay.inSeconds))",
                    "unacknowledged-bytes": "\(log.unacknowledgedBytes(for: destination))",
                ])
                control.link = .reconnecting
                await control.pause(for: delay, on: group.next())
            case .keepGoing:
                break
            }
        }
    }

    /// Waits until the log holds audio or its end (true), or delivery stops first (false).
    private func hasAudio() async -> Bool {
        let log = self.log
        let ready = group.next().makePromise(of: Void.self)
        let check: @Sendable () -> Void = {
            if log.lastSequence > 0 || log.streamEnd != nil { ready.succeed(()) }
        }
        let waking = log.addListener(check)
        check()
        let result = await control.untilStopped(ready.futureResult)
        log.removeListener(waking)
        ready.succeed(())  // when delivery stopped first: a promise is always completed
        return result != nil
    }


    /// This receiver's cursor, for `DeliveryPolicy`.
    private func backlog() -> DeliveryPolicy.Backlog {
        let progress = log.progress(for: configuration.destination)
        return DeliveryPolicy.Backlog(
            lastAdvanceAt: progress.lastAdvanceAt.map(MonotonicClock.reading),
            oldestLackingAppendedAt: progress.oldestUnacknowledgedAppendedAt.map(MonotonicClock.reading))
    }

    /// The give-up watch's look at the clock: gives the backup up when the policy says so (which
    /// closes its connection and ends any wait); returns when to look again (nil: stop looking).
    private func checkProgress() -> Duration? {
        guard control.stopped == nil else { return nil }
        switch control.decide(.check(at: MonotonicClock.now(), backlog: backlog())) {
        case .giveUp(let reason):
            control.giveUp(reason)
            return nil
        case .keepGoing(let checkAt):
            return checkAt
        default:
            return nil
        }
    }

    /// The error `run()` ends with once stopped.
    private func error(for stop: SenderControl.Stop) -> SenderError {
        switch stop {
        case .abandoned: return abandonedError()
        case .gaveUp(let reason): return giveUpNow(reason, lastError: nil)
        }
    }

    private func abandonedError() -> SenderError {
        let destination = configuration.destination
        return .connectionLost(.stoppedUnacknowledged(
            messages: log.lastSequence - log.acknowledgedSequence(for: destination), bytes: log.unacknowledgedBytes(for: destination)))
    }

    /// Ends delivery to this (backup) receiver and says what its file lacks. Its cursor is dropped
    /// by whoever runs the sender (`CaptureStreamer` does for every backup that fails), if the log
    /// has not dropped it already.
    private func giveUpNow(_ reason: SenderError.GiveUpReason, lastError: ConnectionOutcome?) -> SenderError {
        let sampleRate = description.format.sampleRate
        let fromSecond = sampleRate > 0 ? Double(log.progress(for: configuration.destination).acknowledgedEndSampleTime) / sampleRate : 0
        let error = SenderError.gaveUp(receiver: receiver, reason: reason, fromSecond: fromSecond)
        var metadata: Logger.Metadata = [:]
        if case .interrupted(let last, _, _)? = lastError { metadata["last-error"] = "\(last.message(naming: configuration.settingNames))" }
        logger.error("giving up on a backup receiver: \(error.message(naming: configuration.settingNames))", metadata: metadata)
        control.link = .gaveUp
        return error
    }

    /// One connection, from connect to its end.
    private func connectOnce(tlsContext: NIOSSLContext?) async -> ConnectionOutcome {
        let hello = makeHello()
        let continuation = delivery.withLock { $0 }
        let done = group.next().makePromise(of: ConnectionOutcome.self)
        let configuration = self.configuration
        let log = self.log
        let logger = self.logger
        let control = self.control
        let sampleRate = description.format.sampleRate
        let fetcher = PacketFetcher(log: log, pool: spoolReads)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: 1 << 20))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    var security: SenderSessionHandler.Security?
                    if let tls = configuration.tls, let tlsContext {
                        let report = TLSVerificationReport()
                        try channel.pipeline.syncOperations.addHandler(
                            try tls.makeHandler(context: tlsContext, host: configuration.host, report: report)
                        )
                        security = .init(
                            report: report, host: configuration.host, handshakeTimeout: tls.handshakeTimeout)
                    }
                    try channel.pipeline.syncOperations.addHandlers([
                        IdleStateHandler(readTimeout: TimeAmount(configuration.idleTimeout), writeTimeout: TimeAmount(configuration.heartbeatInterval)),
                        ByteToMessageHandler(WireFrameDecoder(role: .sender)),
                        MessageToByteHandler(WireFrameEncoder(sendsPreamble: true)),
                        SenderSessionHandler(
                            hello: hello, log: log, destination: configuration.destination, fetcher: fetcher, windowBytes: configuration.windowBytes, done: done, logger: logger,
                            security: security,
                            pacing: SendPacing(bitsPerSecond: configuration.maxBitsPerSecond, background: configuration.foreground != nil),
                            foreground: configuration.foreground ?? { .finished },
                            onAccepted: { accepted in
                                let before = control.link
                                _ = control.decide(.accepted(at: MonotonicClock.now()))
                                control.fileName = accepted.fileName
                                control.acceptsMarkers = accepted.acceptedFrameTypes.contains(UInt32(WireMessageType.marker.rawValue))
                                if !accepted.resumed, let continuation {
                                    let fileEnd = accepted.hasContinuedFileEndSampleTime ? accepted.continuedFileEndSampleTime : nil
                                    control.noteJoin(continuation, fileEnd: fileEnd)
                                    Self.logJoin(continuation, fileEnd: fileEnd, sampleRate: sampleRate, logger: logger)
                                }
                                control.link = .streaming
                                if before == .reconnecting {
                                    Self.logReconnected(accepted, sampleRate: sampleRate, log: log, logger: logger, configuration: configuration)
                                }
                            }),
                    ])
                }
            }
        let channel: Channel
        switch await control.awaitConnection(bootstrap.connect(host: configuration.host, port: configuration.port)) {
        case .connected(let connected):
            channel = connected
        case .failed(let error):
            let failure = SenderError.connectFailed(host: configuration.host, port: configuration.port, reason: Self.explain(error))
            done.succeed(.interrupted(failure, retry: true, streamed: false))
            return .interrupted(failure, retry: true, streamed: false)
        case .abandoned:
            let failure = abandonedError()
            done.succeed(.interrupted(failure, retry: false, streamed: false))
            return .interrupted(failure, retry: false, streamed: false)
        }
        logger.info("connected", metadata: ["receiver": "\(receiver)"])
        control.setChannel(channel)
        let outcome: ConnectionOutcome
        do {
            // Ends when the session ends: on its own, or when a stop closes the channel.
            outcome = try await done.futureResult.get()
        } catch {
            outcome = .interrupted(.connectionLost(.transport(reason: SystemErrorText.describe(error))), retry: true, streamed: false)
        }
        control.setChannel(nil)
        try? await channel.close()
        return outcome
    }

    /// What the receiver said about a continuation's join, when it accepted the new stream.
    private static func logJoin(_ continuation: StreamContinuation, fileEnd: Int64?, sampleRate: Double, logger: Logger) {
        let first = continuation.firstSampleTime
        let metadata: Logger.Metadata = ["continues": "\(continuation.continues.uuidString.lowercased())", "first-sample": "\(first)"]
        if continuation.lostFromSampleTime != nil { return }
        if let fileEnd, fileEnd >= first {
            logger.notice("the receiver confirms that the earlier recording ends where the new stream begins: the two join without a hole", metadata: metadata)
        } else if let fileEnd {
            logger.error("the receiver says the earlier recording ends before the new stream begins: the audio between was acknowledged and then lost", metadata: metadata.merging(["lost-seconds": "\(seconds(fileEnd..<first, rate: sampleRate))"]) { a, _ in a })
        } else {
            logger.error("the receiver cannot confirm that the earlier recording holds everything before the new stream: it no longer knows that stream (its record expired, or its storage lost it)", metadata: metadata)
        }
    }

    /// The notice that a connection after a lost (or failed) one was accepted: where the stream
    /// resumes (file, second and sequence) and how much is still to deliver.
    private static func logReconnected(
        _ accepted: Capture_V1_HelloAccepted, sampleRate: Double, log: PacketLog, logger: Logger, configuration: SenderConfiguration
    ) {
        let second = sampleRate > 0 ? Double(accepted.nextSampleTime) / sampleRate : 0
        logger.notice(accepted.resumed ? "reconnected; the stream resumes in the same file" : "reconnected; the receiver writes the stream into a new file", metadata: [
            "receiver": "\(configuration.host):\(configuration.port)", "file": "\(accepted.fileName)",
            "from-second": "\(String(format: "%.3f", second))", "next-sequence": "\(accepted.nextSequence)",
            "unacknowledged-bytes": "\(log.unacknowledgedBytes(for: configuration.destination))",
        ])
    }

    /// The failure a delivery that went on as new streams ends with unless every join was confirmed,
    /// derived from the continuations made: the audio the receiver lost after acknowledging it (named
    /// in its refusal, or a continued file it says ends early, or `alsoLost`), and the stretches it
    /// could not confirm it holds (it no longer knows the stream it acknowledged them in). Nil: every
    /// join confirmed without a hole.
    private func incompleteJoins(restIn fileName: String?, alsoLost: Range<Int64>? = nil) -> SenderError? {
        var lost: [Range<Int64>] = []
        var unconfirmed: [Range<Int64>] = []
        var earlierStart: Int64 = 0
        for join in control.joins {
            let first = join.continuation.firstSampleTime
            defer { earlierStart = first }
            if let lostFrom = join.continuation.lostFromSampleTime {
                lost.append(lostFrom..<first)
            } else if let end = join.fileEnd {
                if end < first { lost.append(end..<first) }
            } else if join.accepted, earlierStart < first {
                unconfirmed.append(earlierStart..<first)
            }
        }
        if let alsoLost { lost.append(alsoLost) }
        guard !lost.isEmpty || !unconfirmed.isEmpty else { return nil }
        return .receiverLostAcknowledgedAudio(receiver: receiver, lost: lost.map(seconds), unconfirmed: unconfirmed.map(seconds), restIn: fileName)
    }

    /// The acknowledged audio a receiver lost: from where it says its recording ends (`receiverHoldsUntil`,
    /// never before sample 0, whatever a lying receiver says) up to the oldest audio this sender
    /// still holds; nil when it said nothing or holds at least that much.
    static func lostRange(receiverHoldsUntil: Int64?, oldestHeld: Int64) -> Range<Int64>? {
        guard let held = receiverHoldsUntil.map({ max($0, 0) }), held < oldestHeld else { return nil }
        return held..<oldestHeld
    }

    /// "7.500-12.000" for this stream's rate.
    private func seconds(_ range: Range<Int64>) -> String { Self.seconds(range, rate: description.format.sampleRate) }

    /// "7.500-12.000": a sample range in seconds of the stream.
    static func seconds(_ range: Range<Int64>, rate: Double) -> String {
        let second = { (sample: Int64) in rate > 0 ? String(format: "%.3f", Double(sample) / rate) : "\(sample)" }
        return "\(second(range.lowerBound))-\(second(range.upperBound))"
    }

    /// `continueAsNewStream` on the spool's reader thread: it reads the spool and writes to it.
    private func continueAsNewStreamOffLoop(receiverHoldsUntil: Int64?) async -> StreamContinuation? {
        do {
            return try await spoolReads.runIfActive { [self] in continueAsNewStream(receiverHoldsUntil: receiverHoldsUntil) }
        } catch {
            // The pool is shut down only after `run()`: not reached while delivering.
            return continueAsNewStream(receiverHoldsUntil: receiverHoldsUntil)
        }
    }

    /// Switches delivery to a new stream that continues the current one from the oldest entry the
    /// log holds, and records it in the spool; nil when the log holds nothing to continue with.
    /// `receiverHoldsUntil`: where the receiver's recording ends, when it named that in its refusal;
    /// audio between there and the oldest entry held was acknowledged and lost (`lostFromSampleTime`).
    private func continueAsNewStream(receiverHoldsUntil: Int64?) -> StreamContinuation? {
        let first = log.oldestKeptSequence
        let entry: LoggedPacket
        do throws(SpoolError) {
            guard let oldest = try log.entries(from: first, maxCount: 1).first else { return nil }
            entry = oldest
        } catch {
            logger.error("the spool cannot give back the oldest audio it holds; the stream cannot continue", metadata: ["error": "\(error)"])
            return nil
        }
        let current = delivery.withLock { $0?.streamID } ?? configuration.streamID
        let continuation = StreamContinuation(
            streamID: UUID(), continues: current, firstSequence: first, firstSampleTime: entry.firstSampleTime,
            lostFromSampleTime: Self.lostRange(receiverHoldsUntil: receiverHoldsUntil, oldestHeld: entry.firstSampleTime)?.lowerBound)
        control.noteContinuation(continuation)
        // The spool is delivered to the main receiver after a restart: only its continuation is recorded.
        if configuration.destination == .main {
            do throws(SpoolError) {
                try log.spool?.recordContinuation(continuation)
            } catch {
                logger.error("cannot record in the spool that the stream continues as a new one; a restarted sender would try the old one", metadata: ["error": "\(error)"])
            }
        }
        delivery.withLock { $0 = continuation }
        return continuation
    }

    /// The UTC time of a continuation's first frame.
    private static func utc(startOf continuation: StreamContinuation, _ description: StreamDescription) -> String {
        let time = description.startTime.addingTimeInterval(Double(continuation.firstSampleTime) / description.format.sampleRate)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: time)
    }

    /// Seconds since 1970 in nanoseconds, clamped to Int64 (NaN: Int64.min): a start read from a
    /// damaged spool is sent as it is, and the receiver refuses it with a message that names it
    /// (PROTOCOL.md §6.1.4), instead of this process trapping.
    static func unixNanoseconds(_ seconds: Double) -> Int64 {
        let nanoseconds = (seconds * 1e9).rounded(.down)
        guard !nanoseconds.isNaN else { return .min }
        return nanoseconds >= 0x1p63 ? .max : nanoseconds < -0x1p63 ? .min : Int64(nanoseconds)
    }

    private func makeHello() -> Capture_V1_Hello {
        let continuation = delivery.withLock { $0 }
        return .with {
            $0.protocolVersion = UInt32(WireProtocol.version)
            $0.streamID = (continuation?.streamID ?? configuration.streamID).wireBytes
            $0.streamName = configuration.streamName
            $0.authToken = configuration.authToken
            $0.format = Capture_V1_StreamFormat(description.format)
            $0.magicCookie = Data(description.magicCookie)
            let firstSample = continuation?.firstSampleTime ?? 0
            $0.startTimeUnixNs = Self.unixNanoseconds(description.startTime.timeIntervalSince1970 + Double(firstSample) / description.format.sampleRate)
            $0.startSampleTime = firstSample
            if let continuation { $0.continues = continuation.wire }
            $0.resumeFromSequence = log.oldestKeptSequence
            $0.sourceHost = configuration.sourceHost
            $0.application = configuration.application
            $0.primingFrames = UInt32(clamping: description.primingFrames)
            $0.resumeSecret = Data(configuration.resumeSecret)
            $0.clock = Capture_V1_ClockState(description.clock)
            if let layout = description.channelLayout { $0.channelLayout = .with { $0.tag = layout.tag; $0.bitmap = layout.bitmap } }
            if let capture = description.capture { $0.capture = .with { $0.captureID = capture.captureID.wireBytes; $0.encoding = capture.encoding } }
        }
    }

    /// A short human reason for a connection error ("connection refused", "timed out"...).
    static func explain(_ error: Error) -> String {
        if let connection = error as? NIOConnectionError {
            if let first = connection.connectionErrors.first { return explain(first.error) }
            if let dns = connection.dnsAError ?? connection.dnsAAAAError { return "cannot resolve \(connection.host): \(SystemErrorText.describe(dns))" }
            return "no address found for \(connection.host)"
        }
        if error is ChannelError, case ChannelError.connectTimeout = error { return "connection timed out" }
        return SystemErrorText.describe(error)
    }
}

/// Where the sender's connection to the receiver stands, for the status line.
public enum SenderLinkState: String, Sendable, Equatable {
    /// Connecting for the first time.
    case connecting
    /// Connected, and the receiver accepted the stream.
    case streaming
    /// The connection was lost; trying again (audio keeps going to the spool).
    case reconnecting
    /// The receiver confirmed the whole stream.
    case finished
    /// A backup receiver was given up and dropped: unreachable or without progress past its give-up
    /// time, or so far behind that keeping its audio would have cost the main receiver.
    case gaveUp = "gave-up"
}

/// The sender's shared state between `run()` and whatever stops it: why it stopped (abandoned, or
/// a backup given up), the wait of `run()` that a stop ends, the live channel, the file name the
/// receiver announced, the continuations' joins, and the `DeliveryPolicy` (fed from `run()`, the
/// event loop and the give-up watch).
///
/// Sendability: everything mutable is one `State` in a `Mutex`; the link callback is set once.
final class SenderControl: Sendable {
    /// Why delivery stopped before the stream was delivered.
    enum Stop: Equatable {
        /// `abandon()`: what is unacknowledged stays in the spool.
        case abandoned
        /// A backup receiver given up (`DeliveryPolicy`, or the log's room).
        case gaveUp(SenderError.GiveUpReason)
    }

    /// A continuation and what its receiver said of the join.
    struct Join {
        var continuation: StreamContinuation
        var accepted = false
        var fileEnd: Int64?
    }

    private struct State {
        var stop: Stop?
        var policy: DeliveryPolicy
        var channel: Channel?
        /// Completed by a stop: the wait `run()` is in (`untilStopped`), if any.
        var waiting: EventLoopPromise<Void>?
        var fileName = ""
        var acceptsMarkers: Bool?
        /// Every continuation made, in order, with what the receiver said when it first accepted
        /// it: where the continued stream's file ends (`HelloAccepted.continued_file_end_sample_time`;
        /// nil: it cannot confirm, or it has not accepted the continuation).
        var joins: [Join] = []
        var link = SenderLinkState.connecting
    }

    private let state: Mutex<State>
    /// Told every change of `link`.
    private let linkChanged: (@Sendable (SenderLinkState) -> Void)?

    init(linkChanged: (@Sendable (SenderLinkState) -> Void)?, policy: DeliveryPolicy) {
        self.linkChanged = linkChanged
        state = Mutex(State(policy: policy))
    }

    /// Why delivery stopped; nil while it goes on.
    var stopped: Stop? { state.withLock { $0.stop } }

    /// Feeds the delivery policy one event and returns its action.
    func decide(_ event: DeliveryPolicy.Event) -> DeliveryPolicy.Action {
        state.withLock { $0.policy.handle(event) }
    }

    var link: SenderLinkState {
        get { state.withLock { $0.link } }
        set {
            let changed: Bool = state.withLock { state in
                defer { state.link = newValue }
                return state.link != newValue
            }
            if changed { linkChanged?(newValue) }
        }
    }

    var fileName: String {
        get { state.withLock { $0.fileName } }
        set { state.withLock { $0.fileName = newValue } }
    }

    /// Whether the receiver's last HelloAccepted listed Marker (nil before any).
    var acceptsMarkers: Bool? {
        get { state.withLock { $0.acceptsMarkers } }
        set { state.withLock { $0.acceptsMarkers = newValue } }
    }

    /// Records a continuation as it is made.
    func noteContinuation(_ continuation: StreamContinuation) {
        state.withLock { $0.joins.append(Join(continuation: continuation)) }
    }

    /// Records what the receiver said about a continuation's join when it first accepted it.
    func noteJoin(_ continuation: StreamContinuation, fileEnd: Int64?) {
        state.withLock { state in
            // A continuation restored from the spool was made by an earlier run.
            guard let index = state.joins.firstIndex(where: { $0.continuation.streamID == continuation.streamID }) else {
                state.joins.append(Join(continuation: continuation, accepted: true, fileEnd: fileEnd))
                return
            }
            guard !state.joins[index].accepted else { return }
            state.joins[index].accepted = true
            state.joins[index].fileEnd = fileEnd
        }
    }

    var joins: [Join] { state.withLock { $0.joins } }

    func abandon() {
        end(.abandoned)
    }

    /// Gives this backup up for `reason` (unless delivery stopped already): as `abandon()`, the
    /// connection closes and the wait `run()` is in ends.
    func giveUp(_ reason: SenderError.GiveUpReason) {
        end(.gaveUp(reason))
    }

    private func end(_ why: Stop) {
        let (live, waiting): (Channel?, EventLoopPromise<Void>?) = state.withLock { state in
            if state.stop == nil { state.stop = why }
            return (state.channel, state.waiting)
        }
        waiting?.succeed(())
        live?.close(promise: nil)
    }

    func setChannel(_ channel: Channel?) {
        let closeNow: Bool = state.withLock { state in
            state.channel = channel
            return state.stop != nil
        }
        if closeNow { channel?.close(promise: nil) }
    }

    /// Waits for `future`, or until delivery stops, whichever comes first: its result, or nil
    /// when delivery stopped first (or had already). `run()` waits for one thing at a time.
    func untilStopped<Value: Sendable>(_ future: EventLoopFuture<Value>) async -> Result<Value, Error>? {
        let first = future.eventLoop.makePromise(of: Result<Value, Error>?.self)
        let stopping = future.eventLoop.makePromise(of: Void.self)
        let stoppedAlready: Bool = state.withLock { state in
            state.waiting = stopping
            return state.stop != nil
        }
        // A promise keeps its first completion: whichever of the two comes first is the answer.
        future.whenComplete { first.succeed($0) }
        stopping.futureResult.whenSuccess { first.succeed(nil) }
        if stoppedAlready { stopping.succeed(()) }
        let result = try? await first.futureResult.get()
        state.withLock { $0.waiting = nil }
        stopping.succeed(())  // every promise is completed; `first` already has its answer
        return result ?? nil
    }

    /// How waiting for a connection ended.
    enum ConnectionAttempt {
        case connected(Channel)
        case failed(Error)
        /// Delivery stopped first (`abandon()`, a give-up); the connection, should it still come, is closed.
        case abandoned
    }

    /// Waits for `connecting` to complete, or until delivery stops, whichever comes first: a
    /// connect that hangs (a silent network, slow name resolution) never holds up stopping.
    func awaitConnection(_ connecting: EventLoopFuture<Channel>) async -> ConnectionAttempt {
        let finished = await untilStopped(connecting)
        switch finished {
        case .success(let channel)? where stopped == nil:
            return .connected(channel)
        case .failure(let error)? where stopped == nil:
            return .failed(error)
        default:
            connecting.whenSuccess { $0.close(promise: nil) }
            return .abandoned
        }
    }

    /// Waits `delay` (a reconnect's backoff, at most a day), or less if delivery stops meanwhile.
    func pause(for delay: Duration, on loop: any EventLoop) async {
        let timer = loop.scheduleTask(in: TimeAmount(min(max(delay, .zero), .seconds(86_400)))) {}
        if await untilStopped(timer.futureResult) == nil { timer.cancel() }
    }
}

/// A backup's give-up watch: looks at `DeliveryPolicy` on the event loop when it says to (its
/// `check` returns when to look again, as a `MonotonicClock.now()` reading, or nil to stop), so a backup
/// without progress is given up on time while `run()` waits for a connection, its end or a
/// reconnect. The check only reads the log's figures under its lock: nothing blocks the loop.
///
/// Sendability: the scheduled look and whether the watch was cancelled are one value in a `Mutex`.
private final class GiveUpWatch: Sendable {
    private let loop: any EventLoop
    private let check: @Sendable () -> Duration?
    private let state = Mutex<(scheduled: Scheduled<Void>?, cancelled: Bool)>((nil, false))

    init(loop: any EventLoop, check: @escaping @Sendable () -> Duration?) {
        self.loop = loop
        self.check = check
    }

    /// Looks now, and from then on when the policy says.
    func start() { schedule(in: .zero) }

    /// Stops looking.
    func cancel() {
        let pending: Scheduled<Void>? = state.withLock { state in
            state.cancelled = true
            return state.scheduled
        }
        pending?.cancel()
    }

    private func schedule(in delay: TimeAmount) {
        state.withLock { state in
            guard !state.cancelled else { return }
            state.scheduled = loop.scheduleTask(in: delay) { [self] in fire() }
        }
    }

    private func fire() {
        guard state.withLock({ !$0.cancelled }), let next = check() else { return }
        let wait = min(max(.zero, next - MonotonicClock.now()), .seconds(86_400))
        // A little past the deadline, so that the look finds it reached.
        schedule(in: TimeAmount(wait) + .milliseconds(1))
    }
}
