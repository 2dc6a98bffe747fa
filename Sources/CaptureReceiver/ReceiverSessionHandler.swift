import CaptureErrorText
import CAF
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOSSL
import CaptureSecurity

/// Drives one sender's connection: checks every message with `ReceiverStreamState`, opens the
/// stream's file, hands audio to its `StreamWriter`, acknowledges what is durable, finishes the file
/// at end of stream, and answers bad input with an Error frame and a close. Nothing it does blocks the
/// event loop: files are created and written on the `WriterPool`'s threads.
final class ReceiverSessionHandler: ChannelInboundHandler {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private let configuration: ReceiverConfiguration
    private let registry: StreamRegistry
    private let writerPool: WriterPool
    private var logger: Logger
    private var state: ReceiverStreamState
    private var context: ChannelHandlerContext?
    private var peer = "unknown peer"
    private var handshakeTimeout: Scheduled<Void>?
    private var writer: StreamWriter?
    private var hello: ValidatedHello?
    private var streamID: UUID?
    private var fileName = ""
    private var openedAt = Date()
    private var lastDurable = DurablePosition(sequence: 0, sampleTime: 0)
    private var readingPaused = false
    private var finishing = false
    private var finished = false
    private var closing = false
    /// The file being reopened or created off the event loop; the connection may close meanwhile.
    private var opening = false
    private var connectionGone = false
    /// The detached file this connection resumes, if any.
    private var resumingPath: String?
    /// The receiver is shutting down: an open file is finalized (and stays resumable).
    private var shuttingDown = false

    /// Pending writer bytes above which the connection stops reading, and below which it reads again.
    private static let pauseReadingAbove = 8 << 20
    private static let resumeReadingBelow = 2 << 20

    private let rateLimiter: AuthRateLimiter
    private let tlsReport: TLSVerificationReport?
    private let usesTLS: Bool
    private var peerAddress = "unknown"

