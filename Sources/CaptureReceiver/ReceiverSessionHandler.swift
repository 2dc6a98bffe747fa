import CaptureErrorText
import CaptureSecurity
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOSSL

/// The I/O shell around one connection's `ReceiverSession`: it turns what the pipeline reports
/// (messages, decoder errors, idle timers, TLS failures, the close) into session events and carries
/// out the actions the session returns — sending, closing, gathering the facts on a Hello for its
/// `HelloGate` (the rate limiter, the tokens, the stream table), handing audio to the stream's
/// `StreamWriter`, and holding reads back while the disk is behind. All decisions are the
/// session's and the gate's; nothing here blocks the event loop. An event raised while a batch of
/// actions is carried out (the answer to `.decide`) is queued and handled after that batch, as
/// NIO's state machines do, so the session never sees an event from inside its own actions.
final class ReceiverSessionHandler: ChannelDuplexHandler {
    typealias InboundIn = WireMessage
    typealias OutboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private let configuration: ReceiverConfiguration
    private let registry: StreamRegistry
    private let rateLimiter: AuthRateLimiter
    private let tlsReport: TLSVerificationReport?
    private let usesTLS: Bool
    private var logger: Logger
    private var session: ReceiverSession
    private var context: ChannelHandlerContext?
    /// This handler, for storage callbacks (set once added; it outlives the pipeline, since files
    /// may finish after the connection is gone).
    private var loopBound: LoopBoundHandler?
    private let storage: any StreamStorage
    private var writer: (any StreamFile)?
    private var handshakeTimeout: Scheduled<Void>?
    private var peerAddress = "unknown"
    /// The decisions on this connection's Hello.
    private var gate = HelloGate()
    /// Events raised while actions are carried out, handled in order once the current batch is
    /// done. Empty, with no storage, until an action raises one: a ring buffer here (16 events
    /// by default) cost every connection about 2 KiB.
    private var pendingEvents: [ReceiverSessionEvent] = []
    private var handlingEvents = false
    /// Reads are held back (backpressure); `readPending` remembers the read asked for meanwhile.
    private var readingPaused = false
    private var readPending = false
    /// Reports the stream to the receiver's stream directory, when there is one.
    private let directoryTap: SessionDirectoryTap?
    /// Offers the stream's audio to its live listeners, when the receiver serves listening.
    private let listenTap: SessionListenTap?
    /// Log lines a peer can repeat at will, summarized per interval (by message).
    private var repeatedLines: [String: (summary: RepeatedEventSummary, last: SessionLogLine)] = [:]
    private let repeatInterval: Duration

    init(
        configuration: ReceiverConfiguration, registry: StreamRegistry, storage: any StreamStorage, logger: Logger,
        rateLimiter: AuthRateLimiter = AuthRateLimiter(maximumFailures: 0), tlsReport: TLSVerificationReport? = nil, usesTLS: Bool = false,
        directory: (any StreamDirectoryFeed)? = nil, listening: (any StreamListening)? = nil, repeatInterval: Duration = .seconds(10)
    ) {
        self.repeatInterval = repeatInterval
        directoryTap = directory.map { SessionDirectoryTap(feed: $0, outputDirectory: configuration.outputDirectory) }
        listenTap = listening.map { SessionListenTap(listening: $0) }
        self.configuration = configuration
        self.registry = registry
        self.storage = storage
        self.logger = logger
        self.rateLimiter = rateLimiter
        self.tlsReport = tlsReport
        self.usesTLS = usesTLS
        session = ReceiverSession(
            settings: ReceiverSession.Settings(configuration: configuration, usesTLS: usesTLS), settingNames: configuration.settingNames)
    }

    /// The session's state (for tests).
    var sessionState: ReceiverSession.State { session.state }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        loopBound = LoopBoundHandler(handler: NIOLoopBound(self, eventLoop: context.eventLoop), eventLoop: context.eventLoop)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Pipeline events in

