import ArgumentParser
import CaptureCLISupport
import CaptureCore
import CaptureReceiver
import CaptureSecurity
import Logging

/// capture-recv serve's TLS and authentication options (docs/SECURITY.md explains them).
struct ReceiverSecurityOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("PEM certificate (chain) to serve TLS with; with --tls-key, the port speaks only TLS.", valueName: "PEM"))
    var tlsCert: String?

    @Option(name: .long, help: ArgumentHelp("PEM private key of --tls-cert.", valueName: "PEM"))
    var tlsKey: String?

    @Option(name: .long, help: ArgumentHelp("With --tls-cert: PEM CA certificate; senders must present a client certificate signed by it (mutual TLS).", valueName: "PEM"))
    var clientCa: String?

    @Option(name: .long, help: ArgumentHelp("File of accepted tokens, one a line (# comments ignored); senders without one of them are refused.", valueName: "FILE"))
    var tokenFile: String?

    @Option(
        name: .long,
        help: ReceiveRanges.authFailureLimit.help(
            "Failed authentications (token or client certificate) from one address within 60 s after which that address is refused for --auth-block-seconds; 0 for no limit. The refusal is temporary (RATE_LIMITED with a retry-after), and senders resuming a stream they own are still let in.",
            default: "5"),
        transform: ReceiveRanges.authFailureLimit.integer)
    var authFailureLimit = 5

    @Option(
        name: .long, help: ReceiveRanges.authBlockSeconds.help("Seconds an address over --auth-failure-limit is refused.", valueName: "SECONDS", default: "60"),
        transform: ReceiveRanges.authBlockSeconds.real)
    var authBlockSeconds = 60.0

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together: give the certificate and its private key") }
        if clientCa != nil, tlsCert == nil { throw ValidationError("--client-ca needs TLS: add --tls-cert and --tls-key") }
    }

    /// Puts the limits on failed authentications into `configuration`.
    func applyLimits(to configuration: inout ReceiverConfiguration) {
        configuration.authFailureLimit = authFailureLimit
        configuration.authBlockDuration = .nanoseconds(Saturating.nanoseconds(seconds: authBlockSeconds))
    }

    /// Puts the TLS settings and tokens into `configuration`; warns about tokens sent without TLS.
    func apply(to configuration: inout ReceiverConfiguration, logger: Logger) throws(CLIError) {
        if let tlsCert, let tlsKey {
            configuration.tls = ReceiverTLSConfiguration(certificatePath: tlsCert, privateKeyPath: tlsKey, clientCAPath: clientCa)
        }
        guard let tokenFile else { return }
        do throws(SecurityError) {
            let tokens = try AuthTokens.load(path: tokenFile)
            tokens.warnings.forEach { logger.warning("\($0)") }
            configuration.authTokens = tokens
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
        if configuration.tls == nil {
            logger.warning("tokens travel without TLS on this port: anyone on the network path can read them; add --tls-cert and --tls-key")
        }
    }
}
