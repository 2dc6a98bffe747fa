/// Where a stream stands: everything up to and including entry `lastSequence` (an AudioData, Gap,
/// Marker or FilledGap message, numbered from `WireProtocol.firstSequence`), whose audio ends at
/// `endSampleTime`. Both sides speak it: the receiver's durable position and the point it resumes a
/// stream at (HelloAccepted), the sender's acknowledged position (its spool's `acked` file) and how
/// far its packet log reaches.
///
/// The same place seen from the other side is "what comes next": `nextSequence` and `nextSampleTime`.
/// The conversion between the two lives here and nowhere else; the wire's and the files' own fields
/// are converted where they are encoded and decoded.
public struct StreamPosition: Sendable, Hashable, Comparable {
    /// The last entry covered; 0 when none is.
    public var lastSequence: UInt64
    /// The sample index just past the audio covered.
    public var endSampleTime: Int64

    /// The position after entry `lastSequence`, whose audio ends at `endSampleTime`.
    public init(lastSequence: UInt64, endSampleTime: Int64) {
        self.lastSequence = lastSequence
        self.endSampleTime = endSampleTime
    }

    /// The position just before entry `nextSequence`, which starts at `nextSampleTime` (HelloAccepted's
    /// `next_sequence` and `next_sample_time`). Sequences start at 1: a `nextSequence` of 0, which
    /// no valid message carries, covers nothing, like 1.
    public init(nextSequence: UInt64, nextSampleTime: Int64) {
        self.init(lastSequence: max(nextSequence, WireProtocol.firstSequence) - 1, endSampleTime: nextSampleTime)
    }

    /// Nothing yet: no entry, at sample 0.
    public static let start = StreamPosition(lastSequence: 0, endSampleTime: 0)

    /// The position just before a new stream's first entry: sequence 1 at the Hello's start sample
    /// time, or, for a stream that continues another (`Hello.continues`), its first sequence at its
    /// start sample time.
    public static func beginning(of hello: ValidatedHello) -> StreamPosition {
        let first = hello.message.hasContinues ? hello.message.continues.firstSequence : WireProtocol.firstSequence
        return StreamPosition(nextSequence: first, nextSampleTime: hello.message.startSampleTime)
    }

    /// The entry that comes next.
    public var nextSequence: UInt64 { lastSequence + 1 }
    /// The sample index the next entry starts at (the same as `endSampleTime`).
    public var nextSampleTime: Int64 { endSampleTime }
    /// Whether no entry is covered yet.
    public var coversNothing: Bool { lastSequence == 0 }

    /// The position once the next entry, whose audio ends at `endSampleTime`, is covered too.
    public func appendingEntry(endingAt endSampleTime: Int64) -> StreamPosition {
        StreamPosition(lastSequence: nextSequence, endSampleTime: endSampleTime)
    }

    /// Ordered by sequence (a stream's sample times never go back as its sequences advance), then
    /// by sample time.
    public static func < (lhs: StreamPosition, rhs: StreamPosition) -> Bool {
        (lhs.lastSequence, lhs.endSampleTime) < (rhs.lastSequence, rhs.endSampleTime)
    }
}
