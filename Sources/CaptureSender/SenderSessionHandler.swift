import CaptureErrorText
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import CaptureSecurity

/// What the receiver confirmed at the end of a stream.
public struct StreamSummary: Sendable, Equatable {
    /// The file the receiver wrote, relative to its output folder.
    public var fileName: String
    /// Frames in the file.
    public var totalFrames: Int64
    /// Packets in the file.
    public var totalPackets: UInt64

    /// The stream ended before any audio was captured: nothing was sent and no file was made.
    public var nothingCaptured: Bool { fileName.isEmpty && totalFrames == 0 && totalPackets == 0 }
}

/// How one connection ended.
enum ConnectionOutcome: Sendable, Equatable {
    /// The receiver confirmed the whole stream.
    case delivered(StreamSummary)
    /// The connection ended first. `retry`: whether reconnecting can help (a lost connection, a
    /// receiver that is busy, shutting down or cannot write) or not (a refused format, a failed
    /// authentication, a resume the receiver cannot make). `streamed`: whether it got past the handshake.
    case interrupted(SenderError, retry: Bool, streamed: Bool)
    /// The receiver cannot resume the stream from what this sender holds (it finalized the stream's
    /// file after its resume window, or lost it): deliver the rest as a new stream that continues it.
    /// `receiverHoldsUntil`: when the receiver still holds the stream, but only up to before the
    /// oldest audio this sender holds, the sample index where its recording ends; the audio from
    /// there to the oldest held was acknowledged and then lost by the receiver.
    case cannotResume(SenderError, receiverHoldsUntil: Int64?)
}

/// The I/O shell of a `SenderSession`: feeds it the connection's events (channel up, frames read,
/// writability, idle timers, the packet log growing, fetched entries) and performs its actions
/// (writes frames, fetches entries through a `PacketFetcher` so that spool reads never run on the
/// event loop, releases acknowledged entries from the log, completes `done` with the outcome). TLS is
/// explained here, where the handshake's report is.
final class SenderSessionHandler: ChannelInboundHandler {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private var session: SenderSession
    private let log: PacketLog
    /// Whose acknowledgement cursor this connection moves.
    private let destination: LogDestination
    private var listening: PacketLog.ListenerToken?
    private let fetcher: PacketFetcher
    private let done: EventLoopPromise<ConnectionOutcome>
    private let onAccepted: @Sendable (Capture_V1_HelloAccepted) -> Void
    private var logger: Logger
    private var context: ChannelHandlerContext?
    private var pumpScheduled = false
    private let security: Security?
    private var tlsHandshakeDone = false
    private var tlsHandshakeTimeout: Scheduled<Void>?
    /// Where the foreground destinations stand, for a background destination's pacing.
    private let foreground: @Sendable () -> SendPacing.Foreground
    /// The pacing ticker, while the connection is up and the session is paced.
    private var pacingTicker: RepeatedTask?

    /// The TLS side of a connection, for explaining its failures.
    struct Security {
        /// What the receiver's certificate check found.
        var report: TLSVerificationReport
        /// The host name or address the user gave.
        var host: String
        /// Time allowed for the TLS handshake.
        var handshakeTimeout: Duration
    }

    init(
        hello: Capture_V1_Hello, log: PacketLog, destination: LogDestination = .main, fetcher: PacketFetcher, windowBytes: Int, done: EventLoopPromise<ConnectionOutcome>, logger: Logger,
        security: Security? = nil, pacing: SendPacing = .unpaced, foreground: @escaping @Sendable () -> SendPacing.Foreground = { .finished },
        onAccepted: @escaping @Sendable (Capture_V1_HelloAccepted) -> Void = { _ in }
    ) {
        self.security = security
        self.foreground = foreground
        self.onAccepted = onAccepted
        self.log = log
        self.destination = destination
        self.fetcher = fetcher
        self.done = done
        self.logger = logger
        session = SenderSession(hello: hello, windowBytes: windowBytes, oldestHeld: log.oldestKeptSequence, log: Self.position(of: log), pacing: pacing)
    }

