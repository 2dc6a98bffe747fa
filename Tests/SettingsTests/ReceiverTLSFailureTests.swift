import CaptureCLISupport
import CaptureCore
@testable import CaptureReceiver
@testable import CaptureSecurity
import XCTest

/// A failed TLS handshake on the receiver is told apart from the TLS library's reason codes and the
/// verifier's report: what it logs, in each naming, and whether it counts against the sender's
/// address as a failed authentication.
final class ReceiverTLSFailureTests: XCTestCase {
    /// An error as NIOSSL describes a handshake failure: the BoringSSL reason code inside its text.
    private struct HandshakeError: Error, CustomStringConvertible {
        var code: String
        var description: String {
            "handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435703 error:100000f7:SSL routines:OPENSSL_internal:\(code)]))"
        }
    }

    func testEachFailureIsToldApartWordedAndCountedAsAuthenticationOrNot() {
        let rows: [(code: String, failure: ReceiverTLSFailure, commandLine: String, authentication: Bool)] = [
            ("PEER_DID_NOT_RETURN_A_CERTIFICATE", .missingClientCertificate,
             "missing client certificate: the sender presented none, and --client-ca requires one (capture-send --cert/--key)", true),
            ("TLSV1_ALERT_CERTIFICATE_REQUIRED", .missingClientCertificate,
             "missing client certificate: the sender presented none, and --client-ca requires one (capture-send --cert/--key)", true),
            ("WRONG_VERSION_NUMBER", .notTLS, "the client does not speak TLS on this TLS port", false),
            ("HTTP_REQUEST", .notTLS, "the client does not speak TLS on this TLS port", false),
            ("SSLV3_ALERT_BAD_CERTIFICATE", .receiverCertificateRefused(reason: "bad certificate alert"),
             "the sender refused this receiver's certificate (bad certificate alert); the sender's message says why", false),
            ("TLSV1_ALERT_UNKNOWN_CA", .receiverCertificateRefused(reason: "unknown ca alert"),
             "the sender refused this receiver's certificate (unknown ca alert); the sender's message says why", false),
            ("NO_SHARED_CIPHER", .handshakeFailed(reason: "no shared cipher"), "TLS handshake failed: no shared cipher", false),
        ]
        for row in rows {
            let failure = ReceiverTLSFailure(HandshakeError(code: row.code), report: TLSVerificationReport())
            XCTAssertEqual(failure, row.failure, row.code)
            XCTAssertEqual(failure.message(naming: CommandLineSettingNames()), row.commandLine, row.code)
            XCTAssertEqual(failure.isFailedAuthentication, row.authentication, row.code)
            XCTAssertFalse(failure.message(naming: LibrarySettingNames()).contains("--"), row.code)
        }
    }

    /// The verifier's refusal comes first, whatever the TLS library says, and is an authentication
    /// failure.
    func testTheVerifiersRefusalComesFirst() {
        let report = TLSVerificationReport()
        let refusal = CertificateRefusal(peerName: "the sender", authority: .clientCertificateAuthority, reason: .noCertificate)
        report.record(failure: refusal)
        let failure = ReceiverTLSFailure(HandshakeError(code: "WRONG_VERSION_NUMBER"), report: report)
        XCTAssertEqual(failure, .clientCertificateRefused(refusal))
        XCTAssertTrue(failure.isFailedAuthentication)
        XCTAssertEqual(failure.message(naming: CommandLineSettingNames()), "client certificate refused: the sender presented no certificate")
        XCTAssertEqual(ReceiverTLSFailure(HandshakeError(code: "WRONG_VERSION_NUMBER"), report: nil), .notTLS)
    }
}
