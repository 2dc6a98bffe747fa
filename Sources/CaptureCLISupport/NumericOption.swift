import CaptureCore
import ArgumentParser

/// A numeric option of capture-send or capture-recv: its documented range, how its text is read,
/// and the one line that refuses anything else.
///
/// Every number from the command line, a `CAPTURE_…` variable or the config file is read by one
/// of these while ArgumentParser parses (as the option's `transform`) or validates, so a value that
/// is accepted lies within the range, and what it is converted into downstream (frames, bytes,
/// `Duration`s) cannot overflow. The ranges are listed per executable (`SendRanges`,
/// `ReceiveRanges`); a table test runs hostile values through every numeric option the commands
/// have, and fails for one that has no range.
public struct NumericOption: Sendable, Equatable, CustomStringConvertible {
    /// How the option's value is written.
    public enum Form: Sendable, Equatable {
        /// A whole number: `48000` (an integral number written otherwise, `4.8e4`, is the same).
        case integer
        /// Any number: `0.5`, `1e-3`.
        case real
        /// Bytes, with an optional K, M, G or T suffix (powers of 1024): `4G`, `1.5M`, `65536`.
        case bytes
        /// Bits per second, with an optional k, M or G suffix (powers of 1000, either case): `128k`,
        /// `96000`, `1.5M`.
        case bitrate
        /// A duration: `1h30m`, `15m`, `10s`, or whole seconds (`90`).
        case duration
        /// One of these numbers: `2.5`, `20`.
        case choices([Double])
    }

    /// The long option name without dashes: `rate`.
    public let name: String
    public let form: Form
    /// The smallest and the largest accepted value, in the option's unit.
    public let range: ClosedRange<Double>
    /// The unit as written after a number: `Hz`, `seconds`, `ms`; empty for a count.
    public let unit: String
    /// What the smallest value means when it is special: `no limit` for a timeout of 0.
    public let minimumMeaning: String?

    public init(_ name: String, _ form: Form, _ range: ClosedRange<Double>, unit: String = "", minimumMeaning: String? = nil) {
        self.name = name
        self.form = form
        self.range = range
        self.unit = unit
        self.minimumMeaning = minimumMeaning
    }

    /// `--rate`.
    public var spelling: String { "--\(name)" }

    /// The range in words: `8000 to 192000 Hz`, `0 (no limit) to 86400 seconds (1 day)`,
    /// `1M to 16T bytes`, `2.5, 5, 10, 20, 40 or 60 ms`.
    public var rangeText: String {
        switch form {
        case .choices(let values):
            let written = values.map(Self.number)
            let list = written.count > 1 ? written.dropLast().joined(separator: ", ") + " or " + (written.last ?? "") : written.joined()
            return unit.isEmpty ? list : "\(list) \(unit)"
        case .bytes:
            return "\(Self.bytes(range.lowerBound)) to \(Self.bytes(range.upperBound)) bytes"
        case .bitrate:
            return "\(Self.number(range.lowerBound)) to \(Self.number(range.upperBound)) b/s (\(Self.bits(range.lowerBound)) to \(Self.bits(range.upperBound)))"
        case .duration:
            return "\(DurationText.describe(Saturating.int64(range.lowerBound))) to \(DurationText.describe(Saturating.int64(range.upperBound)))"
        case .integer, .real:
            let low = Self.number(range.lowerBound) + (minimumMeaning.map { " (\($0))" } ?? "")
            var text = "\(low) to \(Self.number(range.upperBound))"
            if !unit.isEmpty { text += " \(unit)" }
            if unit == "seconds", range.upperBound >= 3_600 { text += " (\(DurationText.describe(Saturating.int64(range.upperBound))))" }
            return text
        }
    }

    /// The option's help: its abstract, then `Accepted: 8000 to 192000 Hz. (default: 48000)` (a
    /// transform hides the default from ArgumentParser, so it is written here).
    public func help(_ abstract: String, valueName: String? = nil, default defaultValue: String? = nil) -> ArgumentHelp {
        ArgumentHelp("\(abstract) Accepted: \(rangeText).\(defaultValue.map { " (default: \($0))" } ?? "")", valueName: valueName)
    }

