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

/// Why a TLS handshake on the receiver failed, told apart from the TLS library's error and the
/// client-certificate verifier's report: what the receiver logs with the peer's address (worded with
/// the receiver's setting names where it is logged), and whether it counts as a failed
/// authentication for the rate limiter.
enum ReceiverTLSFailure: Equatable {
    /// The sender's client certificate was refused by the verifier.
    case clientCertificateRefused(CertificateRefusal)
    /// A client CA is required and the sender presented no certificate.
    case missingClientCertificate
    /// The client speaks something other than TLS (plaintext, HTTP) on the TLS port.
    case notTLS
    /// The sender refused this receiver's certificate (`reason`: the TLS library's, in words).
    case receiverCertificateRefused(reason: String)
    /// Any other handshake failure (`reason`: the TLS library's, in words).
    case handshakeFailed(reason: String)

    /// Tells the failure apart: the verifier's report first, then the TLS library's reason codes.
    init(_ error: Error, report: TLSVerificationReport?) {
        if let failure = report?.failure {
            self = .clientCertificateRefused(failure)
            return
        }
        let text = "\(error)"
        if text.contains("PEER_DID_NOT_RETURN_A_CERTIFICATE") || text.contains("CERTIFICATE_REQUIRED") {
            self = .missingClientCertificate
        } else if text.contains("WRONG_VERSION_NUMBER") || text.contains("HTTP_REQUEST") || text.contains("PACKET_LENGTH_TOO_LONG") {
            self = .notTLS
        } else if text.contains("UNKNOWN_CA") || text.contains("BAD_CERTIFICATE") || text.contains("CERTIFICATE_UNKNOWN") {
            self = .receiverCertificateRefused(reason: TLSErrorText.reason(of: error))
        } else {
            self = .handshakeFailed(reason: TLSErrorText.reason(of: error))
        }
    }

    /// Whether the sender failed to authenticate (counted by the rate limiter), rather than the
    /// connection failing for another reason.
    var isFailedAuthentication: Bool {
        switch self {
        case .clientCertificateRefused, .missingClientCertificate: true
        case .notTLS, .receiverCertificateRefused, .handshakeFailed: false
        }
    }

    /// The reason logged after "refused: ", naming the settings as `naming` spells them.
    func message(naming: any SettingNaming) -> String {
        switch self {
        case .clientCertificateRefused(let refusal):
            return "client certificate refused: \(refusal.message(naming: naming))"
        case .missingClientCertificate:
            return "missing client certificate: the sender presented none, and \(naming.name(of: .clientCertificateAuthority)) requires one (\(naming.name(of: .senderClientCertificate)))"
        case .notTLS:
            return "the client does not speak TLS on this TLS port"
        case .receiverCertificateRefused(let reason):
            return "the sender refused this receiver's certificate (\(reason)); the sender's message says why"
        case .handshakeFailed(let reason):
            return "TLS handshake failed: \(reason)"
        }
    }
}
