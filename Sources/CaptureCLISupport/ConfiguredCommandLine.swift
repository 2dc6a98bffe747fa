import CaptureCore
import ArgumentParser
import Foundation

/// What an executable's `static func main()` calls before ArgumentParser: the user's command line
/// with the settings from the environment and the config file put before it (`ConfiguredArguments`),
/// checked so that a value ArgumentParser refuses is reported with where it came from.
public enum ConfiguredCommandLine {
    /// The arguments to hand to `main(_:)`; on a configuration problem, `Error: …` (one line) on
    /// standard error and exit 64, the code of ArgumentParser's usage errors.
    public static func argumentsOrExit(
        for command: any ParsableCommand.Type, settings: CommandSettings,
        userArguments: [String] = Array(CommandLine.arguments.dropFirst()),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [String] {
        do {
            return try arguments(for: command, settings: settings, userArguments: userArguments, environment: environment)
        } catch {
            StandardStreams.writeError("Error: \(error.description)\n")
            exit(ExitCode.validationFailure.rawValue)
        }
    }

    /// The arguments to parse, or the configuration problem; config files are read from `files`.
    public static func arguments(
        for command: any ParsableCommand.Type, settings: CommandSettings, userArguments: [String], environment: [String: String],
        files: SettingsFiles = .disk
    ) throws(ConfigurationError) -> [String] {
        let resolved = try ConfiguredArguments.resolve(userArguments, settings: settings, environment: environment, files: files)
        if !resolved.injected.isEmpty {
            try check(resolved, userArguments: userArguments, command: command)
        }
        return resolved.arguments
    }

    /// Parses (and validates) the arguments once ahead of ArgumentParser's own run: when they fail
    /// because of a setting, the error names the variable or the file's key it came from. Errors of
    /// the user's own arguments are left to ArgumentParser to report as always.
    static func check(_ resolved: ConfiguredArguments, userArguments: [String], command: any ParsableCommand.Type) throws(ConfigurationError) {
        guard let message = failure(command, resolved.arguments) else { return }
        if failure(command, userArguments) == message { return }
        let named = resolved.settings(namedIn: message)
        throw .rejected(message: message, sources: (named.isEmpty ? resolved.injected : named).map(\.source))
    }

    /// ArgumentParser's message when `arguments` do not parse; nil when they do (or ask for help).
    private static func failure(_ command: any ParsableCommand.Type, _ arguments: [String]) -> String? {
        do {
            _ = try command.parseAsRoot(arguments)
            return nil
        } catch {
            // Help has no message, a refusal always has one (asking ArgumentParser for the exit
            // status as well would render the usage a second time).
            let message = command.message(for: error)
            return message.isEmpty ? nil : message
        }
    }
}

/// What `--config`'s help names for an executable: its name, and how its positional arguments
/// are keyed in the file.
public protocol ConfigFileProgram {
    /// The executable's name (`capture-send`), which also makes its variables' prefix.
    static var program: String { get }
    /// How the file names its positional arguments (` (the receiver HOST:PORT is "receiver")`), or "".
    static var positionals: String { get }
}

/// `--config FILE`, the same in both executables but for their names: settings from a JSON file,
/// and the precedence of the settings' sources.
public struct ConfigFileOption<Program: ConfigFileProgram>: ParsableArguments {
    @Option(name: .long, help: ConfigFileOption.help)
    public var config: String?

    public init() {}

    /// What the file holds, the variables, and the precedence.
    static var help: ArgumentHelp {
        let prefix = CommandSettings.environmentName([Program.program])
        return ArgumentHelp(
            """
            JSON file of settings: one object whose keys are the long options without the dashes, \
            like {"rate": 48000, "tls": true}\(Program.positionals) (default: $\(prefix)_CONFIG, else none). \
            Every option can also be set in the environment as \(prefix)_<OPTION>, the long option in \
            upper case with underscores for dashes (\(prefix)_LOG_LEVEL=debug; flags take 1, 0, yes, no, \
            true or false). The command line wins over the environment, the environment over the file, \
            the file over the defaults.
            """,
            valueName: "FILE")
    }
}

/// How both executables run a command line and end on an error: what ArgumentParser's `main` and
/// `exit(withError:)` do,
/// but with control characters in the `Error:` line's message written as escapes, so a value that
/// holds a carriage return or a newline (a script saved with CRLF line ends: `--rate 48000\r`)
/// cannot garble or split the line (ArgumentParser quotes the value as it is).
public enum CommandLineRun {
    /// Parses `arguments` for `command` and runs what they name; on an error, writes the message and
    /// exits as ArgumentParser's `exit(withError:)` does.
    public static func main(_ command: any ParsableCommand.Type, _ arguments: [String]) {
        do {
            var parsed = try command.parseAsRoot(arguments)
            try parsed.run()
        } catch {
            end(command, error)
        }
    }

    /// `main` for a command tree with asynchronous commands.
    public static func asyncMain(_ command: any ParsableCommand.Type, _ arguments: [String]) async {
        do {
            var parsed = try command.parseAsRoot(arguments)
            if var asynchronous = parsed as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try parsed.run()
            }
        } catch {
            end(command, error)
        }
    }

    /// The message of the `Error:` line for `error` (without `Error: `), on one line.
    public static func message(_ command: any ParsableCommand.Type, _ error: any Error) -> String {
        LineLogHandler.escaped(command.message(for: error))
    }

    /// Help on standard output and exit 0; otherwise ArgumentParser's error text (the `Error:` line,
    /// its message escaped, then the usage) on standard error, and its exit status.
    static func end(_ command: any ParsableCommand.Type, _ error: any Error) -> Never {
        let status = command.exitCode(for: error)
        let text = command.fullMessage(for: error)
        if status == .success {
            if !text.isEmpty { StandardStreams.writeOutput(text + "\n") }
            exit(status.rawValue)
        }
        if !text.isEmpty {
            let message = command.message(for: error)
            let line = "Error: \(message)"
            StandardStreams.writeError((text.hasPrefix(line) ? "Error: \(LineLogHandler.escaped(message))" + text.dropFirst(line.count) : text) + "\n")
        }
        exit(status.rawValue)
    }
}
