/// How a stream ends, as its EndOfStream states it: the one end-of-stream value of both sides. The
/// sender's packet log records it when capture ends (and its spool keeps it), the sender's protocol
/// state checks that EndAccepted repeats it, and the receiver finishes the file with it.
public struct StreamEnd: Sendable, Equatable {
    /// Where the stream ends: its last sequence and the sample index just past its last frame.
    public var position: StreamPosition
    /// VBR: padding frames at the end of the last packet.
    public var remainderFrames: Int
    /// Why the stream ended ("duration", "end-of-file", "interrupted"...).
    public var reason: String

    public init(position: StreamPosition, remainderFrames: Int = 0, reason: String = "") {
        self.position = position
        self.remainderFrames = remainderFrames
        self.reason = reason
    }

    /// Whether EndAccepted (which repeats the last sequence and the end's sample time) confirms this end.
    public func isConfirmed(by accepted: Capture_V1_EndAccepted) -> Bool {
        accepted.lastSequence == position.lastSequence && accepted.endSampleTime == position.endSampleTime
    }
}
