import ArgumentParser
import CaptureReceiver

/// capture-recv's options for streams that lose their connection (see docs/DURABILITY.md).
struct DurabilityOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Seconds an interrupted stream's file stays open for its sender to resume it (also after a restart of capture-recv); then it is finalized with what it holds. 0 finalizes at once.",
        valueName: "SECONDS"))
    var resumeWindow: Double = 86_400

    func validate() throws {
        guard resumeWindow >= 0, resumeWindow.isFinite else { throw ValidationError("--resume-window must be 0 or more seconds") }
    }

    /// Applies the options to the receiver's configuration.
    func apply(to configuration: inout ReceiverConfiguration) {
        configuration.resumeWindow = resumeWindow
    }
}