    private static func position(of log: PacketLog) -> PacketLogPosition {
        PacketLogPosition(appended: log.appended, end: log.streamEnd)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        listening = log.addListener {
            eventLoop.execute { loopBound.value.schedulePump() }
        }
        if let security {
            tlsHandshakeTimeout = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(security.handshakeTimeout)) { [self] in
                guard !tlsHandshakeDone else { return }
                handle(.transportFailed(.timedOut("the TLS handshake with the receiver did not complete within \(security.handshakeTimeout.components.seconds) s"), retry: true))
            }
        }
        if session.pacing.needsTicks {
            let interval = TimeAmount.nanoseconds(Int64(SendPacing.tickInterval))
            pacingTicker = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: interval) { _ in loopBound.value.pacingTick() }
        }
        handle(.channelActive)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        handle(.received(unwrapInboundIn(data), writable: context.channel.isWritable, log: Self.position(of: log)))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { handle(.sendable(writable: true, log: Self.position(of: log))) }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted(let protocolName) = tlsEvent {
            tlsHandshakeDone = true
            tlsHandshakeTimeout?.cancel()
            logger.debug("TLS handshake completed", metadata: ["alpn": "\(protocolName ?? "none")"])
        } else if let idle = event as? IdleStateHandler.IdleStateEvent {
            switch idle {
            case .write: handle(.writeIdle(unixNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9)))
            case .read: handle(.readIdle)
            case .all: break
            }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wire = error as? WireError {
            handle(.transportFailed(.protocolViolation(wire), retry: SenderSession.isRetryable(wire)))
        } else if let security {
            // A certificate either side cannot trust, or a receiver that does not speak TLS, are
            // settings to fix: reconnecting cannot help. Other TLS errors are connection faults.
            let explained = SenderTLSFailure.explain(
                error, report: security.report, host: security.host, handshakeDone: tlsHandshakeDone)
            if case .tls = explained {
                handle(.transportFailed(explained, retry: false))
            } else {
                handle(.transportFailed(explained, retry: true))
            }
        } else {
            handle(.transportFailed(.connectionLost(.transport(reason: SystemErrorText.describe(error))), retry: true))
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopListening()
        self.context = nil
    }

    private func stopListening() {
        if let listening { log.removeListener(listening) }
        listening = nil
        pacingTicker?.cancel()
        pacingTicker = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopListening()
        tlsHandshakeTimeout?.cancel()
        if let security, !tlsHandshakeDone {
            handle(.transportFailed(SenderTLSFailure.explain(
                ChannelError.eof, report: security.report, host: security.host, handshakeDone: false), retry: false))
        }
        handle(.channelInactive(plainTCP: security == nil))
        context.fireChannelInactive()
    }

    private func pacingTick() {
        guard let context, context.channel.isActive else { return }
        handle(.paced(now: MonotonicClock.nanoseconds(), foreground: foreground(), writable: context.channel.isWritable, log: Self.position(of: log)))
        if !session.pacing.needsTicks {
            pacingTicker?.cancel()
            pacingTicker = nil
        }
    }

    private func schedulePump() {
        guard !pumpScheduled else { return }
        pumpScheduled = true
        context?.eventLoop.assumeIsolated().execute { [self] in
            pumpScheduled = false
            guard let context, context.channel.isActive else { return }
            handle(.sendable(writable: context.channel.isWritable, log: Self.position(of: log)))
        }
    }

    private func handle(_ event: SenderSession.Event) {
        for action in session.handle(event) { perform(action) }
    }

    private func perform(_ action: SenderSession.Action) {
        switch action {
        case .send(let message):
            guard let context, context.channel.isActive else { return }
            context.write(wrapOutboundOut(message), promise: nil)
        case .flush:
            context?.flush()
        case .fetch(let sequence, let maxCount):
            guard let context else { return }
            fetcher.fetch(from: sequence, maxCount: maxCount, on: context.eventLoop).assumeIsolated().whenComplete { [self] result in
                switch result {
                case .success(let packets):
                    handle(.fetched(packets, writable: self.context?.channel.isWritable ?? false, log: Self.position(of: log)))
                case .failure(let error):
                    let reason = (error as? SpoolError)?.description ?? "\(error)"
                    logger.error("the spool cannot give back audio to send", metadata: ["from-sequence": "\(sequence)", "error": "\(reason)"])
                    handle(.fetchFailed(from: sequence, reason: reason))
                }
            }
        case .acknowledge(let sequence):
            log.acknowledge(through: sequence, for: destination)
        case .markSent(let sequence):
            log.markSent(through: sequence, for: destination)
        case .accepted(let accepted):
            onAccepted(accepted)
            let resume = StreamPosition(nextSequence: accepted.nextSequence, nextSampleTime: accepted.nextSampleTime)
            let appended = log.lastSequence
            logger.info("streaming", metadata: [
                "file": "\(accepted.fileName)", "resumed": "\(accepted.resumed)", "next-sequence": "\(accepted.nextSequence)",
                "backlog-sequences": "\(appended - min(resume.lastSequence, appended))",
            ])
        case .warn(let code, let message):
            logger.warning("the receiver reported a problem", metadata: ["code": "\(code)", "message": "\(message)"])
        case .complete(let outcome):
            done.succeed(outcome)
        case .close:
            context?.close(promise: nil)
        }
    }
}
