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
enum ConnectionOutcome: Sendable {
    /// The receiver confirmed the whole stream.
    case delivered(StreamSummary)
    /// The connection ended first. `retry`: whether reconnecting can help (a lost connection, a
    /// receiver that is busy, shutting down or cannot write) or not (a refused format, a failed
    /// authentication, a resume the receiver cannot make). `streamed`: whether it got past the handshake.
    case interrupted(SenderError, retry: Bool, streamed: Bool)
    /// The receiver cannot resume the stream from what this sender holds (it finalized the stream's
    /// file after its resume window, or lost it): deliver the rest as a new stream that continues it.
    case cannotResume(SenderError)
}

/// Drives the sender's side of one connection: sends Hello, then the packet log's entries from the
/// receiver's resume point within a send window, releases what the receiver acknowledges, and sends
/// EndOfStream once the log has ended and everything was sent. Completes `done` with the receiver's
/// summary, or with why the connection ended and whether reconnecting can help.
final class SenderSessionHandler: ChannelInboundHandler {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private let hello: Capture_V1_Hello
    private let log: PacketLog
    private let windowBytes: Int
    private let done: EventLoopPromise<ConnectionOutcome>
    private let onAccepted: @Sendable (Capture_V1_HelloAccepted) -> Void
    private var streamed = false
    private var logger: Logger
    private var state: SenderStreamState
    private var context: ChannelHandlerContext?
    private var nextToSend: UInt64 = WireProtocol.firstSequence
    /// Sequences sent and not yet acknowledged, with their byte counts, oldest first.
    private var inFlight: [(sequence: UInt64, bytes: Int)] = []
    private var inFlightHead = 0
    private var inFlightBytes = 0
    private var endSent = false
    private var completed = false
    private var pumpScheduled = false
    private var accepted = false
    private let security: Security?
    private var tlsHandshakeDone = false
    private var tlsHandshakeTimeout: Scheduled<Void>?

    /// The TLS side of a connection, for explaining its failures.
    struct Security {
        /// What the receiver's certificate check found.
        var report: TLSVerificationReport
        /// The host name or address the user gave.
        var host: String
        /// Time allowed for the TLS handshake.
        var handshakeTimeout: TimeAmount
    }

