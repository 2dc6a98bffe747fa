import Foundation
import TestSupport
import XCTest

/// Shared-token authentication on a plaintext port, the rate limit on failures, and a TLS client
/// meeting a plaintext port.
final class AuthTests: XCTestCase {
    func testTokensWithoutTLSRateLimitAndTLSClientOnPlaintextPort() throws {
        let fixtures = try SecurityFixtures()
        let tokens = fixtures.tokenFile("alpha-token\n", name: "tokens")
        let receiver = try LoggingReceiver(extraArguments: ["--token-file", tokens, "--auth-failure-limit", "3", "--auth-block-seconds", "6"])
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

        // A field unit already streaming through the same address (a NAT), whose link will drop.
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 3)
        let fieldUnit = try ChildProcess(Products.send, [
            "127.0.0.1:\(link.port)", "--source", "tone", "--duration", "5", "--stream-name", "field-unit", "--buffer-seconds", "0.05",
            "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--log-level", "info",
        ], environment: ["CAPTURE_TOKEN": "alpha-token"])
        XCTAssertTrue(waitFor(20) { fieldUnit.standardError.contains("streaming") }, fieldUnit.standardError)

        for attempt in 1...3 {
            assertRefused(try runSender(fileStream(receiver, source, name: "guess-\(attempt)"), environment: ["CAPTURE_TOKEN": "guess-\(attempt)"]),
                          "wrong token")
        }
        assertReceiverLogs(receiver, ["too many failed authentications from this address"])

        // Issue 19, item 5: the field unit's link drops while its address is blocked. It resumes the
        // stream it owns (its resume secret), so others' failures do not lock it out.
        link.resetAll()
        XCTAssertEqual(Resilience.finish(fieldUnit, seconds: 30), 0, fieldUnit.standardError)
        XCTAssertTrue(fieldUnit.standardError.contains("resumed=true"), fieldUnit.standardError)
        let unitFile = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("field-unit_") })
        XCTAssertEqual(try SndFileReader.read(path: unitFile.path).frames, 5 * 48_000, "the whole stream, across the drop")

        // A new stream from the blocked address is refused for now, not for good: RATE_LIMITED with a
        // retry-after; the sender keeps its audio, waits, and delivers once the block is over.
        let blocked = try ChildProcess(Products.send, fileStream(receiver, source, name: "blocked") + ["--log-level", "info"], environment: ["CAPTURE_TOKEN": "alpha-token"])
        XCTAssertTrue(waitFor(10) { blocked.standardError.contains("the receiver refuses this address for now (rateLimited)") }, blocked.standardError)
        XCTAssertTrue(blocked.standardError.contains("the audio is kept meanwhile"), blocked.standardError)
        XCTAssertTrue(blocked.process.isRunning, "a rate-limited sender keeps going")
        XCTAssertEqual(Resilience.finish(blocked, seconds: 30), 0, blocked.standardError)
        try assertDelivered(receiver, name: "blocked", source)
        assertReceiverLogs(receiver, ["code=RATE_LIMITED"])

        XCTAssertEqual(receiver.files().map { String($0.lastPathComponent.prefix(6)) }.sorted(), ["blocke", "by-env", "by-fil", "field-"],
                       "only the accepted streams left files")
        XCTAssertTrue(receiver.process.isRunning, "the receiver is still up")
        XCTAssertEqual(receiver.stop(), 0, receiver.log)
    }
}
