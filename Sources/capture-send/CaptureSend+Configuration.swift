import ArgumentParser
import CaptureCLISupport

/// What capture-send's `--config` help names.
enum SendConfigFile: ConfigFileProgram {
    static let program = "capture-send"
    static let positionals = #" (the receiver HOST:PORT is "receiver")"#
}

extension CaptureSend {
    /// capture-send's settings: the options and flags of `capture-send --help`, and the receiver.
    /// `main()` (CaptureSendProgram.swift) puts them, from `CAPTURE_SEND_…` variables and the config
    /// file, before the user's own arguments for sending (docs/DESIGN.md, "Configuration");
    /// `capture-send spool …` takes none.
    static let settings = CommandSettings(of: CaptureSend.self, program: "capture-send", positionalKeys: ["receiver"])
}
