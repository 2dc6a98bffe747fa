import ArgumentParser
import CaptureCLISupport

/// `--config FILE`: settings from a JSON file, and the precedence of the settings' sources.
struct ConfigFileOption: ParsableArguments {
    @Option(name: .long, help: ConfigFileHelp.help(program: "capture-send", positionals: #" (the receiver HOST:PORT is "receiver")"#))
    var config: String?
}

extension CaptureSend {
    /// capture-send's settings: options and flags of `capture-send --help`, and the receiver.
    static let settings = CommandSettings(of: CaptureSend.self, program: "capture-send", positionalKeys: ["receiver"])

    /// Settings from `CAPTURE_SEND_…` variables and the config file become arguments before the
    /// user's own (docs/DESIGN.md, "Configuration"), then ArgumentParser parses them all.
    static func main() {
        main(ConfiguredCommandLine.argumentsOrExitWaiting(for: CaptureSend.self, settings: settings))
    }
}
