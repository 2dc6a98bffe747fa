import CaptureCore

/// Where a stream's recording is cut into segment files (`--segment`): at UTC boundaries of the
/// stream's own timeline, every `length` from each UTC midnight (a length that does not divide a day
/// gives a shorter last segment before midnight). A frame's time is the stream's start time plus its
/// position over the sample rate, never the wall clock at arrival, so a file holds exactly its hour and
/// a stream that resumes after an outage still cuts at the same boundaries.
///
/// Positions are the stream's frame positions as AudioData carries them (`first_sample_time`); for a
/// codec with priming (Opus) the first valid sample is `priming` frames after the first packet's start.
///
/// Every computation runs in 128-bit integers and the results are clamped to Int64, so no value
/// traps. Within the ranges a Hello is held to (PROTOCOL.md §6.1.4: a start before 2100, positions
/// within 100 years of the start) nothing is ever clamped.
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

    /// A clock for segments of `length` (at least a second, at most a day) of a stream whose first
    /// valid sample, at position `origin`, was captured at `startTime` (ns since 1970).
    public init(length: Duration, startTime: Int64, origin: Int64, sampleRate: Double) {
        self.length = min(max(length.inNanoseconds, Self.nanosecondsPerSecond), Self.nanosecondsPerDay)
        self.startTime = startTime
        self.origin = origin
        let rate = sampleRate.isFinite ? sampleRate.rounded() : 1
        self.sampleRate = rate >= 1 && rate <= 1e9 ? Int64(rate) : 1
    }

    /// UTC time (ns) of the frame at `position`, rounded down.
    public func time(ofPosition position: Int64) -> Int64 {
        let offset = (Int128(position) - Int128(origin)) * Int128(Self.nanosecondsPerSecond)
        return Self.clamped(Int128(startTime) + Self.floorDivide(offset, Int128(sampleRate)))
    }

    /// The first position whose time is at or after `time` (ns).
    public func position(atOrAfter time: Int64) -> Int64 {
        let offset = (Int128(time) - Int128(startTime)) * Int128(sampleRate)
        return Self.clamped(Int128(origin) - Self.floorDivide(-offset, Int128(Self.nanosecondsPerSecond)))
    }

    /// The UTC time (ns) at which the segment holding time `time` begins.
    public func segmentStart(containing time: Int64) -> Int64 {
        Self.clamped(segmentStart128(containing: Int128(time)))
    }

    /// The UTC time (ns) of the first boundary after time `time`.
    public func nextBoundaryTime(after time: Int64) -> Int64 {
        Self.clamped(nextBoundaryTime128(after: Int128(time)))
    }

    /// The position of the first boundary after `position`: where the segment holding it ends.
    public func nextBoundary(after frame: Int64) -> Int64 {
        position(atOrAfter: nextBoundaryTime(after: time(ofPosition: frame)))
    }

    private func segmentStart128(containing time: Int128) -> Int128 {
        let day = Self.floorDivide(time, Int128(Self.nanosecondsPerDay)) * Int128(Self.nanosecondsPerDay)
        return day + (time - day) / Int128(length) * Int128(length)
    }

    private func nextBoundaryTime128(after time: Int128) -> Int128 {
        let dayEnd = (Self.floorDivide(time, Int128(Self.nanosecondsPerDay)) + 1) * Int128(Self.nanosecondsPerDay)
        return min(segmentStart128(containing: time) + Int128(length), dayEnd)
    }

    private static func clamped(_ value: Int128) -> Int64 {
        Int64(min(max(value, Int128(Int64.min)), Int128(Int64.max)))
    }

    private static func floorDivide(_ value: Int128, _ divisor: Int128) -> Int128 {
        let quotient = value / divisor
        return (value % divisor != 0 && (value < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
