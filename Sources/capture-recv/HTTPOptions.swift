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

    @Option(name: .long, help: ArgumentHelp("Another name the console answers to (repeat the option for more): NAME on any port, NAME:PORT on that port only, or an address; such as the public name of a reverse proxy in front of it. Requests for any other name get 421 (against DNS rebinding): the console answers to 127.0.0.1, [::1] and localhost on loopback, to the address given elsewhere, and to this machine's addresses and host name on 0.0.0.0 or [::]. (default: none)", valueName: "NAME[:PORT]"))
    var httpAllowHost: [String] = []

    func validate() throws {
        if !httpAllowHost.isEmpty, http == nil {
            throw ValidationError("--http-allow-host needs --http HOST:PORT (where the console is served)")
        }
        do {
            _ = try ConsoleHostNames(listeningOn: "127.0.0.1", allowing: httpAllowHost)
        } catch {
            throw ValidationError(error.message(naming: CommandLineSettingNames()))
        }
    }

    /// Who may use the server; nil without --http. Throws (one line for the user) for a token file
    /// without --http, an unreadable token file, or an address beyond loopback without tokens.
    func access() throws -> ConsoleAccess? {
        guard let http else {
            if httpTokenFile != nil { throw CLIError("--http-token-file needs --http HOST:PORT (where the console is served)") }
            return nil
        }
        let tokens = try httpTokenFile.map { path throws(SecurityError) in try AuthTokens.load(path: path) }
        return try ConsoleAccess(host: http.host, tokens: tokens, allowedHosts: httpAllowHost)
    }

    /// What the user should know about these settings: names added to a console open without a
    /// token are probably a reverse proxy's, which makes it reachable from elsewhere.
    var warning: String? {
        guard let http, httpTokenFile == nil, !httpAllowHost.isEmpty else { return nil }
        return "--http \(http.host) has no --http-token-file but answers to \(httpAllowHost.joined(separator: ", ")): if a reverse proxy serves the console under that name, anyone who reaches the proxy can listen to every stream; give --http-token-file FILE"
    }
}
