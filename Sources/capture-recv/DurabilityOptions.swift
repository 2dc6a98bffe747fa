import ArgumentParser
import CaptureCLISupport
import CaptureCore
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

    @Option(
        name: .long,
        help: ReceiveRanges.checkpointSeconds.help(
            "Seconds between checkpoints while audio arrives (and at once when the commit log has grown 1 GiB): a checkpoint makes the recordings durable and lets the log before it be reused; a restart replays at most what came since.",
            valueName: "SECONDS", default: "30"),
        transform: ReceiveRanges.checkpointSeconds.integer)
    var checkpointS = 30

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Folder for the commit log (created if missing), which makes every acknowledged round durable with one sync of one file: put it on a fast local volume when --out is a network share. Each receiver keeps its log in a folder of its own inside; a receiver that takes over a stream from a dead one replays that one's log only where it can see it. (default: OUT/.commit-log)",
            valueName: "DIR"))
    var logDir: String?

    /// Applies the options to the receiver's configuration.
    func apply(to configuration: inout ReceiverConfiguration) {
        configuration.logDirectory = logDir
        configuration.syncPolicy.checkpointInterval = .seconds(checkpointS)
        configuration.resumeWindow = .nanoseconds(Saturating.nanoseconds(seconds: resumeWindow))
        configuration.maximumWaitingStreams = maxWaitingStreams
    }
}
