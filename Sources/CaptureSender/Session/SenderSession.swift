import CaptureCore
import CaptureWire
import Foundation

/// Where the packet log stands when the session looks at it: how far its entries reach and, once
/// the stream ended, how.
public struct PacketLogPosition: Sendable, Equatable {
    /// The newest entry appended and where its audio ends.
    public var appended: StreamPosition
    public var end: StreamEnd?

    public init(appended: StreamPosition, end: StreamEnd?) {
        self.appended = appended
        self.end = end
    }
}

/// The sender's side of one connection as a pure state machine: events in, actions out. It owns the
/// session: the protocol's state (`SenderStreamState`), the resume point the receiver gave, the
/// window of sequences in flight, whether a read of the log is outstanding and whether the end was
/// sent; it decides how the connection ends (`ConnectionOutcome`). It does no I/O: `SenderSessionHandler`
/// performs its actions (writes frames, fetches entries through a `PacketFetcher` off the event
/// loop, releases acknowledged entries from the log) and feeds back what happened.
struct SenderSession {
    /// What happened.
    enum Event: Equatable {
        /// The connection is up: the Hello goes out.
        case channelActive
        /// The receiver sent a message (`writable`: whether the channel takes more now).
        case received(WireMessage, writable: Bool, log: PacketLogPosition)
        /// The channel can take more, or the log grew: send what the window allows.
        case sendable(writable: Bool, log: PacketLogPosition)
        /// The answer to `.fetch`: the entries from the asked sequence on (possibly fewer).
        case fetched([LoggedPacket], writable: Bool, log: PacketLogPosition)
        /// `.fetch` failed: the spool cannot give back the entry at `from`.
        case fetchFailed(from: UInt64, reason: String)
        /// The pacing ticker (`SendPacing.tickInterval`): the time and, for a background
        /// destination, where the foreground stands; sends what the pacing now allows.
        case paced(now: UInt64, foreground: SendPacing.Foreground, writable: Bool, log: PacketLogPosition)
        /// Nothing was written for a heartbeat interval.
        case writeIdle(unixNanoseconds: Int64)
        /// Nothing was read for the idle timeout.
        case readIdle
        /// The transport failed (TLS, a broken frame, the socket); `retry`: whether reconnecting can help.
        case transportFailed(SenderError, retry: Bool)
        /// The connection closed. `plainTCP`: no TLS was asked for (a receiver that closes before
        /// accepting may want TLS).
        case channelInactive(plainTCP: Bool)
    }

    /// What to do.
    enum Action: Equatable {
        case send(WireMessage)
        case flush
        /// Read up to `maxCount` entries from `from` on, off the event loop; answer with `.fetched`
        /// or `.fetchFailed`.
        case fetch(from: UInt64, maxCount: Int)
        /// The receiver holds everything through this sequence durably: release it from the log.
        case acknowledge(through: UInt64)
        /// Everything through this sequence is written to the connection (its payload may leave memory).
        case markSent(through: UInt64)
        /// The receiver accepted the stream (for the status line and the log).
        case accepted(Capture_V1_HelloAccepted)
        /// The receiver reported a problem that does not end the stream.
        case warn(code: String, message: String)
        /// The connection's outcome; once.
        case complete(ConnectionOutcome)
        case close
    }

    /// Entries asked for at once.
    static let fetchBatch = 32

    private let hello: Capture_V1_Hello
    private let windowBytes: Int
    /// What may leave beyond the window: a rate limit, the background rule.
    private(set) var pacing: SendPacing
    private var state: SenderStreamState
    /// What was sent on this connection: from the receiver's resume point (HelloAccepted) through
    /// the newest entry written.
    private var sent: StreamPosition = .start
    /// Sequences sent and not yet acknowledged, with their byte counts, oldest first.
    private var inFlight: [(sequence: UInt64, bytes: Int)] = []
    private var inFlightHead = 0
    private(set) var inFlightBytes = 0
    private var fetching = false
    private var endSent = false
    private(set) var completed = false
    private(set) var streamed = false
    private var accepted = false
    /// The receiver listed Marker in `HelloAccepted.accepted_frame_types`.
    /// The frame types beyond version 1's first nine that the receiver listed in its HelloAccepted.
    private var acceptedFrameTypes: Set<UInt32> = []

