#if canImport(Glibc)
import Glibc
#endif

/// Clock readings in nanoseconds, without allocating (safe on the capture thread).
enum ALSAClock {
    /// The current reading of `clock` (CLOCK_MONOTONIC or CLOCK_REALTIME).
    static func now(_ clock: clockid_t) -> Int64 {
        var reading = timespec()
        clock_gettime(clock, &reading)
        return nanoseconds(reading)
    }

    /// A `timespec` in nanoseconds.
    static func nanoseconds(_ time: timespec) -> Int64 {
        Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
