import CaptureCore

/// Where a stream's recording is cut into segment files (`--segment`): at UTC boundaries of the
/// stream's own timeline, every `length` from each UTC midnight (a length that does not divide a day
/// gives a shorter last segment before midnight). A frame's time is the stream's start time plus its
/// position over the sample rate, never the wall clock at arrival, so a file holds exactly its hour and
/// a stream that resumes after an outage still cuts at the same boundaries.
///
/// Positions are the stream's frame positions as AudioData carries them (`first_sample_time`); for a
/// codec with priming (Opus) the first valid sample is `priming` frames after the first packet's start.
public struct SegmentClock: Sendable, Equatable {
    /// The segment length in nanoseconds.
    public let length: Int64
    /// UTC time (ns since 1970) of the stream's first valid sample, at position `origin`.
    public let startTime: Int64
    /// The position of the stream's first valid sample: Hello `start_sample_time` + priming.
    public let origin: Int64
    /// Frames per second.
    public let sampleRate: Int64

    static let nanosecondsPerSecond: Int64 = 1_000_000_000
    static let nanosecondsPerDay: Int64 = 86_400 * nanosecondsPerSecond

    /// A clock for segments of `length` (at least a second) of a stream whose first valid sample,
    /// at position `origin`, was captured at `startTime` (ns since 1970).
    public init(length: Duration, startTime: Int64, origin: Int64, sampleRate: Double) {
        let (seconds, attoseconds) = length.components
        self.length = max(seconds * Self.nanosecondsPerSecond + attoseconds / 1_000_000_000, Self.nanosecondsPerSecond)
        self.startTime = startTime
        self.origin = origin
        self.sampleRate = max(Int64(sampleRate.rounded()), 1)
    }

    /// UTC time (ns) of the frame at `position`, rounded down.
    public func time(ofPosition position: Int64) -> Int64 {
        let offset = Int128(position - origin) * Int128(Self.nanosecondsPerSecond)
        return startTime + Int64(Self.floorDivide(offset, Int128(sampleRate)))
    }

    /// The first position whose time is at or after `time` (ns).
    public func position(atOrAfter time: Int64) -> Int64 {
        let offset = Int128(time - startTime) * Int128(sampleRate)
        return origin + Int64(-Self.floorDivide(-offset, Int128(Self.nanosecondsPerSecond)))
    }

    /// The UTC time (ns) at which the segment holding time `time` begins.
    public func segmentStart(containing time: Int64) -> Int64 {
        let day = Self.floorDivide(Int128(time), Int128(Self.nanosecondsPerDay)) * Int128(Self.nanosecondsPerDay)
        let within = Int128(time) - day
        return Int64(day + within / Int128(length) * Int128(length))
    }

    /// The UTC time (ns) of the first boundary after time `time`.
    public func nextBoundaryTime(after time: Int64) -> Int64 {
        let start = segmentStart(containing: time)
        let dayEnd = Int64(Self.floorDivide(Int128(time), Int128(Self.nanosecondsPerDay)) + 1) * Self.nanosecondsPerDay
        return min(start + length, dayEnd)
    }

    /// The position of the first boundary after `position`: where the segment holding it ends.
    public func nextBoundary(after frame: Int64) -> Int64 {
        position(atOrAfter: nextBoundaryTime(after: time(ofPosition: frame)))
    }

    private static func floorDivide(_ value: Int128, _ divisor: Int128) -> Int128 {
        let quotient = value / divisor
        return (value % divisor != 0 && (value < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