    /// A session for `hello` over the log's current state (`oldestHeld`: the oldest sequence it
    /// keeps; `log`: its newest and its end), with at most `windowBytes` unacknowledged bytes in
    /// flight, and entries sent no faster than `pacing` allows.
    init(hello: Capture_V1_Hello, windowBytes: Int, oldestHeld: UInt64, log: PacketLogPosition, pacing: SendPacing = .unpaced) {
        self.hello = hello
        self.windowBytes = windowBytes
        self.pacing = pacing
        state = SenderStreamState(
            oldestHeldSequence: oldestHeld, nextNewSequence: log.appended.nextSequence,
            endedBefore: log.end)
    }

    /// The next sequence to send (the receiver's resume point until sending starts).
    var nextSequence: UInt64 { sent.nextSequence }

    mutating func handle(_ event: Event) -> [Action] {
        guard !completed else { return [] }
        switch event {
        case .channelActive:
            do {
                try state.helloSent()
            } catch {
                return fail(.protocolViolation(error), retry: false)
            }
            return [.send(.hello(hello)), .flush]
        case .received(let message, let writable, let log):
            return receive(message, writable: writable, log: log)
        case .sendable(let writable, let log):
            return pump(writable: writable, log: log)
        case .paced(let now, let foreground, let writable, let log):
            pacing.tick(now: now, foreground: foreground)
            return pump(writable: writable, log: log)
        case .fetched(let packets, let writable, let log):
            fetching = false
            return send(packets, writable: writable, log: log)
        case .fetchFailed(let from, let reason):
            fetching = false
            return fail(.spoolUnreadable(firstSequence: from, reason: reason), retry: false) + [.close]
        case .writeIdle(let now):
            return [.send(.heartbeat(.with { $0.sentUnixNs = now })), .flush]
        case .readIdle:
            return fail(.timedOut("no data from the receiver for too long; the connection is considered dead"), retry: true) + [.close]
        case .transportFailed(let error, let retry):
            return fail(error, retry: retry) + [.close]
        case .channelInactive(let plainTCP):
            if !accepted, plainTCP, !streamed {
                return fail(.connectionLost(.closedBeforeAccepting), retry: true)
            }
            return fail(.connectionLost(.closed), retry: true)
        }
    }

    private mutating func receive(_ message: WireMessage, writable: Bool, log: PacketLogPosition) -> [Action] {
        let event: SenderEvent
        do {
            event = try state.receive(message)
        } catch {
            let refusal: [Action] = [.send(.error(error.errorFrame)), .flush]
            if case .cannotResume(_, _, let heldUntil) = error {
                return refusal + complete(.cannotResume(.protocolViolation(error), receiverHoldsUntil: heldUntil)) + [.close]
            }
            return refusal + fail(.protocolViolation(error), retry: Self.isRetryable(error)) + [.close]
        }
        switch event {
        case .accepted(let accepted):
            self.accepted = true
            acceptedFrameTypes = Set(accepted.acceptedFrameTypes)
            streamed = true
            sent = StreamPosition(nextSequence: accepted.nextSequence, nextSampleTime: accepted.nextSampleTime)
            var actions: [Action] = sent.coversNothing ? [] : [.acknowledge(through: sent.lastSequence)]
            actions.append(.accepted(accepted))
            return actions + pump(writable: writable, log: log)
        case .acknowledged(let ack):
            while inFlightHead < inFlight.count, inFlight[inFlightHead].sequence <= ack.durableSequence {
                inFlightBytes -= inFlight[inFlightHead].bytes
                inFlightHead += 1
            }
            if inFlightHead > 4_096 {
                inFlight.removeFirst(inFlightHead)
                inFlightHead = 0
            }
            return [.acknowledge(through: ack.durableSequence)] + pump(writable: writable, log: log)
        case .staleAck, .heartbeat:
            return []
        case .endAccepted(let accepted):
            let summary = StreamSummary(fileName: accepted.fileName, totalFrames: accepted.totalFrames, totalPackets: accepted.totalPackets)
            return [.acknowledge(through: log.appended.lastSequence)] + complete(.delivered(summary)) + [.close]
        case .peerError(let error):
            guard error.fatal else { return [.warn(code: "\(error.code)", message: error.message)] }
            if error.code == .sequenceGap, !streamed {
                let heldUntil = error.hasHeldUntilSampleTime ? error.heldUntilSampleTime : nil
                return complete(.cannotResume(.refused(code: "\(error.code)", message: error.message), receiverHoldsUntil: heldUntil)) + [.close]
            }
            if error.code == .rateLimited {
                return fail(.rateLimited(message: error.message, retryAfter: Double(error.retryAfterMs) / 1_000), retry: true) + [.close]
            }
            return fail(.refused(code: "\(error.code)", message: error.message), retry: Self.isRetryable(error.code, afterHandshake: streamed)) + [.close]
        }
    }

