import CaptureCore
import CaptureSecurity
import Foundation
import NIOCore
import NIOSSL

/// How a sender protects its connection: TLS with the receiver's certificate checked against a CA
/// (or the system trust store) and the host name, or against a pinned fingerprint; optionally with
/// a client certificate for receivers that require mutual TLS.
public struct SenderTLSConfiguration: Sendable {
    /// What the receiver's certificate must satisfy.
    public var trust: PeerCertificateVerifier.Trust
    /// PEM certificate (chain) presented to receivers that ask for one.
    public var clientCertificatePath: String?
    /// PEM private key of the client certificate.
    public var clientKeyPath: String?
    /// Time allowed for the TLS handshake after the TCP connection is up.
    public var handshakeTimeout: Duration

    public init(
        trust: PeerCertificateVerifier.Trust, clientCertificatePath: String? = nil, clientKeyPath: String? = nil,
        handshakeTimeout: Duration = .seconds(10)
    ) {
        self.trust = trust
        self.clientCertificatePath = clientCertificatePath
        self.clientKeyPath = clientKeyPath
        self.handshakeTimeout = handshakeTimeout
    }

    /// The NIOSSL context: TLS 1.2 at least, 1.3 preferred (NIOSSL offers 1.3 first).
    func makeContext() throws(SenderError) -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.maximumTLSVersion = .tlsv13
        // A pin is the whole trust: no host name check. A CA also checks the host name after the handshake.
        if case .pin = trust {
            tls.certificateVerification = .noHostnameVerification
        } else {
            tls.certificateVerification = .fullVerification
        }
        do throws(SecurityError) {
            if let clientCertificatePath, let clientKeyPath {
                tls.certificateChain = try PEMFiles.certificates(at: clientCertificatePath).map { .certificate($0) }
                tls.privateKey = .privateKey(try PEMFiles.privateKey(at: clientKeyPath))
            }
        } catch {
            throw .tls(.unreadableClientCredentials(error))
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw .tls(.cannotSetUp(reason: "\(error)"))
        }
    }

    /// The client handler for one connection to `host`; checks the receiver's certificate and leaves
    /// the reason for a refusal in `report`.
    func makeHandler(context: NIOSSLContext, host: String, report: TLSVerificationReport) throws -> NIOSSLClientHandler {
        let verifier = PeerCertificateVerifier(trust: trust, peerName: "the receiver", authority: .certificateAuthority)
        // SNI takes a name only; for an IP address NIOSSL checks the address against the certificate.
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        return try NIOSSLClientHandler(
            context: context, serverHostname: isAddress ? nil : host,
            customVerificationCallback: verifier.callback(report: report)
        )
    }
}

/// Turns TLS errors on the sender into the failure they mean.
enum SenderTLSFailure {
    static func explain(_ error: Error, report: TLSVerificationReport?, host: String, handshakeDone: Bool) -> SenderError {
        if let failure = report?.failure {
            return .tls(.receiverCertificateRefused(failure))
        }
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return .tls(.hostNameMismatch(host: host, certificateNames: report?.certificateNames))
        }
        let text = "\(error)"
        if text.contains("CERTIFICATE_REQUIRED") || text.contains("PEER_DID_NOT_RETURN_A_CERTIFICATE") {
            return .tls(.clientCertificateMissing)
        }
        if text.contains("UNKNOWN_CA") || text.contains("BAD_CERTIFICATE") || text.contains("CERTIFICATE_UNKNOWN")
            || text.contains("CERTIFICATE_EXPIRED") || text.contains("DECRYPT_ERROR") {
            return .tls(.clientCertificateRefused(alert: alertName(text)))
        }
        if text.contains("WRONG_VERSION_NUMBER") || text.contains("PACKET_LENGTH_TOO_LONG") || text.contains("HTTP_REQUEST") {
            return .tls(.receiverSpeaksPlaintext)
        }
        if !handshakeDone {
            return .tls(.closedDuringHandshake(reason: TLSErrorText.reason(of: error)))
        }
        return .connectionLost(.tlsError(reason: TLSErrorText.reason(of: error)))
    }

    private static func alertName(_ text: String) -> String {
        for name in ["UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "CERTIFICATE_EXPIRED", "DECRYPT_ERROR"] where text.contains(name) {
            return name.lowercased().replacingOccurrences(of: "_", with: " ")
        }
        return "alert"
    }
}
