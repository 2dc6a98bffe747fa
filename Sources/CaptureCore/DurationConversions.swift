import Foundation

extension Duration {
    /// The duration in seconds, as a `Double`: for log lines and error messages, and for the few
    /// APIs that take seconds (`Date`, `NSCondition.wait(until:)`).
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }

    /// The duration in whole nanoseconds, rounded toward zero and clamped to `Int64`'s range: for
    /// the clocks and timers that count nanoseconds (`DispatchTime`, the monotonic clock's
    /// readings, Prometheus' timers). Callers bound it further where they add it to a time.
    public var inNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let nanoseconds = Int128(seconds) * 1_000_000_000 + Int128(attoseconds / 1_000_000_000)
        return Int64(clamping: nanoseconds)
    }

    /// The duration in seconds as people write them, for messages: whole seconds without a decimal
    /// point ("10"), else rounded to the nanosecond with the trailing zeros dropped ("2.5", "0.3",
    /// not the "0.30000000000000004" a `Double` may print).
    public var secondsText: String {
        let nanoseconds = Int128(components.seconds) * 1_000_000_000
            + (Int128(components.attoseconds) + (components.attoseconds < 0 ? -500_000_000 : 500_000_000)) / 1_000_000_000
        let sign = nanoseconds < 0 ? "-" : ""
        let magnitude = nanoseconds.magnitude
        let whole = magnitude / 1_000_000_000, fraction = magnitude % 1_000_000_000
        guard fraction != 0 else { return sign + String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 9 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return sign + String(whole) + "." + digits
    }
}

extension Date {
    /// The wall-clock time from `start` to this date, as a `Duration` (negative when `start` is
    /// later): to compare times read from a `Date` clock with the settings, which are durations.
    public func duration(since start: Date) -> Duration {
        .seconds(timeIntervalSince(start))
    }
}
