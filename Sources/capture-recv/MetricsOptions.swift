import ArgumentParser
import CaptureCLISupport

/// `--metrics`: where capture-recv serves Prometheus metrics.
struct MetricsOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Serve Prometheus metrics at http://HOST:PORT/metrics (off by default; port 0 picks a free one, announced on standard output).", valueName: "HOST:PORT"), transform: HostAndPort.listenAddress)
    var metrics: HostAndPort?
}
