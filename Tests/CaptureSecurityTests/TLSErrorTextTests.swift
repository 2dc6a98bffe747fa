import CaptureSecurity
import XCTest

/// TLS errors in words: BoringSSL reason codes, and SwiftNIO's errors that carry none.
final class TLSErrorTextTests: XCTestCase {
    /// An error whose description is exactly what NIOSSL's error printed.
    private struct Printed: Error, CustomStringConvertible {
        let description: String
    }

    func testErrorsWithoutAReasonCodeReadAsWords() {
        let cases: [(String, String)] = [
            ("handshakeFailed(NIOSSL.BoringSSLError.sslError([Error:  EOF during handshake]))", "the connection was closed during the TLS handshake"),
            ("uncleanShutdown", "the connection was closed without ending TLS properly"),
            ("handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at x.cc:1]))",
             "certificate verify failed"),
            ("handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: something new]))", "TLS error: something new"),
            ("NIOSSL.NIOSSLError.readInInvalidTLSState", "TLS error"),
        ]
        for (printed, expected) in cases {
            XCTAssertEqual(TLSErrorText.reason(of: Printed(description: printed)), expected, printed)
        }
    }
}
