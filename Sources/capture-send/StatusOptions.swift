import CaptureCore
import ArgumentParser
import CaptureCLISupport
import CaptureStatus

/// `--status-interval` and `--quiet`: the live status line.
struct StatusOptions: ParsableArguments {
    @Option(
        name: .long,
        help: SendRanges.statusInterval.help(
            "When standard error is not a terminal, or with --log-format json, write a status line (plain key=value, or JSON) every this many seconds; on a terminal the line is redrawn about 10 times a second.",
            valueName: "SECONDS", default: "10"),
        transform: SendRanges.statusInterval.real)
    var statusInterval = 10.0

    @Flag(name: .long, help: "No status line at all.")
    var quiet = false

    /// --status-interval as a duration.
    var interval: Duration { .nanoseconds(Saturating.nanoseconds(seconds: statusInterval)) }

    /// The status reporter on standard error, writing through `console` (which the log lines share).
    func makeReporter(
        console: StatusConsole, logFormat: LogFormat, snapshot: @escaping @Sendable () -> SenderStatusSnapshot
    ) -> StatusReporter {
        StatusReporter.standardError(
            console: console, interval: interval, quiet: quiet,
            json: logFormat == .json, snapshot: snapshot
        )
    }
}
