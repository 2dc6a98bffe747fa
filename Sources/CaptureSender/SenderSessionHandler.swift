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
}

/// Drives the sender's side of one connection: sends Hello, then the packet log's entries from the
/// receiver's resume point within a send window, releases what the receiver acknowledges, and sends
/// EndOfStream once the log has ended and everything was sent. Completes `done` with the receiver's
/// summary, or with the reason the stream could not be delivered.
final class SenderSessionHandler: ChannelInboundHandler {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private let hello: Capture_V1_Hello
    private let log: PacketLog
    private let windowBytes: Int
    private let done: EventLoopPromise<StreamSummary>
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
        hello: Capture_V1_Hello, log: PacketLog, windowBytes: Int, done: EventLoopPromise<StreamSummary>, logger: Logger,
        security: Security? = nil
    ) {
        self.security = security
        self.hello = hello
        self.log = log
        self.windowBytes = windowBytes
        self.done = done
        self.logger = logger
        state = SenderStreamState(oldestHeldSequence: log.oldestKeptSequence, nextNewSequence: log.lastSequence + 1)
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
            return fail(.protocolViolation(error.description))
        }
        if let security {
            tlsHandshakeTimeout = context.eventLoop.assumeIsolated().scheduleTask(in: security.handshakeTimeout) { [self] in
                guard !tlsHandshakeDone else { return }
                fail(.timedOut("the TLS handshake with the receiver did not complete within \(security.handshakeTimeout.nanoseconds / 1_000_000_000) s"))
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
            return fail(.protocolViolation(error.description))
        }
        switch event {
        case .accepted(let accepted):
            self.accepted = true
            nextToSend = accepted.nextSequence
            if accepted.nextSequence > 1 { log.acknowledge(through: accepted.nextSequence - 1) }
            logger.info("streaming", metadata: ["file": "\(accepted.fileName)", "resumed": "\(accepted.resumed)"])
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
            complete(.success(StreamSummary(fileName: accepted.fileName, totalFrames: accepted.totalFrames, totalPackets: accepted.totalPackets)))
            context.close(promise: nil)
        case .peerError(let error):
            fail(.refused(code: "\(error.code)", message: error.message))
            if error.fatal { context.close(promise: nil) }
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
                fail(.timedOut("no data from the receiver for too long; the connection is considered dead"))
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
            fail(.protocolViolation(wire.description))
        } else if let security {
            fail(SenderTLSFailure.explain(error, report: security.report, host: security.host, handshakeDone: tlsHandshakeDone))
        } else {
            fail(.connectionLost("\(error)"))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        tlsHandshakeTimeout?.cancel()
        if let security, !tlsHandshakeDone {
            fail(SenderTLSFailure.explain(ChannelError.eof, report: security.report, host: security.host, handshakeDone: false))
        } else if !accepted, security == nil {
            fail(.connectionLost("the receiver closed the connection before accepting the stream; if it requires TLS, connect with --tls"))
        }
        fail(.connectionLost("the receiver closed the connection"))
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
                    return fail(.protocolViolation(error.description))
                }
                context.write(wrapOutboundOut(Self.message(for: entry)), promise: nil)
                wrote = true
                nextToSend = entry.sequence + 1
                inFlight.append((entry.sequence, entry.byteCount))
                inFlightBytes += entry.byteCount
                if inFlightBytes >= windowBytes { break }
            }
        }
        if !endSent, let end = log.streamEnd, nextToSend > log.lastSequence {
            do {
                try state.endOfStreamSent(lastSequence: nextToSend - 1)
            } catch {
                return fail(.protocolViolation(error.description))
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

    private static func message(for entry: LoggedPacket) -> WireMessage {
        switch entry.content {
        case .audio(let packets):
            return .audioData(.with {
                $0.sequence = entry.sequence
                $0.firstSampleTime = packets.firstSampleTime
                $0.packetCount = UInt32(packets.packetCount)
                $0.packetSizes = packets.packetSizes
                $0.payload = Data(packets.payload)
                $0.frameCount = UInt32(packets.frameCount)
            })
        case .gap(let sampleTime, let length, let reason):
            return .gap(.with {
                $0.sequence = entry.sequence
                $0.sampleTime = sampleTime
                $0.lengthFrames = UInt64(length)
                $0.reason = reason
            })
        }
    }

    private func fail(_ error: SenderError) {
        complete(.failure(error))
    }

    private func complete(_ result: Result<StreamSummary, SenderError>) {
        guard !completed else { return }
        completed = true
        switch result {
        case .success(let summary): done.succeed(summary)
        case .failure(let error): done.fail(error)
        }
    }
}
