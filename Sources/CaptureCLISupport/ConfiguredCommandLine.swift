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

/// The help of `--config`, the same for both executables but for their names.
public enum ConfigFileHelp {
    /// `--config FILE`: what the file holds, the variables, and the precedence.
    public static func help(program: String, positionals: String = "") -> ArgumentHelp {
        let prefix = CommandSettings.environmentName([program])
        return ArgumentHelp(
            """
            JSON file of settings: one object whose keys are the long options without the dashes, \
            like {"rate": 48000, "tls": true}\(positionals) (default: $\(prefix)_CONFIG, else none). \
            Every option can also be set in the environment as \(prefix)_<OPTION>, the long option in \
            upper case with underscores for dashes (\(prefix)_LOG_LEVEL=debug; flags take 1, 0, yes, no, \
            true or false). The command line wins over the environment, the environment over the file, \
            the file over the defaults.
            """,
            valueName: "FILE")
    }
}
