import ArgumentParser

/// Durations as users write them on the command line: `1h`, `15m`, `10s`, `1h30m`, or plain
/// seconds (`90`).
public enum DurationText {
    /// The whole seconds `text` names, within `range`; otherwise a `ValidationError` naming `option`.
    public static func seconds(_ text: String, option: String, range: ClosedRange<Int64>) throws(ValidationError) -> Int64 {
        let allowed = "\(describe(range.lowerBound)) to \(describe(range.upperBound))"
        guard let total = total(text) else {
            throw ValidationError("\(option) \(text) is no duration: write it like 1h, 15m, 10s or 1h30m (\(allowed))")
        }
        guard range.contains(total) else {
            throw ValidationError("\(option) \(text) is too \(total < range.lowerBound ? "short" : "long"): use \(allowed)")
        }
        return total
    }

    /// The whole seconds `text` names, whatever their number; nil when it is no duration or its
    /// seconds do not fit in an Int64 (`99999999999999999999h`).
    static func total(_ text: String) -> Int64? {
        var total: Int64 = 0
        var number = ""
        var sawUnit = false
        for character in text.lowercased() {
            if character.isASCII, character.isNumber {
                number.append(character)
                continue
            }
            let unit: Int64
            switch character {
            case "h": unit = 3_600
            case "m": unit = 60
            case "s": unit = 1
            default: return nil
            }
            guard let value = Int64(number), let sum = add(value, times: unit, to: total) else { return nil }
            total = sum
            number = ""
            sawUnit = true
        }
        if !number.isEmpty {
            guard !sawUnit, let value = Int64(number), let sum = add(value, times: 1, to: total) else { return nil }
            total = sum
        } else if !sawUnit {
            return nil
        }
        return total
    }

    /// `total + value × unit`, nil on overflow.
    private static func add(_ value: Int64, times unit: Int64, to total: Int64) -> Int64? {
        let product = value.multipliedReportingOverflow(by: unit)
        guard !product.overflow else { return nil }
        let sum = total.addingReportingOverflow(product.partialValue)
        return sum.overflow ? nil : sum.partialValue
    }

    /// `1 second`, `24 hours`, `7 days`.
    static func describe(_ seconds: Int64) -> String {
        if seconds % 86_400 == 0, seconds >= 86_400 * 2 { return "\(seconds / 86_400) days" }
        if seconds % 3_600 == 0, seconds >= 3_600 { return seconds == 3_600 ? "1 hour" : "\(seconds / 3_600) hours" }
        return seconds == 1 ? "1 second" : "\(seconds) seconds"
    }
}
