import ArgumentParser
import CaptureCLISupport

/// `--config FILE`: settings from a JSON file, and the precedence of the settings' sources.
struct ConfigFileOption: ParsableArguments {
    @Option(name: .long, help: ConfigFileHelp.help(program: "capture-send", positionals: #" (the receiver HOST:PORT is "receiver")"#))
    var config: String?
}

extension CaptureSend {
    /// capture-send's settings: the options and flags of `capture-send --help`, and the receiver.
    /// `main()` (SpoolCommands.swift) puts them, from `CAPTURE_SEND_…` variables and the config
    /// file, before the user's own arguments for sending (docs/DESIGN.md, "Configuration");
    /// `capture-send spool …` takes none.
    static let settings = CommandSettings(of: CaptureSend.self, program: "capture-send", positionalKeys: ["receiver"])
}
