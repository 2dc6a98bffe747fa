import ArgumentParser
import Foundation

/// The settings of an executable's main command, as ArgumentParser itself describes them
/// (`_dumpHelp()`): every long option and flag, the positionals, and the subcommands. There is no
/// hand-written list: an option added to a command is a setting from then on.
public struct CommandSettings: Sendable, Equatable {
    /// One thing a user can set.
    public struct Setting: Sendable, Equatable {
        /// How a setting is written on the command line.
        public enum Kind: Sendable, Equatable {
            /// `--tls`: present or not.
            case flag
            /// `--rate 48000`.
            case option
            /// `127.0.0.1:7373`: by position.
            case positional
        }

        /// The key in the config file: the long option name without dashes (`stop-timeout`), or
        /// for a positional the name the executable gives it (`receiver`).
        public let key: String
        public let kind: Kind
        /// Repeatable options (`--host a --host b`) take a list.
        public let isRepeating: Bool

        public init(key: String, kind: Kind, isRepeating: Bool = false) {
            self.key = key
            self.kind = kind
            self.isRepeating = isRepeating
        }

        /// How the setting is spelled on the command line: `--stop-timeout` (a positional has no spelling).
        public var spelling: String { kind == .positional ? key : "--\(key)" }
    }

    /// The executable's name, `capture-send`.
    public let program: String
    /// The settable options, flags and named positionals of the main command, in declaration order.
    public let settings: [Setting]
    /// Every spelling of every named argument of the main command (`--rate`, `-h`) and whether it
    /// takes a value, for walking a user's command line.
    public let spellings: [String: Bool]
    /// The names of the subcommands (`recover`, `gen-cert`, `help`); nothing is injected into those.
    public let subcommands: Set<String>
    /// The subcommand that runs when none is named (`serve`); settings belong to it.
    public let defaultSubcommand: String?

    /// The name of the option that names the config file.
    public static let configKey = "config"
    /// Arguments ArgumentParser adds itself, which are no settings.
    static let builtInKeys: Set<String> = ["help", "version", "experimental-dump-help", "generate-completion-script"]

    /// Each setting's variable and `config`'s (`CAPTURE_SEND_RATE` for `rate`), spelled once here:
    /// the environment is checked against them at every start (and every settings fuzz input).
    public let environmentVariables: [String: String]
    /// The prefix of all of the program's variables: `CAPTURE_SEND_`.
    public let environmentPrefix: String
    /// The variables that name a setting; any other with the prefix is an error.
    public let knownVariables: Set<String>

    public init(program: String, settings: [Setting], spellings: [String: Bool], subcommands: Set<String>, defaultSubcommand: String?) {
        self.program = program
        self.settings = settings
        self.spellings = spellings
        self.subcommands = subcommands
        self.defaultSubcommand = defaultSubcommand
        environmentVariables = Dictionary(
            (settings.map(\.key) + [Self.configKey]).map { ($0, Self.environmentName([program, $0])) }, uniquingKeysWith: { first, _ in first })
        environmentPrefix = Self.environmentName([program]) + "_"
        knownVariables = Set(environmentVariables.values)
    }

    /// The settings of `command` (the root command of an executable).
    /// - Parameter positionalKeys: the config keys of the main command's positionals, in order
    ///   (ArgumentParser knows them only by their value names); positionals without one cannot be set.
    public init(of command: any ParsableCommand.Type, program: String, positionalKeys: [String] = []) {
        // The dump is ArgumentParser's own JSON of the command tree; it always decodes.
        var dump = (try? Self.decode(command._dumpHelp())) ?? DumpedCommand(commandName: program)
        // The dump leaves out which subcommand is the default; the configuration says it.
        dump.defaultSubcommand = dump.defaultSubcommand ?? command.configuration.defaultSubcommand?._commandName
        self.init(dump: dump, program: program, positionalKeys: positionalKeys)
    }

    /// The settings from ArgumentParser's ToolInfo JSON (the output of `_dumpHelp()`).
    public init(dumpedHelp json: String, program: String, positionalKeys: [String] = []) throws {
        self.init(dump: try Self.decode(json), program: program, positionalKeys: positionalKeys)
    }

