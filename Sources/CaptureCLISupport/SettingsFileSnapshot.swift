import Configuration
import Foundation

/// A config file as swift-configuration reads it (`FileProvider<SettingsFileSnapshot>`): the values
/// come from the library's `JSONSnapshot`; this adds what a snapshot cannot be asked, which keys the
/// file has and what kind of JSON value each holds, so that an unknown key or a value of the wrong
/// kind (`"tls": "yes"`, `"rate": true`) is an error that names it instead of being ignored.
public struct SettingsFileSnapshot: FileConfigSnapshot {
    public typealias ParsingOptions = JSONSnapshot.ParsingOptions

    /// The kind of a JSON value.
    public enum ValueKind: Sendable, Equatable {
        case text, number, boolean, list, object, null
    }

    private let values: JSONSnapshot
    /// Each top-level key of the file and the kind of its value.
    public let kinds: [String: ValueKind]

    public var providerName: String { values.providerName }

    public init(data: RawSpan, providerName: String, parsingOptions: ParsingOptions) throws {
        let bytes = data.withUnsafeBytes { Data($0) }
        let top: Any
        do {
            top = try JSONSerialization.jsonObject(with: bytes)
        } catch {
            let detail = (error as NSError).userInfo["NSDebugDescription"] as? String
            throw SettingsFileProblem.notJSON(detail: detail)
        }
        guard let object = top as? [String: Any] else { throw SettingsFileProblem.notAnObject }
        kinds = object.mapValues(Self.kind(of:))
        for (key, kind) in kinds where kind == .object {
            throw SettingsFileProblem.nestedObject(key: key)
        }
        for (key, value) in object {
            if let list = value as? [Any], list.contains(where: { Self.kind(of: $0) != .text }) {
                throw SettingsFileProblem.listOfNonText(key: key)
            }
        }
        do {
            values = try JSONSnapshot(data: data, providerName: providerName, parsingOptions: parsingOptions)
        } catch {
            throw SettingsFileProblem.notJSON(detail: nil)
        }
    }

    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try values.value(forKey: key, type: type)
    }

    public var description: String { values.description }
    public var debugDescription: String { values.debugDescription }

    /// Foundation gives JSON's true and false as numbers whose type code is that of a C char.
    static func kind(of value: Any) -> ValueKind {
        switch value {
        case is String: return .text
        case is NSNull: return .null
        case is [String: Any]: return .object
        case is [Any]: return .list
        case let number as NSNumber:
            return String(cString: number.objCType) == "c" ? .boolean : .number
        default: return .null
        }
    }
}

/// What can be wrong with a config file's content; `ConfigurationError` puts it into a sentence.
enum SettingsFileProblem: Error, Equatable {
    case notJSON(detail: String?)
    case notAnObject
    case nestedObject(key: String)
    case listOfNonText(key: String)
}
