import ArgumentParser

/// The values of a parsed command's options by long name, read from its `@Option` properties and
/// those of its option groups: what the tests and the `settings` fuzz target check against the
/// documented ranges, whatever path the values took (command line, variable, config file).
public enum ParsedOptions {
    /// Each `@Option`'s value, by the long name ArgumentParser derives from the property
    /// (`toneFrequency` is `tone-frequency`); optionals that are unset are left out.
    public static func values(of arguments: any ParsableArguments) -> [String: Any] {
        var values: [String: Any] = [:]
        collect(arguments, into: &values)
        return values
    }

    /// The options whose value is a number type (`Int`, `Double`, or an optional of them): every one
    /// of them must have a `NumericOption`.
    public static func numberKeys(of arguments: any ParsableArguments) -> Set<String> {
        var keys: Set<String> = []
        collectNumberKeys(arguments, into: &keys)
        return keys
    }

    /// For each of `ranges` that `arguments` has, its value when it lies outside the range, in words:
    /// empty when every value is within its range.
    public static func outOfRange(_ arguments: any ParsableArguments, ranges: [NumericOption]) -> [String] {
        let values = values(of: arguments)
        return ranges.compactMap { option -> String? in
            guard let value = values[option.name] else { return nil }
            switch value {
            case let number as Int:
                return option.range.contains(Double(number)) ? nil : "\(option.spelling) \(number) is outside \(option.rangeText)"
            case let number as Double:
                return option.range.contains(number) ? nil : "\(option.spelling) \(number) is outside \(option.rangeText)"
            case let text as String:
                return option.value(text) != nil ? nil : "\(option.spelling) \(text) is outside \(option.rangeText)"
            default:
                return "\(option.spelling) holds \(type(of: value)), not a number or text"
            }
        }
    }

    private static func collect(_ arguments: any ParsableArguments, into values: inout [String: Any]) {
        for child in Mirror(reflecting: arguments).children {
            guard let label = child.label else { continue }
            if let group = child.value as? any ArgumentGroupProperty {
                collect(group.arguments, into: &values)
            } else if let option = child.value as? any OptionProperty, let value = option.presentValue {
                values[longName(label)] = value
            }
        }
    }

    private static func collectNumberKeys(_ arguments: any ParsableArguments, into keys: inout Set<String>) {
        for child in Mirror(reflecting: arguments).children {
            guard let label = child.label else { continue }
            if let group = child.value as? any ArgumentGroupProperty {
                collectNumberKeys(group.arguments, into: &keys)
            } else if let option = child.value as? any OptionProperty, option.holdsNumber {
                keys.insert(longName(label))
            }
        }
    }

    /// `_toneFrequency` → `tone-frequency`, as ArgumentParser names a property's long option.
    static func longName(_ label: String) -> String {
        var name = ""
        for character in label.drop(while: { $0 == "_" }) {
            if character.isUppercase {
                name += "-" + character.lowercased()
            } else {
                name.append(character)
            }
        }
        return name
    }
}

/// An `@Option` property, whatever its value type.
private protocol OptionProperty {
    /// The parsed value; nil for an optional that is unset.
    var presentValue: Any? { get }
    /// Whether the value type is a number (`Int`, `Double`, or an optional of them).
    var holdsNumber: Bool { get }
}

extension Option: OptionProperty {
    var presentValue: Any? {
        let value: Any = wrappedValue
        if let optional = value as? any OptionalValue { return optional.wrapped }
        return value
    }

    var holdsNumber: Bool {
        [Int.self, Double.self, Int?.self, Double?.self].contains { ObjectIdentifier($0) == ObjectIdentifier(Value.self) }
    }
}

/// An `@OptionGroup` property.
private protocol ArgumentGroupProperty {
    var arguments: any ParsableArguments { get }
}

extension OptionGroup: ArgumentGroupProperty {
    var arguments: any ParsableArguments { wrappedValue }
}

/// An `Optional`, seen through `Any`.
private protocol OptionalValue {
    var wrapped: Any? { get }
}

extension Optional: OptionalValue {
    var wrapped: Any? { self.map { $0 as Any } }
}