    private init(dump root: DumpedCommand, program: String, positionalKeys: [String]) {
        let subcommands = root.subcommands ?? []
        var main = root
        if let name = root.defaultSubcommand, let defaultCommand = subcommands.first(where: { $0.commandName == name }) {
            main = defaultCommand
        }
        var settings: [Setting] = []
        var spellings: [String: Bool] = [:]
        var positionalIndex = 0
        for argument in main.arguments ?? [] {
            switch argument.kind {
            case "positional":
                if positionalIndex < positionalKeys.count {
                    settings.append(Setting(key: positionalKeys[positionalIndex], kind: .positional, isRepeating: argument.isRepeating ?? false))
                }
                positionalIndex += 1
            case "flag", "option":
                let takesValue = argument.kind == "option"
                for name in argument.names ?? [] {
                    spellings[(name.kind == "long" ? "--" : "-") + name.name] = takesValue
                }
                // Every long name is a setting: an option renamed keeps its old variable and key
                // (`--metrics`, now also `--http`, is still CAPTURE_RECV_METRICS).
                for long in (argument.names ?? []).filter({ $0.kind == "long" }).map(\.name)
                where !Self.builtInKeys.contains(long) && long != Self.configKey {
                    settings.append(Setting(key: long, kind: takesValue ? .option : .flag, isRepeating: argument.isRepeating ?? false))
                }
            default:
                continue
            }
        }
        self.init(
            program: program, settings: settings, spellings: spellings,
            subcommands: Set(subcommands.flatMap { [$0.commandName] + ($0.aliases ?? []) }),
            defaultSubcommand: root.defaultSubcommand)
    }

    /// One command of an executable's tree (`capture-send spool deliver`) and the long options it
    /// takes, for checks that go through every option of every command.
    public struct CommandOptions: Sendable, Equatable {
        /// The command's names from the root: `["capture-recv", "gen-cert"]`.
        public let path: [String]
        /// Its options and flags (not ArgumentParser's own `--help`, nor `--config`).
        public let options: [Setting]
    }

    /// Every command of `command`'s tree, the root first, each with its long options, as
    /// ArgumentParser's dump lists them.
    public static func commands(of command: any ParsableCommand.Type) -> [CommandOptions] {
        guard let root = try? decode(command._dumpHelp()) else { return [] }
        var found: [CommandOptions] = []
        func visit(_ dumped: DumpedCommand, path: [String]) {
            let options = (dumped.arguments ?? []).flatMap { argument -> [Setting] in
                guard argument.kind == "flag" || argument.kind == "option" else { return [] }
                return (argument.names ?? []).filter { $0.kind == "long" && !builtInKeys.contains($0.name) && $0.name != configKey }.map {
                    Setting(key: $0.name, kind: argument.kind == "option" ? .option : .flag, isRepeating: argument.isRepeating ?? false)
                }
            }
            found.append(CommandOptions(path: path, options: options))
            for subcommand in dumped.subcommands ?? [] where subcommand.commandName != "help" {
                visit(subcommand, path: path + [subcommand.commandName])
            }
        }
        visit(root, path: [root.commandName])
        return found
    }

    /// The setting with config key `key`.
    public func setting(_ key: String) -> Setting? { settings.first { $0.key == key } }

    /// The environment variable of a setting: `CAPTURE_SEND_STOP_TIMEOUT` for `stop-timeout`,
    /// the way swift-configuration's EnvironmentVariablesProvider spells the key
    /// `["capture-send", "stop-timeout"]`.
    public func environmentVariable(_ key: String) -> String {
        environmentVariables[key] ?? Self.environmentName([program, key])
    }

    /// Upper case, anything but letters and digits an underscore, components joined by underscores.
    static func environmentName(_ components: [String]) -> String {
        components.map { component in
            String(component.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
        }.joined(separator: "_")
    }

    private static func decode(_ json: String) throws -> DumpedCommand {
        try JSONDecoder().decode(DumpedTool.self, from: Data(json.utf8)).command
    }
}

/// The parts of ArgumentParser's ToolInfo JSON (`_dumpHelp()`) that name the arguments.
private struct DumpedTool: Decodable {
    var command: DumpedCommand
}

private struct DumpedCommand: Decodable, Equatable {
    var commandName: String
    var aliases: [String]?
    var defaultSubcommand: String?
    var subcommands: [DumpedCommand]?
    var arguments: [DumpedArgument]?

    init(commandName: String) { self.commandName = commandName }
}

private struct DumpedArgument: Decodable, Equatable {
    struct Name: Decodable, Equatable {
        var kind: String
        var name: String
    }

    var kind: String
    var isRepeating: Bool?
    var names: [Name]?
}
