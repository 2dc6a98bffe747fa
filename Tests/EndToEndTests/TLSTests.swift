import CaptureSecurity
import Foundation
import TestSupport
import XCTest

/// TLS between the real executables: pinning, CA and host-name checks, mutual TLS, and each
/// refusal with the line the sender prints and the line the receiver logs. Every refused stream
/// leaves nothing on disk, and a good stream afterwards is bit-exact on the same receiver.
final class TLSTests: XCTestCase {
    func testGenCertAndPinningAcceptAndRefuse() throws {
        let fixtures = try SecurityFixtures()
        let kit = fixtures.path("kit")
        let generated = try ChildProcess(Products.recv, ["gen-cert", "--out", kit, "--host", "localhost", "--host", "127.0.0.1"])
        XCTAssertEqual(generated.wait(), 0, generated.standardError)
        let fingerprintLine = try XCTUnwrap(generated.standardOutput.split(separator: "\n").first { $0.hasPrefix("sha256 fingerprint: ") })
        let pin = String(fingerprintLine.dropFirst("sha256 fingerprint: ".count))
        XCTAssertEqual(pin.count, 64)
        let keyMode = try FileManager.default.attributesOfItem(atPath: kit + "/key.pem")[.posixPermissions] as? NSNumber
        XCTAssertEqual(keyMode?.intValue, 0o600, "the private key is readable by its owner only")
        let again = try ChildProcess(Products.recv, ["gen-cert", "--out", kit])
        XCTAssertNotEqual(again.wait(), 0, "gen-cert does not replace a key without --force")
        XCTAssertTrue(again.standardError.contains("already holds cert.pem or key.pem"), again.standardError)

        let receiver = try LoggingReceiver(extraArguments: ["--tls-cert", kit + "/cert.pem", "--tls-key", kit + "/key.pem"])
        let source = try fixtures.sourceWAV(seed: 11)

        let otherPin = try CertificateFactory.make(commonName: "other", hosts: ["localhost"]).fingerprint.hex
        assertRefused(try runSender(fileStream(receiver, source, name: "pin-wrong") + ["--tls", "--pin", otherPin]),
                      "TLS: pin mismatch: the receiver's certificate has SHA-256 fingerprint \(pin), not the pinned \(otherPin)")
        assertReceiverLogs(receiver, ["refused: the sender refused this receiver's certificate", "peer=127.0.0.1:"])

        assertRefused(try runSender(fileStream(receiver, source, name: "no-trust") + ["--tls"]),
                      "TLS: untrusted certificate: the receiver's certificate (CN=localhost) is self-signed and is not signed by a CA in the system trust store; pass the CA that signed it with --ca, or pin it with --pin \(pin)")

        assertRefused(try runSender(fileStream(receiver, source, name: "plain")),
                      "the receiver refused the stream (authenticationFailed): this receiver requires TLS: connect with --tls")
        assertReceiverLogs(receiver, ["refused: plaintext client on a TLS port", "peer=127.0.0.1:"])

        let bad = try runSender(fileStream(receiver, source, name: "bad-pin") + ["--tls", "--pin", "12:34"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("--pin \"12:34\" is not a SHA-256 fingerprint"), bad.stderr)

        XCTAssertEqual(receiver.files(), [], "nothing is written for a refused stream")
        let good = try runSender(fileStream(receiver, source, name: "pinned") + ["--tls", "--pin", pin.uppercased()])
        XCTAssertEqual(good.status, 0, good.stderr)
        try assertDelivered(receiver, name: "pinned", source)
        XCTAssertEqual(receiver.files().count, 1)
        XCTAssertEqual(receiver.stop(), 0, receiver.log)
    }

    func testCertificateAuthorityMutualTLSAndTokensRefuseAndThenAccept() throws {
        let fixtures = try SecurityFixtures()
        let authority = try CertificateFactory.make(commonName: "Field CA", hosts: [], role: .authority)
        let stranger = try CertificateFactory.make(commonName: "Stranger CA", hosts: [], role: .authority)
        let ca = try fixtures.write(authority, as: "ca").cert
        let strangerCA = try fixtures.write(stranger, as: "stranger-ca").cert
        let server = try fixtures.write(try CertificateFactory.make(commonName: "recorder", hosts: ["localhost", "127.0.0.1"], issuer: authority), as: "server")
        let client = try fixtures.write(try CertificateFactory.make(commonName: "kit-1", hosts: [], issuer: authority), as: "client")
        let strangerClient = try fixtures.write(try CertificateFactory.make(commonName: "kit-x", hosts: [], issuer: stranger), as: "stranger-client")
        let expiredClient = try fixtures.write(try CertificateFactory.make(
            commonName: "kit-old", hosts: [], notBefore: Date().addingTimeInterval(-86_400 * 10), notAfter: Date().addingTimeInterval(-86_400), issuer: authority
        ), as: "expired-client")
        let tokens = fixtures.tokenFile("# crew tokens\nfirst-crew-token\nsecond-crew-token\n", name: "tokens")
        let senderToken = fixtures.tokenFile("second-crew-token\n", name: "sender-token")

        let receiver = try LoggingReceiver(extraArguments: [
            "--tls-cert", server.cert, "--tls-key", server.key, "--client-ca", ca, "--token-file", tokens, "--auth-failure-limit", "0",
        ])
        let source = try fixtures.sourceWAV(seed: 21)
        let trusted = ["--tls", "--ca", ca, "--cert", client.cert, "--key", client.key]
        let noToken = ["CAPTURE_TOKEN": ""]

        assertRefused(try runSender(fileStream(receiver, source, name: "stranger-ca") + ["--tls", "--ca", strangerCA, "--cert", client.cert, "--key", client.key], environment: noToken),
                      "TLS: untrusted certificate: the receiver's certificate (CN=recorder) was issued by CN=Field CA and is not signed by the CA in --ca")

        assertRefused(try runSender(fileStream(receiver, source, name: "no-client-cert") + ["--tls", "--ca", ca, "--token-file", senderToken], environment: noToken),
                      "TLS: missing client certificate: the receiver requires mutual TLS; pass --cert and --key")
        assertReceiverLogs(receiver, ["refused: missing client certificate", "peer=127.0.0.1:"])

        assertRefused(try runSender(fileStream(receiver, source, name: "stranger-client") + ["--tls", "--ca", ca, "--cert", strangerClient.cert, "--key", strangerClient.key, "--token-file", senderToken], environment: noToken),
                      "TLS: the receiver refused this sender's client certificate")
        assertReceiverLogs(receiver, ["refused: client certificate refused: untrusted certificate: the sender's certificate (CN=kit-x) was issued by CN=Stranger CA", "--client-ca", "peer=127.0.0.1:"])

        assertRefused(try runSender(fileStream(receiver, source, name: "expired-client") + ["--tls", "--ca", ca, "--cert", expiredClient.cert, "--key", expiredClient.key, "--token-file", senderToken], environment: noToken),
                      "TLS: the receiver refused this sender's client certificate")
        assertReceiverLogs(receiver, ["refused: client certificate refused: the sender's certificate expired on", "peer=127.0.0.1:"])

        assertRefused(try runSender(fileStream(receiver, source, name: "plaintext"), environment: noToken),
                      "this receiver requires TLS: connect with --tls")

        assertRefused(try runSender(fileStream(receiver, source, name: "tokenless") + trusted, environment: noToken),
                      "the receiver refused the stream (authenticationFailed): missing token: this receiver requires a token")
        assertReceiverLogs(receiver, ["refused: missing token", "peer=127.0.0.1:"])

        assertRefused(try runSender(fileStream(receiver, source, name: "wrong-token") + trusted, environment: ["CAPTURE_TOKEN": "first-crew-tokem"]),
                      "the receiver refused the stream (authenticationFailed): wrong token: the token is not one this receiver accepts")
        assertReceiverLogs(receiver, ["refused: wrong token", "peer=127.0.0.1:"])

        XCTAssertEqual(receiver.files(), [], "nothing is written for a refused stream")
        let byFile = try runSender(fileStream(receiver, source, name: "mtls-file-token") + trusted + ["--token-file", senderToken], environment: noToken)
        XCTAssertEqual(byFile.status, 0, byFile.stderr)
        try assertDelivered(receiver, name: "mtls-file-token", source)
        let byName = try runSender(fileStream(receiver, source, name: "mtls-env-token", host: "localhost") + trusted, environment: ["CAPTURE_TOKEN": "first-crew-token"])
        XCTAssertEqual(byName.status, 0, byName.stderr)
        try assertDelivered(receiver, name: "mtls-env-token", source)
        XCTAssertEqual(receiver.files().count, 2)
        XCTAssertEqual(receiver.stop(), 0, receiver.log)
    }

    func testHostNameMismatchAndExpiredReceiverCertificatesAreRefused() throws {
        let fixtures = try SecurityFixtures()
        let authority = try CertificateFactory.make(commonName: "Field CA", hosts: [], role: .authority)
        let ca = try fixtures.write(authority, as: "ca").cert
        let elsewhere = try fixtures.write(try CertificateFactory.make(commonName: "elsewhere", hosts: ["elsewhere.example", "10.9.8.7"], issuer: authority), as: "elsewhere")
        let expired = try fixtures.write(try CertificateFactory.make(
            commonName: "old", hosts: ["127.0.0.1"], notBefore: Date().addingTimeInterval(-86_400 * 30), notAfter: Date(timeIntervalSince1970: 1_700_000_000), issuer: authority
        ), as: "expired")
        let source = try fixtures.sourceWAV(seed: 31)

        let wrongHost = try LoggingReceiver(extraArguments: ["--tls-cert", elsewhere.cert, "--tls-key", elsewhere.key])
        assertRefused(try runSender(fileStream(wrongHost, source, name: "wrong-host") + ["--tls", "--ca", ca]),
                      "TLS: host-name mismatch: the receiver's certificate is not for 127.0.0.1 (it is for elsewhere.example, 10.9.8.7)")
        assertReceiverLogs(wrongHost, ["refused:", "peer=127.0.0.1:"])
        XCTAssertEqual(wrongHost.files(), [])
        XCTAssertEqual(wrongHost.stop(), 0, wrongHost.log)

        let old = try LoggingReceiver(extraArguments: ["--tls-cert", expired.cert, "--tls-key", expired.key])
        assertRefused(try runSender(fileStream(old, source, name: "expired") + ["--tls", "--ca", ca]),
                      "TLS: the receiver's certificate expired on 2023-11-14T22:13:20Z; renew it")
        XCTAssertEqual(old.files(), [])
        XCTAssertEqual(old.stop(), 0, old.log)
    }

    func testAStalledTLSHandshakeIsClosedAtTheHandshakeTimeout() throws {
        let fixtures = try SecurityFixtures()
        let server = try fixtures.write(try CertificateFactory.make(commonName: "recorder", hosts: ["127.0.0.1"]), as: "server")
        let receiver = try LoggingReceiver(extraArguments: ["--tls-cert", server.cert, "--tls-key", server.key, "--handshake-timeout", "1"])
        // A client that connects and never starts TLS: the receiver closes it, it does not wait forever.
        let received = try RawClient.exchange(port: receiver.port, sending: [], timeout: 8)
        XCTAssertEqual(received, [])
        assertReceiverLogs(receiver, ["the handshake did not complete within", "peer=127.0.0.1:"])
        XCTAssertEqual(receiver.files(), [])
        XCTAssertEqual(receiver.stop(), 0, receiver.log)
    }
}
