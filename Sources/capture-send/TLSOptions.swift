import ArgumentParser
import CaptureCLISupport
import CaptureSecurity
import CaptureSender
import Foundation
import Logging

/// capture-send's TLS and authentication options (docs/SECURITY.md explains them).
struct SenderSecurityOptions: ParsableArguments {
    @Flag(name: .long, help: "Connect with TLS (1.2 or 1.3). The receiver's certificate is checked against --ca (or the system trust store) and the HOST of HOST:PORT, or against --pin.")
    var tls = false

    @Option(name: .long, help: ArgumentHelp("With --tls: PEM file of the CA that signed the receiver's certificate (default: the system trust store).", valueName: "PEM"))
    var ca: String?

    @Option(name: .long, help: ArgumentHelp("With --tls: accept exactly the receiver certificate with this SHA-256 fingerprint (64 hex digits, colons allowed), as `capture-recv gen-cert` prints it; no CA, no host name check.", valueName: "SHA256"))
    var pin: String?

    @Option(name: .long, help: ArgumentHelp("With --tls: PEM client certificate for receivers that require mutual TLS (--client-ca).", valueName: "PEM"))
    var cert: String?

    @Option(name: .long, help: ArgumentHelp("With --cert: the PEM private key of the client certificate.", valueName: "PEM"))
    var key: String?

    @Option(name: .long, help: ArgumentHelp("File whose first token (one a line, # comments ignored) is sent to receivers that require one (default: the CAPTURE_TOKEN environment variable, else none).", valueName: "FILE"))
    var tokenFile: String?

    /// The environment variable a token can come from, so that it never shows in `ps`.
    static let tokenVariable = "CAPTURE_TOKEN"

    func validate() throws {
        if !tls {
            for (name, value) in [("--ca", ca), ("--pin", pin), ("--cert", cert), ("--key", key)] where value != nil {
                throw ValidationError("\(name) goes with --tls; add --tls to connect with TLS")
            }
        }
        if ca != nil, pin != nil { throw ValidationError("give either --ca or --pin, not both: a pin trusts one certificate, a CA the certificates it signed") }
        if (cert == nil) != (key == nil) { throw ValidationError("--cert and --key go together: give the client certificate and its private key") }
        if let pin {
            do { _ = try CertificateFingerprint(parsing: pin) } catch { throw ValidationError(error.message(naming: CommandLineSettingNames())) }
        }
    }

    /// The TLS settings, or nil without --tls.
    func tlsConfiguration() throws(CLIError) -> SenderTLSConfiguration? {
        guard tls else { return nil }
        do throws(SecurityError) {
            let trust: PeerCertificateVerifier.Trust
            if let pin {
                trust = .pin(try CertificateFingerprint(parsing: pin))
            } else if let ca {
                trust = .authorities(try PEMFiles.certificateAuthorities(at: ca))
            } else {
                trust = .systemStore
            }
            return SenderTLSConfiguration(trust: trust, clientCertificatePath: cert, clientKeyPath: key)
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
    }

    /// The token to present: from --token-file, else CAPTURE_TOKEN, else none (empty).
    func authToken(logger: Logger) throws(CLIError) -> String {
        if let tokenFile {
            do throws(SecurityError) {
                let tokens = try AuthTokens.load(path: tokenFile)
                tokens.warnings.forEach { logger.warning("\($0)") }
                return tokens.tokens[0]
            } catch {
                throw CLIError(error.message(naming: CommandLineSettingNames()))
            }
        }
        return ProcessInfo.processInfo.environment[Self.tokenVariable]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }
}
