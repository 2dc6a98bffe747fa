import Foundation
import TestSupport
import XCTest

/// Shared-token authentication on a plaintext port, the rate limit on failures, and a TLS client
/// meeting a plaintext port.
final class AuthTests: XCTestCase {
    func testTokensWithoutTLSRateLimitAndTLSClientOnPlaintextPort() throws {
        let fixtures = try SecurityFixtures()
        let tokens = fixtures.tokenFile("alpha-token\n", name: "tokens")
        let receiver = try LoggingReceiver(extraArguments: ["--token-file", tokens, "--auth-failure-limit", "3"])
        assertReceiverLogs(receiver, ["tokens travel without TLS on this port"])
        let source = try fixtures.sourceWAV(seed: 41)
        let pin = String(repeating: "ab", count: 32)

        assertRefused(try runSender(fileStream(receiver, source, name: "tls-client") + ["--tls", "--pin", pin], environment: ["CAPTURE_TOKEN": "alpha-token"]),
                      "TLS: the receiver closed the connection during the TLS handshake")
        assertReceiverLogs(receiver, ["refused: the client speaks TLS; start capture-recv with --tls-cert/--tls-key", "peer=127.0.0.1:"])

        assertRefused(try runSender(fileStream(receiver, source, name: "missing"), environment: ["CAPTURE_TOKEN": ""]),
                      "the receiver refused the stream (authenticationFailed): missing token")
        assertReceiverLogs(receiver, ["refused: missing token", "peer=127.0.0.1:"])

        let senderToken = fixtures.tokenFile("# the crew's token\nalpha-token\n", name: "sender-token")
        let byFile = try runSender(fileStream(receiver, source, name: "by-file") + ["--token-file", senderToken], environment: ["CAPTURE_TOKEN": "ignored"])
        XCTAssertEqual(byFile.status, 0, byFile.stderr)
        try assertDelivered(receiver, name: "by-file", source)
        let byEnvironment = try runSender(fileStream(receiver, source, name: "by-env"), environment: ["CAPTURE_TOKEN": "alpha-token"])
        XCTAssertEqual(byEnvironment.status, 0, byEnvironment.stderr)
        try assertDelivered(receiver, name: "by-env", source)

        for attempt in 1...3 {
            assertRefused(try runSender(fileStream(receiver, source, name: "guess-\(attempt)"), environment: ["CAPTURE_TOKEN": "guess-\(attempt)"]),
                          "wrong token")
        }
        assertReceiverLogs(receiver, ["too many failed authentications from this address"])
        assertRefused(try runSender(fileStream(receiver, source, name: "blocked"), environment: ["CAPTURE_TOKEN": "alpha-token"]),
                      "the receiver refused the stream (authenticationFailed): too many failed authentication attempts from 127.0.0.1; try again in")

        XCTAssertEqual(receiver.files().map { String($0.lastPathComponent.prefix(6)) }.sorted(), ["by-env", "by-fil"],
                       "only the accepted streams left files")
        XCTAssertTrue(receiver.process.isRunning, "the receiver is still up")
        XCTAssertEqual(receiver.stop(), 0, receiver.log)
    }
}
