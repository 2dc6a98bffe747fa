/// What the receiver counts and times as it works, for whoever publishes it (the console's
/// Prometheus endpoint: `CaptureMetrics.ReceiverMetrics`, which `CaptureConsole` makes conform).
/// Defined here so that the recording core does not depend on a metrics library; nil in
/// `ReceiverConfiguration.metrics` when nothing is published. Called from event loops and writer
/// threads: implementations are thread-safe and never block.
public protocol ReceiverMetricsRecorder: Sendable {
    /// A connection was accepted.
    func connectionOpened()
    /// A connection closed.
    func connectionClosed()
    /// A stream was accepted and is recording.
    func streamOpened()
    /// A recording stream ended (finished or let go of); `stream` is its name.
    func streamClosed(stream: String?)
    /// Streams whose senders may still resume them, as the sweeper last counted.
    func waitingStreams(_ count: Int)
    /// Bytes read from a connection.
    func bytesReceived(_ count: Int)
    /// Audio packets received.
    func packetsReceived(_ count: Int)
    /// An Ack was sent.
    func ackSent()
    /// Time from an AudioData's arrival to the Ack that covered it.
    func ackLatency(_ duration: Duration)
    /// A file was finalized.
    func fileFinalized()
    /// A Hello was refused, for `reason` (a protocol error code's name).
    func refused(reason: String)
    /// A stream failed while recording, for `reason`.
    func error(reason: String)
    /// Time one disk write (or sync) took.
    func diskWrite(duration: Duration)
    /// Time one commit round took, and how many streams it made durable.
    func diskRound(duration: Duration, streams: Int)
    /// A stream's alarm was raised or cleared.
    func alarm(stream: String, kind: String, raised: Bool)
}
