import ArgumentParser
import CaptureCLISupport
import CaptureConsole
import CaptureSecurity

/// `--http`: where capture-recv serves its console, API and metrics, and who may use them.
struct HTTPOptions: ParsableArguments {
    @Option(
        name: [.customLong("http"), .customLong("metrics")],
        help: ArgumentHelp(
            "Serve the console (http://HOST:PORT/), the streams API (/api/…, docs/HTTP-API.md) and Prometheus metrics (/metrics) on this address (off by default; port 0 picks a free one, announced on standard output). HTTPS with the receiver's certificate when --tls-cert is given. An address other than loopback needs --http-token-file. --metrics is the same option under its old name.",
            valueName: "HOST:PORT"),
        transform: HostAndPort.listenAddress)
    var http: HostAndPort?

    @Option(name: .long, help: ArgumentHelp("The tokens (one per line) that may use the console, API and metrics: as `Authorization: Bearer TOKEN`, or through the console's login form. Needed for any --http address but loopback, where nothing is needed (the console plays live audio).", valueName: "FILE"))
    var httpTokenFile: String?

    /// Who may use the server; nil without --http. Throws (one line for the user) for a token file
    /// without --http, an unreadable token file, or an address beyond loopback without tokens.
    func access() throws -> ConsoleAccess? {
        guard let http else {
            if httpTokenFile != nil { throw CLIError("--http-token-file needs --http HOST:PORT (where the console is served)") }
            return nil
        }
        let tokens = try httpTokenFile.map { path throws(SecurityError) in try AuthTokens.load(path: path) }
        return try ConsoleAccess(host: http.host, tokens: tokens)
    }
}
