import Foundation

/// Number formats shared by both status line styles; locale-independent (always a `.` decimal point).
enum StatusFormatting {
    /// A level in dBFS with one decimal (`-6.0`), or `-∞` (terminal) / `-inf` (plain) for silence.
    static func decibels(_ value: Double, infinity: String) -> String {
        guard value.isFinite else { return value > 0 ? "+inf" : infinity }
        let text = String(format: "%.1f", locale: nil, value)
        return text == "-0.0" ? "0.0" : text
    }

    /// A fixed-point number with `decimals` decimals.
    static func fixed(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return "0" }
        return String(format: "%.\(decimals)f", locale: nil, value)
    }

    /// A bit rate with an SI prefix: `640 b/s`, `96.0 kb/s`, `1.54 Mb/s`.
    static func bitRate(_ bitsPerSecond: Double) -> String {
        let value = bitsPerSecond.isFinite ? max(0, bitsPerSecond) : 0
        if value >= 1_000_000 { return fixed(value / 1_000_000, decimals: 2) + " Mb/s" }
        if value >= 1_000 { return fixed(value / 1_000, decimals: 1) + " kb/s" }
        return fixed(value, decimals: 0) + " b/s"
    }

    /// A byte count with a binary prefix: `512 B`, `37.5 KiB`, `12.0 MiB`, `1.20 GiB`.
    static func bytes(_ count: Int) -> String {
        let value = Double(max(0, count))
        if value >= 1_073_741_824 { return fixed(value / 1_073_741_824, decimals: 2) + " GiB" }
        if value >= 1_048_576 { return fixed(value / 1_048_576, decimals: 1) + " MiB" }
        if value >= 1_024 { return fixed(value / 1_024, decimals: 1) + " KiB" }
        return "\(Int(value)) B"
    }

    /// `text` padded on the left with spaces to `width` characters.
    static func leftPadded(_ text: String, to width: Int) -> String {
        let missing = width - text.count
        return missing > 0 ? String(repeating: " ", count: missing) + text : text
    }
}
