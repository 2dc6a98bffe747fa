import Configuration
import Foundation

/// The command line ArgumentParser parses: the settings found through swift-configuration, in the
/// environment (`CAPTURE_SEND_RATE=44100`) and in a config file (`{"rate": 44100}`), turned into
/// arguments placed before the user's own, so that the user's win (ArgumentParser keeps the last
/// value of an option). Precedence: command line, then environment, then config file, then the
/// defaults ArgumentParser applies. ArgumentParser stays the one parser and validator.
public struct ConfiguredArguments: Sendable, Equatable {
    /// One setting put onto the command line, and where its value came from.
    public struct Injected: Sendable, Equatable {
        public let setting: CommandSettings.Setting
        /// `["--rate=44100"]`, `["--tls"]`, `["127.0.0.1:7373"]`.
        public let arguments: [String]
        public let source: SettingSource
    }

    /// What ArgumentParser is given.
    public let arguments: [String]
    /// The settings that came from the environment or the config file, in the order they were put in.
    public let injected: [Injected]
    /// Where the injected arguments are in `arguments`; the user's own follow them.
    let injectedRange: Range<Int>

    init(arguments: [String], injected: [Injected], injectedRange: Range<Int>) {
        self.arguments = arguments
        self.injected = injected
        self.injectedRange = injectedRange
    }

    /// The user's arguments with the settings of `settings.program` from `environment` and from the
    /// config file (named by `--config` or `<PREFIX>_CONFIG`, read from `files`) before them.
    ///
    /// Nothing is added when the user runs another subcommand than the main one, or asks for help.
    /// A positional from the settings is used only when the user gives none. Flags set to false add
    /// nothing; an empty variable counts as unset.
    public static func resolve(
        _ userArguments: [String], settings: CommandSettings, environment: [String: String], files: SettingsFiles = .disk
    ) throws(ConfigurationError) -> ConfiguredArguments {
        let unchanged = ConfiguredArguments(arguments: userArguments, injected: [], injectedRange: 0..<0)
        var start = 0
        if let first = userArguments.first, settings.subcommands.contains(first) {
            guard first == settings.defaultSubcommand else { return unchanged }
            start = 1
        }
        let walk = CommandLineWalk(userArguments[start...], spellings: settings.spellings)
        if walk.asksForHelp { return unchanged }

        let variables = try programVariables(settings: settings, environment: environment)
        let configVariable = settings.environmentVariable(CommandSettings.configKey)
        var providers: [any ConfigProvider] = [
            EnvironmentVariablesProvider(environmentVariables: variables).prefixKeys(with: ConfigKey([settings.program]))
        ]
        var fileKinds: [String: SettingsFileSnapshot.ValueKind] = [:]
        let filePath = walk.configFile ?? variables[configVariable]
        if let filePath {
            let file = try loadFile(filePath, namedBy: walk.configFile != nil ? "--config" : configVariable, from: files)
            fileKinds = file.file.kinds
            for key in fileKinds.keys.sorted() {
                if key == CommandSettings.configKey { throw .configInFile(path: filePath) }
                guard settings.setting(key) != nil else { throw .unknownKey(key: key, path: filePath, program: settings.program) }
            }
            providers.append(file)
        }
        // First provider wins: the environment over the file.
        let reader = ConfigReader(providers: providers)

        var positionals: [Injected] = []
        var named: [Injected] = []
        for setting in settings.settings {
            if setting.kind == .positional, walk.positionalCount > 0 { continue }
            let source: SettingSource
            if let value = variables[settings.environmentVariable(setting.key)] {
                source = .environment(variable: settings.environmentVariable(setting.key), value: value)
            } else if let filePath, let kind = fileKinds[setting.key], kind != .null {
                source = .file(path: filePath, key: setting.key)
                guard Self.fileKind(kind, suits: setting) else { throw .wrongType(setting: setting, source: source) }
            } else {
                continue
            }
            guard let arguments = Self.arguments(for: setting, from: reader) else {
                throw .wrongType(setting: setting, source: source)
            }
            guard !arguments.isEmpty else { continue }
            let injected = Injected(setting: setting, arguments: arguments, source: source)
            if setting.kind == .positional { positionals.append(injected) } else { named.append(injected) }
        }
        let injected = positionals + named
        let injectedArguments = injected.flatMap(\.arguments)
        return ConfiguredArguments(
            arguments: Array(userArguments[..<start]) + injectedArguments + Array(userArguments[start...]),
            injected: injected, injectedRange: start..<(start + injectedArguments.count))
    }

