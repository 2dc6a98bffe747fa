/// The sender's side of one connection's protocol, pure: it tracks the handshake, the sequences in
/// flight and the acknowledgements, and checks what the receiver sends. A thrown `WireError` ends
/// the connection: send its `errorFrame` and close; every later call throws it again.
///
/// Order: Hello sent → HelloAccepted (or Error) → AudioData/Gap sent, Acks received →
/// EndOfStream sent → EndAccepted. Heartbeats may arrive at any time after Hello. A stream whose end
/// the sender already sent on an earlier connection may get EndAccepted as the answer to Hello: the
/// receiver finished it, and the connection that should have carried the confirmation was lost.
///
/// EndAccepted counts only when it names the EndOfStream this sender sent (its `last_sequence` and
/// `end_sample_time`): anything else is a receiver that did not read the stream's end, and nothing may
/// be released on its word.
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
    /// The stream's end when it had ended before this connection (its EndOfStream may have gone out
    /// on an earlier one).
    public let endedBefore: StreamEnd?
    /// The end sent on this connection.
    public private(set) var endSent: StreamEnd?

    /// The error that ended the machine, if any (`FinalErrorLatch`).
    var failure: WireError?

    /// The highest sequence sent on this connection or known to the receiver (0 when none).
    public var highestSentSequence: UInt64 { nextSequenceToSend - 1 }
    /// Sequences sent but not yet acknowledged.
    public var inFlightCount: UInt64 { highestSentSequence - acknowledgedSequence }

    /// A connection of a stream whose spool holds sequences `oldestHeldSequence ..< nextNewSequence`
    /// (both 1 for a new stream). Hello's `resume_from_sequence` should be `oldestHeldSequence`.
    /// `endedBefore`: the stream had ended before this connection (its EndOfStream may have gone
    /// out on an earlier connection, which then ended without EndAccepted).
    public init(
        oldestHeldSequence: UInt64 = WireProtocol.firstSequence, nextNewSequence: UInt64 = WireProtocol.firstSequence,
        endedBefore: StreamEnd? = nil
    ) {
        self.endedBefore = endedBefore
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
    public mutating func endOfStreamSent(lastSequence: UInt64, endSampleTime: Int64) throws(WireError) {
        try run { (state: inout Self) throws(WireError) in
            guard state.phase == .streaming else { throw .sendOutOfOrder("EndOfStream sent outside streaming") }
            guard lastSequence == state.highestSentSequence else {
                throw .sendOutOfOrder("EndOfStream names \(lastSequence) but \(state.highestSentSequence) was sent last")
            }
            state.endSent = StreamEnd(position: StreamPosition(lastSequence: lastSequence, endSampleTime: endSampleTime))
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
                throw .cannotResume(requested: next, oldestHeld: oldestHeldSequence, heldUntilSampleTime: accepted.nextSampleTime)
            }
            guard next <= nextNewSequence else {
                throw .resumeBeyondSent(requested: next, nextUnsent: nextNewSequence)
            }
            let resume = StreamPosition(nextSequence: next, nextSampleTime: accepted.nextSampleTime)
            nextSequenceToSend = resume.nextSequence
            acknowledgedSequence = resume.lastSequence
            phase = .streaming
            return .accepted(accepted)
        case (.awaitingHelloAccepted, .endAccepted(let accepted)):
            // The receiver finished this stream on an earlier connection whose EndAccepted was lost.
            guard let end = endedBefore else {
                throw .unexpectedMessage(message.type, expecting: "HelloAccepted or Error: this stream has not ended")
            }
            try Self.check(accepted, confirms: end)
            acknowledgedSequence = max(acknowledgedSequence, end.position.lastSequence)
            phase = .ended
            return .endAccepted(accepted)
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
            guard let end = endSent else { throw .sendOutOfOrder("EndOfStream was not recorded") }
            try Self.check(accepted, confirms: end)
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

    /// EndAccepted must repeat the end the sender sent: a receiver that answers before reading the
    /// stream's end cannot know it.
    private static func check(_ accepted: Capture_V1_EndAccepted, confirms end: StreamEnd) throws(WireError) {
        guard end.isConfirmed(by: accepted) else {
            throw .endAcceptedMismatch(
                sent: end, confirmed: StreamEnd(position: StreamPosition(lastSequence: accepted.lastSequence, endSampleTime: accepted.endSampleTime)))
        }
    }
}