    func channelActive(context: ChannelHandlerContext) {
        let peer = context.remoteAddress?.userText ?? "unknown peer"
        peerAddress = context.remoteAddress?.ipAddress ?? peer
        logger[metadataKey: "peer"] = "\(peer)"
        logger.debug("connection accepted")
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        handshakeTimeout = context.eventLoop.scheduleTask(in: TimeAmount(configuration.handshakeTimeout)) {
            loopBound.value.handle(.handshakeTimedOut)
        }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ConnectionRefusedBeforeTLS {
            handle(.closedByTransport)
        } else if event is ConnectionClosedBeforeAnyByte {
            // A port probe or health check on the TLS port: nothing to refuse.
            logger.debug("connection closed without data")
            handle(.closedByTransport)
        } else if let preamble = event as? WirePreambleReceived {
            handle(.preambleReceived(version: preamble.version))
        } else if let idle = event as? IdleStateHandler.IdleStateEvent {
            switch idle {
            case .read: handle(.readIdle)
            case .write: handle(.writeIdle(unixNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9)))
            case .all: break
            }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        handle(.messageReceived(unwrapInboundIn(data), atUnixNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9)))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wire = error as? WireError {
            handle(.inputFailed(wire))
        } else if usesTLS, session.state == .handshaking, error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            // The TLS handshake failed: say why once (a probe that sent nothing, or an already
            // refused connection, adds nothing), count an authentication failure, and close.
            guard session.connection == .open else { return }
            let failure = ReceiverTLSFailure(error, report: tlsReport)
            logger.warning("refused: \(failure.message(naming: configuration.settingNames))", metadata: ["code": "\(failure.isFailedAuthentication ? "AUTHENTICATION_FAILED" : "TLS")"])
            if failure.isFailedAuthentication, rateLimiter.recordFailure(from: peerAddress) {
                logger.warning("too many failed authentications from this address; refusing it for a while")
            }
            handle(.closeQuietly)
        } else {
            let reason = error is NIOSSLError || error is BoringSSLError ? TLSErrorText.reason(of: error) : SystemErrorText.describe(error)
            handle(.transportFailed(reason: reason))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        handshakeTimeout?.cancel()
        // The counts of repeated lines not logged yet get their last line.
        for (summary, line) in repeatedLines.values {
            let count = summary.takeUnlogged()
            if count > 0 { logRepeated(line, count: count) }
        }
        repeatedLines.removeAll()
        handle(.connectionClosed)
        registry.removeConnection(ObjectIdentifier(self))
        context.fireChannelInactive()
    }

    /// Holds reads back while the session has paused reading (NIO's backpressure: the socket is not
    /// read, so TCP's window closes on the sender).
    func read(context: ChannelHandlerContext) {
        if readingPaused {
            readPending = true
        } else {
            context.read()
        }
    }

    /// Tells the sender the receiver is going away, and lets go of the file (for shutdown).
    func shutDown() {
        handle(.shutdownRequested)
    }

    // MARK: - Actions out

    private func handle(_ event: ReceiverSessionEvent) {
        guard !handlingEvents else {
            pendingEvents.append(event)
            return
        }
        handlingEvents = true
        defer { handlingEvents = false }
        var next: ReceiverSessionEvent? = event
        while let current = next {
            for action in session.handle(current) {
                perform(action)
            }
            // Storage callbacks hold this handler (through `loopBound`) while its file has work
            // left; once the session is over (`isFinished`), nothing may keep it alive. Stored
            // properties are read here, not `isFinished`: a getter called on the session copies
            // all of it out of this class first, for every event.
            if case .done = session.state {
                writer = nil
                if session.connection == .closed { loopBound = nil }
            }
            next = pendingEvents.isEmpty ? nil : pendingEvents.removeFirst()
        }
    }

    private func perform(_ action: ReceiverSessionAction) {
        directoryTap?.observe(action, peer: logger[metadataKey: "peer"].map { "\($0)" } ?? "unknown peer")
        listenTap?.observe(action)
        switch action {
        case .send(let message):
            guard let context, context.channel.isActive else { return }
            context.writeAndFlush(wrapOutboundOut(message), promise: nil)
        case .close:
            context?.close(promise: nil)
        case .cancelHandshakeTimeout:
            handshakeTimeout?.cancel()
        case .decide(let hello):
            logger[metadataKey: "stream"] = "\(hello.message.streamName)"
            logger[metadataKey: "stream-id"] = "\(hello.streamID)"
            handle(.helloDecided(decide(on: hello)))
        case .openFile(let hello, let mayCreate):
            openFile(hello, mayCreate: mayCreate)
        case .write(let audio):
            writer?.write(audio)
        case .recordGap(let gap):
            writer?.recordGap(sequence: gap.sequence, sampleTime: gap.sampleTime, length: Int64(clamping: gap.lengthFrames), reason: gap.reason)
        case .recordMarker(let marker):
            writer?.recordMarker(sequence: marker.sequence, sampleTime: marker.sampleTime, label: marker.label)
        case .recordFilledGap(let gap):
            writer?.recordFilledGap(sequence: gap.sequence, sampleTime: gap.sampleTime, length: Int64(clamping: gap.lengthFrames), reason: gap.reason)
        case .finishFile(let end):
            guard let writer else { return }
            let loopBound = self.loopBound
            writer.finish(end) { result in
                loopBound?.run { $0.handle(.fileFinished(result)) }
            }
        case .releaseFile(let mode):
            release(mode)
        case .setReading(let reading):
            readingPaused = !reading
            if reading, readPending, let context {
                readPending = false
                context.read()
            }
        case .forgetStream(let stream):
            registry.release(stream)
        case .streamAccepted, .streamReleased:
            break  // domain events: the taps above are their subscribers
        case .log(let line):
            guard line.repeatable else {
                return logger.log(level: line.level, "\(line.message)", metadata: line.metadata.mapValues { .string($0) })
            }
            let summary = repeatedLines[line.message]?.summary ?? RepeatedEventSummary(interval: repeatInterval)
            repeatedLines[line.message] = (summary, line)
            if let count = summary.record() { logRepeated(line, count: count) }
        }
    }

    /// A repeatable line: the latest one's details, and how many there were since the last line.
    private func logRepeated(_ line: SessionLogLine, count: Int) {
        var metadata = line.metadata.mapValues { Logger.MetadataValue.string($0) }
        if count > 1 { metadata["repeated"] = "\(count) times since the last such line (the latest shown)" }
        logger.log(level: line.level, "\(line.message)", metadata: metadata)
    }

    /// The gate's decision on a valid Hello, from the facts gathered here: the rate limiter, the
    /// token check and, once authenticated, the stream table.
    private func decide(on hello: ValidatedHello) -> HelloDecision {
        let token: HelloGate.TokenCheck
        if let tokens = configuration.authTokens {
            let presented = hello.message.authToken
            token = presented.isEmpty ? .missing : tokens.accepts(presented) ? .accepted : .wrong
        } else {
            token = .notRequired
        }
        let (authentication, record) = gate.authenticate(
            peer: peerAddress, blockedFor: rateLimiter.remainingBlock(for: peerAddress),
            carriesResumeSecret: !hello.message.resumeSecret.isEmpty, token: token)
        switch record {
        case .failure:
            if rateLimiter.recordFailure(from: peerAddress) {
                logger.warning("too many failed authentications from this address; refusing it for a while")
            }
        case .success:
            rateLimiter.recordSuccess(from: peerAddress)
        case .nothing:
            break
        }
        let reservation = authentication == .admitted ? registry.reserve(hello.streamID, maximumStreams: configuration.maximumStreams) : nil
        return gate.decision(authentication, reservation: reservation, streamID: hello.streamID, maximumStreams: configuration.maximumStreams)
    }

    /// Opens (continues or creates) the stream's file off the event loop, then reports back on it.
    private func openFile(_ hello: ValidatedHello, mayCreate: Bool) {
        guard let loopBound else { return }
        let peer = logger[metadataKey: "peer"].map { "\($0)" } ?? "unknown peer"
        let events = StreamWriterEvents(
            durable: { position in loopBound.run { $0.handle(.durable(position)) } },
            failed: { error, file in loopBound.run { $0.handle(.storageFailed(error, file: file)) } },
            segmentStarted: { path, naming in loopBound.run { $0.handle(.segmentStarted(path: path, naming: naming)) } })
        // From a rate-limited address only a stream the Hello proves it owns may be continued.
        let gate = self.gate
        let identity = HelloGate.identity(
            certificate: tlsReport?.certificateFingerprint, tokensRequired: configuration.authTokens != nil, token: hello.message.authToken)
        let owner = StreamOwner(secret: hello.message.resumeSecret, identity: identity)
        storage.open(hello, mayCreate: gate.mayCreate(sessionAllows: mayCreate), owner: owner, peer: peer, events: events) { result in
            loopBound.run { handler in
                switch result {
                case .success(let opened):
                    handler.writer = opened.file
                    handler.handle(.fileOpened(
                        path: opened.file.path, resume: opened.resume, resumed: opened.resumed, naming: opened.naming, continuation: opened.continuation))
                case .failure(let error):
                    handler.handle(.fileOpenFailed(gate.openFailed(error)))
                }
            }
        }
    }

    private func release(_ mode: FileRelease) {
        guard let writer else { return }
        self.writer = nil
        let loopBound = self.loopBound
        switch mode {
        case .keepResumable, .finalizeResumable:
            writer.detach(finalizing: mode == .finalizeResumable) {
                loopBound?.run { $0.handle(.fileReleased(.success(nil))) }
            }
        case .finalizeIncomplete:
            writer.finish(nil) { result in
                loopBound?.run { $0.handle(.fileReleased(result.map { Optional($0) })) }
            }
        }
    }

}

/// A session handler reachable from another thread: work for it runs on its event loop.
struct LoopBoundHandler: Sendable {
    let handler: NIOLoopBound<ReceiverSessionHandler>
    let eventLoop: any EventLoop

    func run(_ body: @escaping @Sendable (ReceiverSessionHandler) -> Void) {
        let handler = self.handler
        eventLoop.execute { body(handler.value) }
    }
}

extension ReceiverSession.Settings {
    /// The session's settings from the receiver's configuration.
    init(configuration: ReceiverConfiguration, usesTLS: Bool) {
        self.init(
            heartbeatIntervalMilliseconds: UInt32(clamping: TimeAmount(configuration.heartbeatInterval).nanoseconds / 1_000_000),
            maximumFrameBytes: configuration.maximumFrameBytes,
            keepsInterruptedStreams: configuration.resumeWindow > .zero,
            resumeWindow: configuration.resumeWindow,
            usesTLS: usesTLS,
            // In NIO's words for an amount of time: `10 s`, `250 ms`.
            handshakeTimeoutText: "\(TimeAmount(configuration.handshakeTimeout))",
            idleTimeoutText: "\(TimeAmount(configuration.idleTimeout))"
        )
    }
}