    init(
        hello: Capture_V1_Hello, log: PacketLog, windowBytes: Int, done: EventLoopPromise<ConnectionOutcome>, logger: Logger,
        security: Security? = nil, onAccepted: @escaping @Sendable (Capture_V1_HelloAccepted) -> Void = { _ in }
    ) {
        self.security = security
        self.hello = hello
        self.onAccepted = onAccepted
        self.log = log
        self.windowBytes = windowBytes
        self.done = done
        self.logger = logger
        state = SenderStreamState(
            oldestHeldSequence: log.oldestKeptSequence, nextNewSequence: log.lastSequence + 1,
            endedBefore: log.streamEnd.map { SenderStreamState.StreamEnd(lastSequence: log.lastSequence, endSampleTime: $0.endSampleTime) })
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        log.addListener {
            eventLoop.execute { loopBound.value.schedulePump() }
        }
        do {
            try state.helloSent()
        } catch {
            return fail(.protocolViolation(error.description), retry: false)
        }
        if let security {
            tlsHandshakeTimeout = context.eventLoop.assumeIsolated().scheduleTask(in: security.handshakeTimeout) { [self] in
                guard !tlsHandshakeDone else { return }
                fail(.timedOut("the TLS handshake with the receiver did not complete within \(security.handshakeTimeout.nanoseconds / 1_000_000_000) s"), retry: true)
                self.context?.close(promise: nil)
            }
        }
        context.writeAndFlush(wrapOutboundOut(.hello(hello)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let event: SenderEvent
        do {
            event = try state.receive(unwrapInboundIn(data))
        } catch {
            if context.channel.isActive { context.writeAndFlush(wrapOutboundOut(.error(error.errorFrame)), promise: nil) }
            if case .cannotResume = error {
                complete(.cannotResume(.protocolViolation(error.description)))
                context.close(promise: nil)
                return
            }
            fail(.protocolViolation(error.description), retry: Self.isRetryable(error))
            context.close(promise: nil)
            return
        }
        switch event {
        case .accepted(let accepted):
            self.accepted = true
            nextToSend = accepted.nextSequence
            streamed = true
            if accepted.nextSequence > 1 { log.acknowledge(through: accepted.nextSequence - 1) }
            onAccepted(accepted)
            logger.info("streaming", metadata: [
                "file": "\(accepted.fileName)", "resumed": "\(accepted.resumed)", "next-sequence": "\(accepted.nextSequence)",
                "backlog-sequences": "\(log.lastSequence + 1 - accepted.nextSequence)",
            ])
            pump()
        case .acknowledged(let ack):
            log.acknowledge(through: ack.durableSequence)
            while inFlightHead < inFlight.count, inFlight[inFlightHead].sequence <= ack.durableSequence {
                inFlightBytes -= inFlight[inFlightHead].bytes
                inFlightHead += 1
            }
            if inFlightHead > 4096 {
                inFlight.removeFirst(inFlightHead)
                inFlightHead = 0
            }
            pump()
        case .staleAck, .heartbeat:
            break
        case .endAccepted(let accepted):
            log.acknowledge(through: log.lastSequence)
            complete(.delivered(StreamSummary(fileName: accepted.fileName, totalFrames: accepted.totalFrames, totalPackets: accepted.totalPackets)))
            context.close(promise: nil)
        case .peerError(let error):
            if error.fatal, error.code == .sequenceGap, !streamed {
                complete(.cannotResume(.refused(code: "\(error.code)", message: error.message)))
                context.close(promise: nil)
            } else if error.fatal, error.code == .rateLimited {
                fail(.rateLimited(message: error.message, retryAfter: Double(error.retryAfterMs) / 1_000), retry: true)
                context.close(promise: nil)
            } else if error.fatal {
                fail(.refused(code: "\(error.code)", message: error.message), retry: Self.isRetryable(error.code, afterHandshake: streamed))
                context.close(promise: nil)
            } else {
                logger.warning("the receiver reported a problem", metadata: ["code": "\(error.code)", "message": "\(error.message)"])
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted(let protocolName) = tlsEvent {
            tlsHandshakeDone = true
            tlsHandshakeTimeout?.cancel()
            logger.debug("TLS handshake completed", metadata: ["alpn": "\(protocolName ?? "none")"])
        } else if let idle = event as? IdleStateHandler.IdleStateEvent {
            switch idle {
            case .write:
                context.writeAndFlush(wrapOutboundOut(.heartbeat(.with { $0.sentUnixNs = Int64(Date().timeIntervalSince1970 * 1e9) })), promise: nil)
            case .read:
                fail(.timedOut("no data from the receiver for too long; the connection is considered dead"), retry: true)
                context.close(promise: nil)
            case .all:
                break
            }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wire = error as? WireError {
            fail(.protocolViolation(wire.description), retry: Self.isRetryable(wire))
        } else if let security {
            // A certificate either side cannot trust, or a receiver that does not speak TLS, are
            // settings to fix: reconnecting cannot help. Other TLS errors are connection faults.
            let explained = SenderTLSFailure.explain(error, report: security.report, host: security.host, handshakeDone: tlsHandshakeDone)
            if case .tls = explained {
                fail(explained, retry: false)
            } else {
                fail(explained, retry: true)
            }
        } else {
            fail(.connectionLost(SystemErrorText.describe(error)), retry: true)
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        tlsHandshakeTimeout?.cancel()
        if let security, !tlsHandshakeDone {
            fail(SenderTLSFailure.explain(ChannelError.eof, report: security.report, host: security.host, handshakeDone: false), retry: false)
        } else if !accepted, security == nil, !streamed {
            fail(.connectionLost("the receiver closed the connection before accepting the stream; if it requires TLS, connect with --tls"), retry: true)
        }
        fail(.connectionLost("the receiver closed the connection"), retry: true)
        context.fireChannelInactive()
    }

    private func schedulePump() {
        guard !pumpScheduled else { return }
        pumpScheduled = true
        context?.eventLoop.assumeIsolated().execute { [self] in
            pumpScheduled = false
            pump()
        }
    }

    /// Sends what the window and the channel allow, then EndOfStream when everything is sent.
    private func pump() {
        guard let context, context.channel.isActive, state.phase == .streaming else { return }
        var wrote = false
        while context.channel.isWritable, inFlightBytes < windowBytes {
            let batch = log.entries(from: nextToSend, maxCount: 32)
            if batch.isEmpty { break }
            for entry in batch {
                do {
                    try state.sent(sequence: entry.sequence)
                } catch {
                    return fail(.protocolViolation(error.description), retry: false)
                }
                context.write(wrapOutboundOut(entry.wireMessage), promise: nil)
                wrote = true
                nextToSend = entry.sequence + 1
                inFlight.append((entry.sequence, entry.byteCount))
                inFlightBytes += entry.byteCount
                // Stop at the channel's high-water mark too, not only between batches: a batch of
                // 32 PCM buffers would otherwise queue megabytes of frames in memory.
                if inFlightBytes >= windowBytes || !context.channel.isWritable { break }
            }
        }
        if wrote, nextToSend > 1 { log.markSent(through: nextToSend - 1) }
        if !endSent, let end = log.streamEnd, nextToSend > log.lastSequence {
            do {
                try state.endOfStreamSent(lastSequence: nextToSend - 1, endSampleTime: end.endSampleTime)
            } catch {
                return fail(.protocolViolation(error.description), retry: false)
            }
            endSent = true
            context.write(wrapOutboundOut(.endOfStream(.with {
                $0.lastSequence = nextToSend - 1
                $0.endSampleTime = end.endSampleTime
                $0.remainderFrames = UInt32(end.remainderFrames)
                $0.reason = end.reason
            })), promise: nil)
            wrote = true
        }
        if wrote { context.flush() }
    }

    private func fail(_ error: SenderError, retry: Bool) {
        complete(.interrupted(error, retry: retry, streamed: streamed))
    }

    private func complete(_ outcome: ConnectionOutcome) {
        guard !completed else { return }
        completed = true
        done.succeed(outcome)
    }

    /// Whether an Error from the receiver is worth a reconnect. Refusals that a retry cannot change
    /// (format, version, authentication, broken rules) are permanent; a SEQUENCE_GAP at the handshake
    /// means the receiver cannot resume what this sender holds, which is permanent too, while one
    /// during streaming asks for a resend from the receiver's position (a reconnect).
    static func isRetryable(_ code: Capture_V1_Error.Code, afterHandshake: Bool) -> Bool {
        switch code {
        case .badFormat, .unsupportedVersion, .authenticationFailed, .invalidMessage, .unexpectedMessage, .notStreamOwner,
            .malformedFrame, .frameTooLarge, .internal:
            return false
        case .sequenceGap:
            return afterHandshake
        default:
            return true
        }
    }

    /// Whether a problem this side detected is worth a reconnect: a connection cut mid-frame is; a
    /// receiver that speaks another protocol, or cannot resume this stream, is not.
    static func isRetryable(_ error: WireError) -> Bool {
        switch error {
        case .receiverSpeaksTLS, .receiverSpeaksHTTP, .unsupportedVersion, .cannotResume, .resumeBeyondSent, .sendOutOfOrder:
            return false
        default:
            return true
        }
    }
}
