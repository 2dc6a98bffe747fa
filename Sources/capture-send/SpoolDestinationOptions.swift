import CaptureCLISupport
import CaptureSecurity
import CaptureSender

extension SenderSecurityOptions {
    /// The destination a send with these options goes to: `receiver` as given and, with --tls, the
    /// identity the receiver's certificate is checked against (--pin, --ca and the host, or the
    /// system trust store and the host). Spooled streams are bound to it.
    func destination(for receiver: HostAndPort) throws(CLIError) -> SpoolDestination {
        do throws(SecurityError) {
            var pinned: CertificateFingerprint?
            if let pin { pinned = try CertificateFingerprint(parsing: pin) }
            return try SpoolDestination.of(address: receiver.description, host: receiver.host, tls: tls, pin: pinned, caPath: ca)
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
    }

    /// The TLS settings that deliver a spooled stream to the receiver it was verified against. A
    /// pin comes from the spool; a CA must be given again with --ca (and be the same certificate);
    /// --cert and --key are presented if given.
    func tlsConfiguration(for identity: SpoolDestination.TLSIdentity, stream: String) throws(CLIError) -> SenderTLSConfiguration {
        let trust: PeerCertificateVerifier.Trust
        if let stored = identity.pin {
            let storedPin = try Self.checked { () throws(SecurityError) in try CertificateFingerprint(parsing: stored) }
            if let pin, try Self.checked({ () throws(SecurityError) in try CertificateFingerprint(parsing: pin) }) != storedPin {
                throw CLIError("stream \(stream) was sent to a receiver pinned as \(stored); --pin names another certificate, so it is not delivered there")
            }
            trust = .pin(storedPin)
        } else if let authorities = identity.authorities {
            guard let ca else {
                throw CLIError("stream \(stream) was sent over TLS verified by a CA (SHA-256 \(authorities.joined(separator: ", "))); give that CA's certificate with --tls --ca PEM")
            }
            guard try Self.checked({ () throws(SecurityError) in try SpoolDestination.fingerprints(ofCertificatesIn: ca) }) == authorities else {
                throw CLIError("stream \(stream) was sent over TLS verified by another CA (SHA-256 \(authorities.joined(separator: ", "))) than the one in \(ca); give that CA with --ca")
            }
            trust = .authorities(try Self.checked { () throws(SecurityError) in try PEMFiles.x509Certificates(at: ca) })
        } else {
            trust = .systemStore
        }
        return SenderTLSConfiguration(trust: trust, clientCertificatePath: cert, clientKeyPath: key)
    }

    private static func checked<T>(_ body: () throws(SecurityError) -> T) throws(CLIError) -> T {
        do throws(SecurityError) {
            return try body()
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
    }
}