    init(
        configuration: ReceiverConfiguration, registry: StreamRegistry, writerPool: WriterPool, logger: Logger,
        rateLimiter: AuthRateLimiter = AuthRateLimiter(maximumFailures: 0), tlsReport: TLSVerificationReport? = nil, usesTLS: Bool = false
    ) {
        self.rateLimiter = rateLimiter
        self.tlsReport = tlsReport
        self.usesTLS = usesTLS
        self.configuration = configuration
        self.registry = registry
        self.writerPool = writerPool
        self.logger = logger
        state = ReceiverStreamState()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        peer = context.remoteAddress?.userText ?? "unknown peer"
        peerAddress = context.remoteAddress?.ipAddress ?? peer
        logger[metadataKey: "peer"] = "\(peer)"
        logger.debug("connection accepted")
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        handshakeTimeout = context.eventLoop.scheduleTask(in: configuration.handshakeTimeout) {
            loopBound.value.fail(.timeout("the handshake did not complete within \(loopBound.value.configuration.handshakeTimeout)"))
        }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ConnectionRefusedBeforeTLS {
            closing = true
        } else if event is ConnectionClosedBeforeAnyByte {
            // A port probe or health check on the TLS port: nothing to refuse.
            logger.debug("connection closed without data")
            closing = true
        } else if let preamble = event as? WirePreambleReceived {
            do { try state.receivePreamble(version: preamble.version) } catch { fail(.wire(error)) }
        } else if let idle = event as? IdleStateHandler.IdleStateEvent {
            switch idle {
            case .read:
                fail(.timeout("no data from the sender for \(configuration.idleTimeout); the connection is considered dead"))
            case .write:
                send(.heartbeat(.with { $0.sentUnixNs = Int64(Date().timeIntervalSince1970 * 1e9) }))
            case .all:
                break
            }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = unwrapInboundIn(data)
        let action: ReceiverAction
        do {
            action = try state.receive(message)
        } catch {
            fail(.wire(error))
            return
        }
        switch action {
        case .decideOnHello(let hello):
            decide(on: hello, context: context)
        case .writeAudio(let audio):
            guard let writer else { return }
            let frames = writer.format.isLinearPCM ? Int(audio.packetCount) : Int(audio.frameCount)
            writer.write(
                sequence: audio.sequence, payload: audio.payload, packetSizes: audio.packetSizes,
                frameCount: frames, endSampleTime: audio.firstSampleTime + Int64(frames)
            )
            pauseReadingIfBehind(context: context)
        case .recordGap(let gap):
            logger.warning("gap in stream", metadata: [
                "sample": "\(gap.sampleTime)", "frames": "\(gap.lengthFrames)", "reason": "\(gap.reason)",
            ])
            writer?.recordGap(sequence: gap.sequence, sampleTime: gap.sampleTime, length: Int64(gap.lengthFrames), reason: gap.reason)
        case .ignoreDuplicate:
            sendAck()
        case .heartbeat:
            break
        case .finishStream(let end):
            finish(end)
        case .peerError(let error):
            logger.warning("sender reported an error", metadata: ["code": "\(error.code)", "message": "\(error.message)"])
            if error.fatal { close() }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wire = error as? WireError {
            fail(.wire(wire))
        } else if usesTLS, hello == nil, error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            // Already refused and logged (or a probe that sent nothing): the TLS handler's report of
            // the unfinished handshake adds nothing.
            guard !closing else { return }
            let explained = ReceiverTLSFailure.explain(error, report: tlsReport)
            logger.warning("refused: \(explained.reason)", metadata: ["code": "\(explained.authentication ? "AUTHENTICATION_FAILED" : "TLS")"])
            if explained.authentication, rateLimiter.recordFailure(from: peerAddress) {
                logger.warning("too many failed authentications from this address; refusing it for a while")
            }
            closing = true
            context.close(promise: nil)
        } else {
            let reason = error is NIOSSLError || error is BoringSSLError ? TLSErrorText.reason(of: error) : SystemErrorText.describe(error)
            logger.warning("connection error", metadata: ["error": "\(reason)"])
            close()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        handshakeTimeout?.cancel()
        connectionGone = true
        if let writer, !finished, !finishing {
            finishing = true
            if let id = streamID { Self.keepResumable(writer, stream: id, configuration: configuration, registry: registry, logger: logger, finalizing: shuttingDown) }
        } else if let id = streamID, !finishing, !opening {
            if let resumingPath {
                registry.detach(id, path: resumingPath)
            } else {
                registry.release(id)
            }
        }
        registry.removeConnection(ObjectIdentifier(self))
        context.fireChannelInactive()
    }

    // MARK: - Handshake

    private func decide(on hello: ValidatedHello, context: ChannelHandlerContext) {
        self.hello = hello
        logger[metadataKey: "stream"] = "\(hello.message.streamName)"
        logger[metadataKey: "stream-id"] = "\(hello.streamID)"
        if let refusal = authenticate(hello) {
            state.reject()
            return fail(.refused(.authenticationFailed, refusal))
        }
        switch registry.reserve(hello.streamID, maximumStreams: configuration.maximumStreams) {
        case .reserved:
            break
        case .resumable(let path):
            resumingPath = path
        case .busy:
            state.reject()
            return fail(.refused(.streamBusy, "stream \(hello.streamID) is already being received on another connection"))
        case .full:
            state.reject()
            return fail(.refused(.tooManyStreams, "the receiver already records \(configuration.maximumStreams) streams; try again later or raise --max-streams"))
        }
        streamID = hello.streamID
        let start = hello.message.startTimeUnixNs > 0
            ? Date(timeIntervalSince1970: Double(hello.message.startTimeUnixNs) / 1e9) : Date()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let configuration = self.configuration
        let peer = self.peer
        let resumingPath = self.resumingPath
        opening = true
        let events = StreamWriterEvents(
            durable: { position in eventLoop.execute { loopBound.value.durable(position) } },
            failed: { error in eventLoop.execute { loopBound.value.storageFailed(error) } }
        )
        if let resumingPath {
            writerPool.reopen(path: resumingPath, hello: hello, configuration: configuration, events: events) { result in
                eventLoop.execute { loopBound.value.opened(result, hello: hello) }
            }
        } else {
            writerPool.create(hello: hello, start: start, peer: peer, configuration: configuration, events: events) { result in
                eventLoop.execute { loopBound.value.opened(result.map { ($0, ResumePoint.newStream(hello)) }, hello: hello) }
            }
        }
    }

    /// Checks the peer's rate limit and the Hello's token; the reason for a refusal, or nil.
    private func authenticate(_ hello: ValidatedHello) -> String? {
        if let remaining = rateLimiter.remainingBlock(for: peerAddress) {
            return "too many failed authentication attempts from \(peerAddress); try again in \(Int(remaining.rounded(.up))) s"
        }
        guard let tokens = configuration.authTokens else { return nil }
        let presented = hello.message.authToken
        let refusal: String?
        if presented.isEmpty {
            refusal = "missing token: this receiver requires a token; give capture-send --token-file FILE or set CAPTURE_TOKEN"
        } else if !tokens.accepts(presented) {
            refusal = "wrong token: the token is not one this receiver accepts; check the sender's --token-file or CAPTURE_TOKEN"
        } else {
            refusal = nil
        }
        if refusal != nil {
            if rateLimiter.recordFailure(from: peerAddress) {
                logger.warning("too many failed authentications from this address; refusing it for a while")
            }
        } else {
            rateLimiter.recordSuccess(from: peerAddress)
        }
        return refusal
    }

    private func opened(_ result: Result<(StreamWriter, ResumePoint), StorageError>, hello: ValidatedHello) {
        opening = false
        switch result {
        case .failure(let error):
            if let id = streamID {
                if let resumingPath { registry.detach(id, path: resumingPath) } else { registry.release(id) }
            }
            streamID = nil
            state.reject()
            if case .formatChanged = error {
                fail(.refused(.badFormat, error.description))
            } else {
                logger.error("cannot store the stream; the sender keeps its audio and retries", metadata: ["error": "\(error)"])
                fail(.refused(.storageFailed, "the receiver cannot store the stream now: \(error.description); the sender keeps the audio and retries"))
            }
        case .success(let (writer, resume)):
            guard !closing, !connectionGone else {
                finishing = true
                if let id = streamID { Self.keepResumable(writer, stream: id, configuration: configuration, registry: registry, logger: logger, finalizing: shuttingDown) }
                return
            }
            self.writer = writer
            fileName = (writer.path as NSString).lastPathComponent
            openedAt = Date()
            do {
                try state.accept(resumingAt: resume)
            } catch {
                return fail(.wire(error))
            }
            lastDurable = DurablePosition(sequence: resume.nextSequence - 1, sampleTime: resume.nextSampleTime)
            handshakeTimeout?.cancel()
            send(.helloAccepted(.with {
                $0.nextSequence = resume.nextSequence
                $0.nextSampleTime = resume.nextSampleTime
                $0.heartbeatIntervalMs = UInt32(configuration.heartbeatInterval.nanoseconds / 1_000_000)
                $0.maxFrameBytes = UInt32(configuration.maximumFrameBytes)
                $0.fileName = fileName
                $0.resumed = resumingPath != nil
            }))
            logger.info(resumingPath != nil ? "stream resumed" : "stream opened", metadata: [
                "file": "\(writer.path)", "format": "\(hello.format)", "source": "\(hello.message.sourceHost)",
                "next-sequence": "\(resume.nextSequence)",
            ])
        }
    }

    // MARK: - Durability and acks

    private func durable(_ position: DurablePosition) {
        lastDurable = position
        sendAck()
        if readingPaused, let writer, writer.pendingBytes < Self.resumeReadingBelow, let context {
            readingPaused = false
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            context.read()
        }
    }

    private func sendAck() {
        guard lastDurable.sequence > 0 else { return }
        send(.ack(.with {
            $0.durableSequence = lastDurable.sequence
            $0.durableSampleTime = lastDurable.sampleTime
        }))
    }

    private func pauseReadingIfBehind(context: ChannelHandlerContext) {
        guard !readingPaused, let writer, writer.pendingBytes > Self.pauseReadingAbove else { return }
        readingPaused = true
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
    }

    private func storageFailed(_ error: StorageError) {
        logger.error("cannot write the stream", metadata: ["error": "\(error)"])
        fail(.refused(.storageFailed, "the receiver cannot write \(fileName): \(error.description)"))
    }

    // MARK: - End of stream

    private func finish(_ end: Capture_V1_EndOfStream) {
        guard let writer, !finishing else { return }
        finishing = true
        let loopBound = context.map { NIOLoopBound(self, eventLoop: $0.eventLoop) }
        let eventLoop = context?.eventLoop
        writer.finish(remainderFrames: Int(end.remainderFrames)) { result in
            eventLoop?.execute { loopBound?.value.finished(result, reason: end.reason) }
        }
    }

    private func finished(_ result: Result<FinishedFile, StorageError>, reason: String) {
        switch result {
        case .success(let file):
            finished = true
            if let streamID { registry.release(streamID) }
            var metadata = Self.metadata(file)
            metadata["duration"] = "\(String(format: "%.3f", Double(file.frames) / (writer?.format.sampleRate ?? 1))) s"
            metadata["reason"] = "\(reason)"
            logger.notice("stream closed", metadata: metadata)
            send(.endAccepted(.with {
                $0.fileName = fileName
                $0.totalFrames = file.frames
                $0.totalPackets = UInt64(file.packets)
            }))
            close()
        case .failure(let error):
            // Not finished: the file stays resumable at its last durable position.
            finishing = false
            if connectionGone {
                finishing = true
                if let writer, let streamID { Self.keepResumable(writer, stream: streamID, configuration: configuration, registry: registry, logger: logger, finalizing: shuttingDown) }
            } else {
                fail(.refused(.storageFailed, "could not finish \(fileName): \(error.description)"))
            }
        }
    }

    /// The connection ended before EndOfStream: make what was written durable and leave the file
    /// open for the stream's sender to resume (or, with a resume window of 0, finalize it now).
    private static func keepResumable(
        _ writer: StreamWriter, stream: UUID, configuration: ReceiverConfiguration, registry: StreamRegistry, logger: Logger,
        finalizing: Bool
    ) {
        let path = writer.path
        if configuration.resumeWindow <= 0 {
            logger.warning("connection lost before end of stream; finalizing the file with what arrived", metadata: ["file": "\(path)"])
            writer.finish(remainderFrames: 0) { result in
                switch result {
                case .success(let file): logger.notice("stream closed (incomplete)", metadata: Self.metadata(file))
                case .failure(let error): logger.error("could not finalize the file", metadata: ["error": "\(error)"])
                }
                registry.release(stream)
            }
            return
        }
        writer.detach(finalizing: finalizing) {
            if finalizing {
                logger.notice("shutting down: file finalized; its sender can resume it in the same file after a restart", metadata: [
                    "file": "\(path)", "resume-window-s": "\(Int(configuration.resumeWindow))",
                ])
            } else {
                logger.warning("connection lost before end of stream; the file stays open for the sender to resume", metadata: [
                    "file": "\(path)", "resume-window-s": "\(Int(configuration.resumeWindow))",
                ])
            }
            registry.detach(stream, path: path)
        }
    }

    private static func metadata(_ file: FinishedFile) -> Logger.Metadata {
        ["path": "\(file.path)", "frames": "\(file.frames)", "bytes": "\(file.bytes)", "gaps": "\(file.gaps)"]
    }

    // MARK: - Errors and closing

    /// Why the receiver ends a connection.
    enum Failure {
        case wire(WireError)
        case refused(Capture_V1_Error.Code, String)
        case timeout(String)
    }

    /// Ends the connection for `failure`: logs it with the peer, sends an Error frame when the peer
    /// can read one, and closes.
    func fail(_ failure: Failure) {
        guard !closing else { return }
        let frame: Capture_V1_Error?
        switch failure {
        case .wire(.truncatedPreamble(receivedBytes: 0)) where usesTLS:
            // Over TLS 1.3 a sender that rejects this receiver's certificate hangs up after the
            // handshake, before sending anything.
            logger.warning("refused: the sender closed the TLS connection before sending anything; it may not trust this receiver's certificate (check its --ca or --pin and the host name it connects to)", metadata: ["code": "TLS"])
            frame = nil
        case .wire(.truncatedPreamble(receivedBytes: 0)):
            // A plaintext connection that closed without a byte: a port probe or health check.
            logger.debug("connection closed without data")
            frame = nil
        case .wire(let error):
            logger.warning("refused: \(error.description)", metadata: ["code": "\(error.code)"])
            frame = error.peerUnderstandsErrorFrame ? error.errorFrame : nil
        case .refused(let code, let message):
            logger.warning("refused: \(message)", metadata: ["code": "\(code)"])
            frame = .with { $0.code = code; $0.message = message; $0.fatal = true }
        case .timeout(let message):
            logger.warning("\(message)", metadata: ["code": "TIMEOUT"])
            frame = .with { $0.code = .timeout; $0.message = message; $0.fatal = true }
        }
        if let frame { send(.error(frame)) }
        close()
    }

    /// Tells the sender the receiver is going away and closes (for shutdown).
    func shutDown() {
        shuttingDown = true
        fail(.refused(.shuttingDown, "the receiver is shutting down; reconnect later"))
    }

    private func send(_ message: WireMessage) {
        guard let context, context.channel.isActive else { return }
        context.writeAndFlush(wrapOutboundOut(message), promise: nil)
    }

    private func close() {
        guard !closing, let context else { return }
        closing = true
        context.close(promise: nil)
    }
}
