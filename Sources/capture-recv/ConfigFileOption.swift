import ArgumentParser
import CaptureCLISupport

/// `--config FILE`: settings from a JSON file, and the precedence of the settings' sources.
struct ConfigFileOption: ParsableArguments {
    @Option(name: .long, help: ConfigFileHelp.help(program: "capture-recv"))
    var config: String?
}

extension CaptureRecv {
    /// capture-recv's settings: the options and flags of `capture-recv serve --help`.
    static let settings = CommandSettings(of: CaptureRecv.self, program: "capture-recv")
}
