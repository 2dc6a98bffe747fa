/// The sender's side of one connection's protocol, pure: it tracks the handshake, the sequences in
/// flight and the acknowledgements, and checks what the receiver sends. A thrown `WireError` ends
/// the connection: send its `errorFrame` and close; every later call throws it again.
///
/// Order: Hello sent → HelloAccepted (or Error) → AudioData/Gap sent, Acks received →
/// EndOfStream sent → EndAccepted. Heartbeats may arrive at any time after Hello.
public struct SenderStreamState: Sendable, FinalErrorLatch {
    /// Where the connection is in the protocol.
    public enum Phase: Sendable, Equatable {
        case notStarted
        case awaitingHelloAccepted
        case streaming
        /// EndOfStream sent; acks and EndAccepted expected.
        case awaitingEndAccepted
        case ended
        case closed
    }

    /// Where the connection is in the protocol.
    public private(set) var phase: Phase = .notStarted
    /// The oldest sequence the sender still holds (not known to be durable).
    public let oldestHeldSequence: UInt64
    /// The sequence the next newly produced packet will get, at Hello time.
    public let nextNewSequence: UInt64
    /// The next sequence to send on this connection (set by HelloAccepted).
    public private(set) var nextSequenceToSend: UInt64
    /// The highest sequence known durable at the receiver (0 when none).
    public private(set) var acknowledgedSequence: UInt64

    /// The error that ended the machine, if any (`FinalErrorLatch`).
    var failure: WireError?

    /// The highest sequence sent on this connection or known to the receiver (0 when none).
    public var highestSentSequence: UInt64 { nextSequenceToSend - 1 }
    /// Sequences sent but not yet acknowledged.
    public var inFlightCount: UInt64 { highestSentSequence - acknowledgedSequence }

    /// A connection of a stream whose spool holds sequences `oldestHeldSequence ..< nextNewSequence`
    /// (both 1 for a new stream). Hello's `resume_from_sequence` should be `oldestHeldSequence`.
    public init(oldestHeldSequence: UInt64 = WireProtocol.firstSequence, nextNewSequence: UInt64 = WireProtocol.firstSequence) {
        self.oldestHeldSequence = max(oldestHeldSequence, WireProtocol.firstSequence)
        self.nextNewSequence = max(nextNewSequence, self.oldestHeldSequence)
        self.nextSequenceToSend = self.oldestHeldSequence
        self.acknowledgedSequence = self.oldestHeldSequence - 1
    }

    /// Records that Hello was sent.
    public mutating func helloSent() throws(WireError) {
        try run { (state: inout Self) throws(WireError) in
            guard state.phase == .notStarted else { throw .sendOutOfOrder("Hello was already sent") }
            state.phase = .awaitingHelloAccepted
        }
    }

    /// Records that the AudioData or Gap with `sequence` was sent; it must be the next sequence.
    public mutating func sent(sequence: UInt64) throws(WireError) {
        try run { (state: inout Self) throws(WireError) in
            guard state.phase == .streaming else {
                throw .sendOutOfOrder("sequence \(sequence) sent before HelloAccepted or after EndOfStream")
            }
            guard sequence == state.nextSequenceToSend else {
                throw .sendOutOfOrder("sequence \(sequence) sent but \(state.nextSequenceToSend) is next")
            }
            state.nextSequenceToSend += 1
        }
    }

    /// Records that EndOfStream was sent; `lastSequence` must be the last sequence sent.
    public mutating func endOfStreamSent(lastSequence: UInt64) throws(WireError) {
        try run { (state: inout Self) throws(WireError) in
            guard state.phase == .streaming else { throw .sendOutOfOrder("EndOfStream sent outside streaming") }
            guard lastSequence == state.highestSentSequence else {
                throw .sendOutOfOrder("EndOfStream names \(lastSequence) but \(state.highestSentSequence) was sent last")
            }
            state.phase = .awaitingEndAccepted
        }
    }

    /// Checks one message from the receiver and says what it means.
    public mutating func receive(_ message: WireMessage) throws(WireError) -> SenderEvent {
        try run { (state: inout Self) throws(WireError) in try state.handle(message) }
    }

    mutating func closeAfterFailure() {
        phase = .closed
    }

    private mutating func handle(_ message: WireMessage) throws(WireError) -> SenderEvent {
        switch (phase, message) {
        case (.notStarted, _):
            throw .unexpectedMessage(message.type, expecting: "nothing before Hello is sent")
        case (_, .error(let error)):
            if error.fatal { phase = .closed }
            return .peerError(error)
        case (_, .heartbeat):
            return .heartbeat
        case (.awaitingHelloAccepted, .helloAccepted(let accepted)):
            let next = accepted.nextSequence
            guard next >= oldestHeldSequence else {
                throw .cannotResume(requested: next, oldestHeld: oldestHeldSequence)
            }
            guard next <= nextNewSequence else {
                throw .resumeBeyondSent(requested: next, nextUnsent: nextNewSequence)
            }
            nextSequenceToSend = next
            acknowledgedSequence = next - 1
            phase = .streaming
            return .accepted(accepted)
        case (.awaitingHelloAccepted, _):
            throw .unexpectedMessage(message.type, expecting: "HelloAccepted or Error")
        case (.streaming, .ack(let ack)), (.awaitingEndAccepted, .ack(let ack)):
            guard ack.durableSequence <= highestSentSequence else {
                throw .ackBeyondSent(acknowledged: ack.durableSequence, highestSent: highestSentSequence)
            }
            guard ack.durableSequence > acknowledgedSequence else { return .staleAck(ack) }
            acknowledgedSequence = ack.durableSequence
            return .acknowledged(ack)
        case (.awaitingEndAccepted, .endAccepted(let accepted)):
            acknowledgedSequence = highestSentSequence
            phase = .ended
            return .endAccepted(accepted)
        case (.streaming, _):
            throw .unexpectedMessage(message.type, expecting: "Ack, Heartbeat or Error")
        case (.awaitingEndAccepted, _):
            throw .unexpectedMessage(message.type, expecting: "Ack, EndAccepted, Heartbeat or Error")
        case (.ended, _), (.closed, _):
            throw .unexpectedMessage(message.type, expecting: "nothing: the stream has ended")
        }
    }
}
