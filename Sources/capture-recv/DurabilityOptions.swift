import ArgumentParser
import CaptureCLISupport
import CaptureReceiver

/// capture-recv's options for streams that lose their connection (see docs/DURABILITY.md).
struct DurabilityOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ReceiveRanges.resumeWindow.help(
            "Seconds an interrupted stream's file stays open for its sender to resume it (also after a restart of capture-recv); then it is finalized with what it holds. 0 finalizes at once.",
            valueName: "SECONDS", default: "86400"),
        transform: ReceiveRanges.resumeWindow.real)
    var resumeWindow: Double = 86_400

    @Option(
        name: .long,
        help: ReceiveRanges.maxWaitingStreams.help(
            "Interrupted streams that may wait for their senders at once (counted in the whole output folder, at every sweep: once a minute, or every --resume-window if shorter); beyond it the ones waiting longest are finalized early and logged.",
            valueName: "N", default: "10000"),
        transform: ReceiveRanges.maxWaitingStreams.integer)
    var maxWaitingStreams = 10_000

    /// Applies the options to the receiver's configuration.
    func apply(to configuration: inout ReceiverConfiguration) {
        configuration.resumeWindow = resumeWindow
        configuration.maximumWaitingStreams = maxWaitingStreams
    }
}
