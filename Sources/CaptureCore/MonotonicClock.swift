#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The monotonic host clock used for capture timestamps and for pacing sources in real time.
public enum MonotonicClock {
    /// Nanoseconds on CLOCK_MONOTONIC; never goes backwards, unaffected by wall-clock changes.
    public static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    /// The clock's reading as a `Duration` since its origin: the time pure decisions are given.
    public static func now() -> Duration { reading(nanoseconds()) }

    /// A reading in nanoseconds (as `nanoseconds()` gives it) as a `Duration` since the origin.
    public static func reading(_ nanoseconds: UInt64) -> Duration { .nanoseconds(Int64(clamping: nanoseconds)) }

    /// Sleeps until the monotonic clock reads `deadline` nanoseconds (returns at once if it has passed).
    public static func sleep(until deadline: UInt64) {
        var target = timespec(
            tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000)
        )
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &target, nil) == EINTR {}
    }
}
