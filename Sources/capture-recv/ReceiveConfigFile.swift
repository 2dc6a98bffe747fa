import ArgumentParser
import CaptureCLISupport

/// What capture-recv's `--config` help names.
enum ReceiveConfigFile: ConfigFileProgram {
    static let program = "capture-recv"
    static let positionals = ""
}

extension CaptureRecv {
    /// capture-recv's settings: the options and flags of `capture-recv serve --help`.
    static let settings = CommandSettings(of: CaptureRecv.self, program: "capture-recv")
}