    /// The injected settings an error message of ArgumentParser is about: those whose option it
    /// names (`--rate`, not `--rate-limit`), and positionals whose value it quotes. An option the
    /// user gives too counts only when the message quotes the injected value (`'fast'`).
    public func settings(namedIn message: String) -> [Injected] {
        let userSpellings = Set(arguments.dropFirst(injectedRange.upperBound).map { String($0.prefix { $0 != "=" }) })
        return injected.filter { item in
            switch item.setting.kind {
            case .positional:
                return item.arguments.contains { message.contains($0) }
            case .flag, .option:
                guard Self.message(message, names: item.setting.spelling) else { return false }
                guard userSpellings.contains(item.setting.spelling) else { return true }
                return item.arguments.contains { argument in
                    argument.split(separator: "=", maxSplits: 1).dropFirst().first.map { message.contains("'\($0)'") } ?? false
                }
            }
        }
    }

    static func message(_ message: String, names option: String) -> Bool {
        var rest = message[...]
        while let range = rest.range(of: option) {
            guard let next = rest[range.upperBound...].first, next.isLetter || next.isNumber || next == "-" else { return true }
            rest = rest[range.upperBound...]
        }
        return false
    }

    /// The program's variables (`CAPTURE_SEND_…`), non-empty ones only; one that names no setting
    /// is an error.
    private static func programVariables(settings: CommandSettings, environment: [String: String]) throws(ConfigurationError) -> [String: String] {
        var variables: [String: String] = [:]
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) where name.hasPrefix(settings.environmentPrefix) && !value.isEmpty {
            guard settings.knownVariables.contains(name) else { throw .unknownVariable(name: name, program: settings.program) }
            variables[name] = value
        }
        return variables
    }

    /// Whether a value of the file has the kind the setting takes.
    private static func fileKind(_ kind: SettingsFileSnapshot.ValueKind, suits setting: CommandSettings.Setting) -> Bool {
        switch setting.kind {
        case .flag: return kind == .boolean
        case .option, .positional: return kind == .text || kind == .number || (setting.isRepeating && kind == .list)
        }
    }

    /// The arguments for one setting, read through swift-configuration; nil when its value is of the wrong kind.
    private static func arguments(for setting: CommandSettings.Setting, from reader: ConfigReader) -> [String]? {
        let key = ConfigKey([setting.key])
        switch setting.kind {
        case .flag:
            return reader.bool(forKey: key).map { $0 ? [setting.spelling] : [] }
        case .option where setting.isRepeating:
            return (reader.stringArray(forKey: key) ?? singleValue(key, reader).map { [$0] })?.map { "\(setting.spelling)=\($0)" }
        case .option:
            // `--name=value`, so that a value starting with a dash (--tone-level=-6) stays a value.
            return singleValue(key, reader).map { ["\(setting.spelling)=\($0)"] }
        case .positional:
            return singleValue(key, reader).map { [$0] }
        }
    }

    /// Text as it is; a number as written on a command line (48000, 2.5).
    private static func singleValue(_ key: ConfigKey, _ reader: ConfigReader) -> String? {
        reader.string(forKey: key) ?? reader.int(forKey: key).map(String.init) ?? reader.double(forKey: key).map { "\($0)" }
    }

    /// The config file's provider; its problems in words.
    private static func loadFile(_ path: String, namedBy: String, from files: SettingsFiles) throws(ConfigurationError) -> SettingsFileProvider {
        let data: Data
        switch files.read(path) {
        case .success(let bytes): data = bytes
        case .failure(let unreadable): throw .fileUnreadable(path: path, namedBy: namedBy, reason: unreadable.reason)
        }
        do {
            return try SettingsFileProvider(data: data)
        } catch let problem as SettingsFileProblem {
            switch problem {
            case .notJSON(let detail): throw .fileNotJSON(path: path, detail: detail)
            case .notAnObject: throw .fileNotAnObject(path: path)
            case .nestedObject(let key): throw .nestedObject(key: key, path: path)
            case .listOfNonText(let key): throw .listOfNonText(key: key, path: path)
            }
        } catch {
            throw .fileNotJSON(path: path, detail: nil)
        }
    }
}

/// What a user's own command line says, read with the command's table of spellings: the config
/// file it names, how many positionals it has, whether it asks for help.
struct CommandLineWalk: Equatable {
    private(set) var configFile: String?
    private(set) var positionalCount = 0
    private(set) var asksForHelp = false

    static let helpSpellings: Set<String> = ["--help", "-h", "-help"]

    init(_ arguments: ArraySlice<String>, spellings: [String: Bool]) {
        var index = arguments.startIndex
        var afterTerminator = false
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if afterTerminator || argument == "-" || !argument.hasPrefix("-") {
                positionalCount += 1
                continue
            }
            if argument == "--" {
                afterTerminator = true
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            var value = parts.count > 1 ? String(parts[1]) : nil
            if Self.helpSpellings.contains(name) { asksForHelp = true }
            if value == nil, spellings[name] == true, index < arguments.endIndex {
                value = arguments[index]
                index += 1
            }
            if name == "--\(CommandSettings.configKey)", let value { configFile = value }
        }
    }
}
