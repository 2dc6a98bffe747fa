/// Conversions of numbers from settings into integer units that saturate instead of trapping. The
/// options' ranges keep their values far from the limits; these keep each conversion total
/// whatever it is given (NaN is 0, what exceeds Int64 is Int64's bound).
public enum Saturating {
    /// `value` rounded to the nearest whole number, as an Int64.
    public static func int64(_ value: Double) -> Int64 {
        guard !value.isNaN else { return 0 }
        let rounded = value.rounded()
        // 2^63 is the first Double above Int64.max; -2^63 is Int64.min itself.
        if rounded >= 9_223_372_036_854_775_808.0 { return .max }
        if rounded < -9_223_372_036_854_775_808.0 { return .min }
        return Int64(rounded)
    }

    /// `seconds` in whole nanoseconds (for NIO's `TimeAmount.nanoseconds` and `Duration.nanoseconds`).
    public static func nanoseconds(seconds: Double) -> Int64 {
        int64(seconds * 1_000_000_000)
    }

    /// The frames `seconds` of audio at `rate` frames a second hold.
    public static func frames(seconds: Double, rate: Double) -> Int64 {
        int64(seconds * rate)
    }
}
