/// What a message from the receiver means for the sender, as its `SenderStreamState` judged it.
public enum SenderEvent: Sendable, Equatable {
    /// The stream is accepted: drop held sequences before `next_sequence` (they are durable) and
    /// send from `next_sequence` on, starting at `next_sample_time`.
    case accepted(Capture_V1_HelloAccepted)
    /// Everything through `durable_sequence` is durable: drop it from the spool.
    case acknowledged(Capture_V1_Ack)
    /// An Ack at or below one already received (acks may repeat); nothing to do.
    case staleAck(Capture_V1_Ack)
    /// A Heartbeat: the receiver is alive.
    case heartbeat
    /// The receiver finished the file: the stream is complete, everything is durable; close.
    case endAccepted(Capture_V1_EndAccepted)
    /// The receiver reported an error; if fatal it closes the connection (and the sender should
    /// reconnect or give up according to the code).
    case peerError(Capture_V1_Error)
}
