/// How a stream ends, as its EndOfStream states it: the one end-of-stream value of both sides. The
/// sender's packet log records it when capture ends (and its spool keeps it), the sender's protocol
/// state checks that EndAccepted repeats it, and the receiver finishes the file with it.
public struct StreamEnd: Sendable, Equatable {
    /// The stream's last sequence.
    public var lastSequence: UInt64
    /// The sample index just past the stream's last frame.
    public var endSampleTime: Int64
    /// VBR: padding frames at the end of the last packet.
    public var remainderFrames: Int
    /// Why the stream ended ("duration", "end-of-file", "interrupted"...).
    public var reason: String

    public init(lastSequence: UInt64, endSampleTime: Int64, remainderFrames: Int = 0, reason: String = "") {
        self.lastSequence = lastSequence
        self.endSampleTime = endSampleTime
        self.remainderFrames = remainderFrames
        self.reason = reason
    }

    /// Whether EndAccepted (which repeats the last sequence and the end's sample time) confirms this end.
    public func isConfirmed(by accepted: Capture_V1_EndAccepted) -> Bool {
        accepted.lastSequence == lastSequence && accepted.endSampleTime == endSampleTime
    }
}
