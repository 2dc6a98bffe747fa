import Foundation

/// Where a setting's value came from, in the words a user would look for it with.
public enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    /// `CAPTURE_SEND_RATE=44100`.
    case environment(variable: String, value: String)
    /// `"rate" in the config file /etc/capture-streamer/capture-send.json`.
    case file(path: String, key: String)

    public var description: String {
        switch self {
        case .environment(let variable, let value): return "\(variable)=\(value)"
        case .file(let path, let key): return "\"\(key)\" in the config file \(path)"
        }
    }
}

/// A setting from the environment or the config file that cannot be used: what is wrong, where
/// it is, and how to write it instead. One line, as the executables print it after `Error: `.
public enum ConfigurationError: Error, Equatable, CustomStringConvertible {
    /// `CAPTURE_SEND_SPOOL_MAXX` names no option.
    case unknownVariable(name: String, program: String)
    /// A key of the config file names no option.
    case unknownKey(key: String, path: String, program: String)
    /// The config file sets `config`.
    case configInFile(path: String)
    /// A value of the wrong kind: text for a flag, true for an option.
    case wrongType(setting: CommandSettings.Setting, source: SettingSource)
    /// The config file cannot be read; `namedBy` is `--config` or the variable that named it.
    case fileUnreadable(path: String, namedBy: String, reason: String)
    /// The config file is not JSON.
    case fileNotJSON(path: String, detail: String?)
    /// The config file is JSON but not one object.
    case fileNotAnObject(path: String)
    /// A key of the config file holds an object.
    case nestedObject(key: String, path: String)
    /// A key of the config file holds a list of other things than text.
    case listOfNonText(key: String, path: String)
    /// ArgumentParser refused the arguments made from settings: its message, and where they came from.
    case rejected(message: String, sources: [SettingSource])

    private static let example = #"{"rate": 48000, "tls": true}"#

    /// One line whatever the names and values in it hold: control characters (a newline in a config
    /// file's text, in a variable) are written as escapes, as in the log lines.
    public var description: String { LineLogHandler.escaped(sentence) }

    private var sentence: String {
        switch self {
        case .unknownVariable(let name, let program):
            return "\(name) is not a setting of \(program); settings are the long options of `\(program) --help`"
        case .unknownKey(let key, let path, let program):
            return "\"\(key)\" in the config file \(path) is not a setting of \(program); settings are the long options of `\(program) --help`, written without the dashes"
        case .configInFile(let path):
            return "\"config\" in the config file \(path): a config file cannot name another one; give --config FILE on the command line or in the environment"
        case .wrongType(let setting, let source):
            switch (setting.kind, source) {
            case (.flag, .environment):
                return "\(source): \(setting.spelling) is a flag; set it to 1, 0, yes, no, true or false"
            case (.flag, .file):
                return "\(source): \(setting.spelling) is a flag; write true or false"
            case (_, _) where setting.isRepeating:
                return "\(source): \(setting.spelling) takes text or a list of text, like [\"a\", \"b\"]"
            case (_, _):
                return "\(source): \(setting.spelling) takes one value; write text or a number"
            }
        case .fileUnreadable(let path, let namedBy, let reason):
            return "cannot read the config file \(path) (named by \(namedBy)): \(reason)"
        case .fileNotJSON(let path, let detail):
            let why = detail.map { " (\($0.trimmingCharacters(in: .whitespacesAndNewlines)))" } ?? ""
            return "the config file \(path) is not JSON\(why): write one JSON object whose keys are the long options, like \(Self.example)"
        case .fileNotAnObject(let path):
            return "the config file \(path) is not a JSON object: write one object whose keys are the long options, like \(Self.example)"
        case .nestedObject(let key, let path):
            return "\"\(key)\" in the config file \(path) holds an object; settings are plain values: text, numbers, true or false"
        case .listOfNonText(let key, let path):
            return "\"\(key)\" in the config file \(path) holds a list of other things than text; lists are for options that can be repeated, and hold text"
        case .rejected(let message, let sources):
            return "\(message) (from \(sources.map(\.description).joined(separator: ", ")))"
        }
    }
}