    /// Asks for the next entries when the window and the channel allow; sends EndOfStream once
    /// every entry is sent and the stream has ended.
    private mutating func pump(writable: Bool, log: PacketLogPosition) -> [Action] {
        guard state.phase == .streaming, !fetching else { return [] }
        if sent.lastSequence < log.appended.lastSequence {
            guard writable, inFlightBytes < windowBytes, pacing.allowsNext(inFlightBytes: inFlightBytes) else { return [] }
            fetching = true
            return [.fetch(from: sent.nextSequence, maxCount: Self.fetchBatch)]
        }
        guard !endSent, let end = log.end else { return [] }
        let last = sent.lastSequence
        do {
            try state.endOfStreamSent(lastSequence: last, endSampleTime: end.position.endSampleTime)
        } catch {
            return fail(.protocolViolation(error), retry: false)
        }
        endSent = true
        return [.send(.endOfStream(.with {
            $0.lastSequence = last
            $0.endSampleTime = end.position.endSampleTime
            $0.remainderFrames = UInt32(end.remainderFrames)
            $0.reason = end.reason
        })), .flush]
    }

    /// Sends fetched entries in order while the window allows, then asks for more.
    private mutating func send(_ packets: [LoggedPacket], writable: Bool, log: PacketLogPosition) -> [Action] {
        guard state.phase == .streaming else { return [] }
        var actions: [Action] = []
        for entry in packets {
            // Entries acknowledged meanwhile (a resume point moved) or beyond a hole are not sent.
            guard entry.sequence == sent.nextSequence, inFlightBytes < windowBytes, pacing.allowsNext(inFlightBytes: inFlightBytes) else { break }
            let type = entry.frameType
            if WireProtocol.extendedFrameTypes.contains(type), !acceptedFrameTypes.contains(UInt32(type.rawValue)) {
                // Never sent to a receiver that does not know the frame type (PROTOCOL.md §12);
                // a reconnect finds out again whether the receiver was upgraded meanwhile.
                return actions + fail(.receiverPredatesFrameType(type, sequence: entry.sequence), retry: true) + [.close]
            }
            do {
                try state.sent(sequence: entry.sequence)
            } catch {
                return actions + fail(.protocolViolation(error), retry: false) + [.close]
            }
            actions.append(.send(entry.wireMessage))
            sent = sent.appendingEntry(endingAt: entry.endSampleTime)
            inFlight.append((entry.sequence, entry.byteCount))
            inFlightBytes += entry.byteCount
            pacing.charge(bytes: entry.byteCount)
        }
        guard !actions.isEmpty else { return [] }  // nothing came: wait for the next acknowledgement or entry
        actions.append(.markSent(through: sent.lastSequence))
        let more = pump(writable: writable, log: log)
        return actions + more.filter { $0 != .flush } + [.flush]
    }

    private mutating func fail(_ error: SenderError, retry: Bool) -> [Action] {
        complete(.interrupted(error, retry: retry, streamed: streamed))
    }

    private mutating func complete(_ outcome: ConnectionOutcome) -> [Action] {
        guard !completed else { return [] }
        completed = true
        return [.complete(outcome)]
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
