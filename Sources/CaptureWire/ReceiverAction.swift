/// What the receiver must do with a message its `ReceiverStreamState` accepted.
public enum ReceiverAction: Sendable, Equatable {
    /// A valid Hello: decide (authentication, stream busy, resume point from what is on disk), then
    /// either call `accept(resumingAt:)` and send HelloAccepted, or send an Error and close.
    case decideOnHello(ValidatedHello)
    /// The next audio: write its packets at its sequence's position; send an Ack once durable.
    case writeAudio(Capture_V1_AudioData)
    /// The next sequence is lost audio: record the gap at its sample time; send an Ack once durable.
    case recordGap(Capture_V1_Gap)
    /// The next sequence is a marker: record it at its sample time; send an Ack once durable.
    case recordMarker(Capture_V1_Marker)
    /// The next sequence labels a stretch of audio already received (or being received) as not
    /// captured, carried as encoded silence: record it as a gap at its sample time, without moving
    /// the timeline; send an Ack once durable.
    case recordFilledGap(Capture_V1_FilledGap)
    /// A sequence already received (a resend after reconnect): ignore it but send the current
    /// durable Ack again, so the sender can drop what it holds.
    case ignoreDuplicate(sequence: UInt64)
    /// A Heartbeat: the peer is alive; nothing to answer.
    case heartbeat
    /// The stream is complete: finish the file durably, send the final Ack and EndAccepted.
    case finishStream(Capture_V1_EndOfStream)
    /// The sender reported an error; log it. If it is fatal, the sender closes the connection.
    case peerError(Capture_V1_Error)
}
