import ArgumentParser

/// `--status-interval` and `--quiet`: the live status line.
struct StatusOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("When standard error is not a terminal, write a plain status line every this many seconds (on a terminal the line is redrawn about 10 times a second).", valueName: "SECONDS"))
    var statusInterval = 10.0

    @Flag(name: .long, help: "No status line at all.")
    var quiet = false

    func validate() throws {
        guard statusInterval > 0, statusInterval.isFinite else {
            throw ValidationError("--status-interval must be a number of seconds above 0")
        }
    }
}
