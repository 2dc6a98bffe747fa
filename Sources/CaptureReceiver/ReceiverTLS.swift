import CaptureCore
import CaptureSecurity
import Foundation
import NIOCore
import NIOSSL

/// The receiver's TLS settings: its certificate and key, and optionally the CA that senders'
/// client certificates must be signed by (mutual TLS).
public struct ReceiverTLSConfiguration: Sendable {
    /// PEM certificate chain, leaf first.
    public var certificatePath: String
    /// PEM private key of the certificate.
    public var privateKeyPath: String
    /// PEM CA certificate(s) for client certificates; nil when senders need none.
    public var clientCAPath: String?

    public init(certificatePath: String, privateKeyPath: String, clientCAPath: String? = nil) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.clientCAPath = clientCAPath
    }

    /// The loaded context and, for mutual TLS, the client certificate check.
    struct Prepared: Sendable {
        let context: NIOSSLContext
        let clientVerifier: PeerCertificateVerifier?
    }

    /// Loads the files and builds the server context: TLS 1.2 at least, 1.3 preferred.
    func prepare() throws(ReceiverStartError) -> Prepared {
        var tls: TLSConfiguration
        var clientVerifier: PeerCertificateVerifier?
        do throws(SecurityError) {
            let chain = try PEMFiles.certificates(at: certificatePath)
            let key = try PEMFiles.privateKey(at: privateKeyPath)
            tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            if let clientCAPath {
                let authorities = try PEMFiles.x509Certificates(at: clientCAPath)
                tls.trustRoots = .certificates(try PEMFiles.certificates(at: clientCAPath))
                tls.certificateVerification = .noHostnameVerification
                clientVerifier = PeerCertificateVerifier(trust: .authorities(authorities), peerName: "the sender", authority: .clientCertificateAuthority)
            } else {
                tls.certificateVerification = .none
            }
        } catch {
            throw .tls(.unusableFile(error))
        }
        tls.minimumTLSVersion = .tlsv12
        tls.maximumTLSVersion = .tlsv13
        do {
            return Prepared(context: try NIOSSLContext(configuration: tls), clientVerifier: clientVerifier)
        } catch {
            throw .tls(.cannotSetUp(certificatePath: certificatePath, privateKeyPath: privateKeyPath, reason: "\(error)"))
        }
    }
}

/// Turns TLS handshake errors on the receiver into the line it logs with the peer's address.
enum ReceiverTLSFailure {
    /// The reason, and whether it counts as a failed authentication (for the rate limiter).
    static func explain(_ error: Error, report: TLSVerificationReport?, settingNames: any SettingNaming) -> (reason: String, authentication: Bool) {
        if let failure = report?.failure {
            return ("client certificate refused: \(failure.message(naming: settingNames))", true)
        }
        let text = "\(error)"
        if text.contains("PEER_DID_NOT_RETURN_A_CERTIFICATE") || text.contains("CERTIFICATE_REQUIRED") {
            return ("missing client certificate: the sender presented none, and \(settingNames.name(of: .clientCertificateAuthority)) requires one (\(settingNames.name(of: .senderClientCertificate)))", true)
        }
        if text.contains("WRONG_VERSION_NUMBER") || text.contains("HTTP_REQUEST") || text.contains("PACKET_LENGTH_TOO_LONG") {
            return ("the client does not speak TLS on this TLS port", false)
        }
        if text.contains("UNKNOWN_CA") || text.contains("BAD_CERTIFICATE") || text.contains("CERTIFICATE_UNKNOWN") {
            return ("the sender refused this receiver's certificate (\(TLSErrorText.reason(of: error))); the sender's message says why", false)
        }
        return ("TLS handshake failed: \(TLSErrorText.reason(of: error))", false)
    }
}