    /// The refusal, after ArgumentParser's `The value 'X' is invalid for '--rate <HZ>': `.
    public var refusal: ValidationError {
        switch form {
        case .integer: return ValidationError("use a whole number from \(rangeText)")
        case .duration: return ValidationError("use a duration like 1h, 15m, 10s or 1h30m, from \(rangeText)")
        case .choices: return ValidationError("use \(rangeText)")
        case .real, .bytes, .bitrate: return ValidationError("use \(rangeText)")
        }
    }

    /// The value `text` stands for, in the option's unit, when it is within the range; nil otherwise
    /// (not a number of this form, not a whole number where one is needed, NaN, infinite, out of range).
    public func value(_ text: String) -> Double? {
        guard let number = read(text), number.isFinite, range.contains(number) else { return nil }
        switch form {
        case .integer, .bytes, .bitrate, .duration:
            guard number.rounded() == number else { return nil }
        case .choices(let values):
            guard values.contains(number) else { return nil }
        case .real:
            break
        }
        return number
    }

    // MARK: Transforms for `@Option(transform:)`

    /// The whole number `text` names, within the range.
    @Sendable public func integer(_ text: String) throws(ValidationError) -> Int {
        // The range of every integer option lies well within Int: the conversion is exact.
        guard let number = value(text), let integer = Int(exactly: number) else { throw refusal }
        return integer
    }

    /// The number `text` names, within the range.
    @Sendable public func real(_ text: String) throws(ValidationError) -> Double {
        guard let number = value(text) else { throw refusal }
        return number
    }

    /// For options kept as text (`4G`, `1h30m`, `128k`, `2.5`): the text, once it is known to name
    /// a value within the range. A bit rate comes back in bits per second (`128000`) and a choice as
    /// its number (`20` for `20ms`), the way the codec's own parsers read them.
    @Sendable public func checked(_ text: String) throws(ValidationError) -> String {
        guard let number = value(text) else { throw refusal }
        switch form {
        case .bitrate, .choices: return Self.number(number)
        case .integer, .real, .bytes, .duration: return text
        }
    }

    public var description: String { "\(spelling): \(rangeText)" }

    // MARK: Reading

    /// The number written in `text` for `form` (unchecked); nil when it is not written that way.
    func read(_ text: String) -> Double? {
        switch form {
        case .integer, .real:
            return Self.plainNumber(text)
        case .choices:
            // `20ms` as well as `20`.
            let lowered = text.lowercased()
            return Self.plainNumber(unit.isEmpty || !lowered.hasSuffix(unit) ? lowered : String(lowered.dropLast(unit.count)))
        case .bytes:
            let units: [Character: Double] = ["K": 1_024, "M": 1_048_576, "G": 1_073_741_824, "T": 1_099_511_627_776]
            let upper = text.uppercased()
            if let last = upper.last, let unit = units[last] {
                return Self.plainNumber(String(upper.dropLast())).map { $0 * unit }
            }
            return Self.plainNumber(upper)
        case .bitrate:
            let lowered = text.lowercased()
            let units: [Character: Double] = ["k": 1e3, "m": 1e6, "g": 1e9]
            if let last = lowered.last, let unit = units[last] { return Self.plainNumber(String(lowered.dropLast())).map { $0 * unit } }
            return Self.plainNumber(lowered)
        case .duration:
            return DurationText.total(text).map { Double($0) }
        }
    }

    /// A decimal number as people write one: digits, a point, an exponent, a sign. Not `nan`,
    /// `inf` or hexadecimal, which Swift's `Double(_:)` would also read.
    static func plainNumber(_ text: String) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }) else { return nil }
        return Double(text)
    }

    /// `48000`, `0.5`, `2.5`.
    public static func number(_ value: Double) -> String {
        if value.rounded() == value, abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// `6k`, `510k`, `10G`: bits with the largest suffix that leaves a whole number.
    static func bits(_ value: Double) -> String {
        for (suffix, unit) in [("G", 1e9), ("M", 1e6), ("k", 1e3)] where value >= unit && (value / unit).rounded() == value / unit {
            return number(value / unit) + suffix
        }
        return number(value)
    }

    /// `1M`, `16T`, or the bytes when no suffix fits.
    static func bytes(_ value: Double) -> String {
        for (suffix, unit) in [("T", 1_099_511_627_776.0), ("G", 1_073_741_824.0), ("M", 1_048_576.0), ("K", 1_024.0)]
        where value >= unit && (value / unit).rounded() == value / unit {
            return number(value / unit) + suffix
        }
        return number(value)
    }
}
