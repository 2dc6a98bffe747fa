import CAF
import CaptureSecurity
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What the executables say when something is wrong (issue 14, part 5): what happened and what to
/// do, in the user's words, never the type names and codes of Foundation, SwiftNIO or BoringSSL.
final class UserMessagesTests: XCTestCase {
    /// Fragments that show internals instead of words.
    private static let internals = ["errno", "NSCocoaErrorDomain", "bind(descriptor", "doesn’t exist", "doesn't exist", "NIOSSL", "BoringSSLError",
                                    "handshakeFailed(", "[IPv4]", "[IPv6]", "IOError", "Optional("]

    private func assertNoInternals(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        for fragment in Self.internals {
            XCTAssertFalse(text.contains(fragment), "“\(fragment)” shows internals in: \(text)", file: file, line: line)
        }
    }

    /// The one `Error:` line of a failed run.
    private func errorLine(_ standardError: String, file: StaticString = #filePath, line: UInt = #line) -> String {
        let lines = standardError.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
        XCTAssertEqual(lines.count, 1, "one line says why: \(standardError)", file: file, line: line)
        return lines.first.map(String.init) ?? ""
    }

    func testAPortInUseIsSaidSo() throws {
        let first = try ReceiverUnderTest()
        let second = try ChildProcess(Products.recv, ["--out", first.directory.path + "-2", "--listen", "127.0.0.1:\(first.port)"])
        XCTAssertNotEqual(second.wait(seconds: 30), 0)
        let line = errorLine(second.standardError)
        XCTAssertTrue(line.contains("cannot listen on 127.0.0.1:\(first.port): port \(first.port) is already in use"), line)
        XCTAssertTrue(line.contains("--listen"), "says what to do: \(line)")
        assertNoInternals(second.standardError)
        try? FileManager.default.removeItem(atPath: first.directory.path + "-2")
        XCTAssertEqual(first.stop(), 0)
    }

    func testAddressesWithoutAPortSaySo() throws {
        for (executable, arguments, expected) in [
            (Products.recv, ["--out", "/tmp/unused-\(UUID().uuidString)", "--listen", "127.0.0.1"], "127.0.0.1 has no port"),
            (Products.recv, ["--out", "/tmp/unused-\(UUID().uuidString)", "--listen", "127.0.0.1:http"], "http is not a port number"),
            (Products.recv, ["--out", "/tmp/unused-\(UUID().uuidString)", "--listen", "::1:7373"], "an IPv6 address needs brackets around it, as in [::1]:7373"),
            (Products.send, ["127.0.0.1", "--source", "tone"], "127.0.0.1 has no port"),
            (Products.send, [":7373", "--source", "tone"], ":7373 has no host"),
            (Products.send, ["127.0.0.1:0", "--source", "tone"], "port 0 cannot be connected to"),
        ] {
            let child = try ChildProcess(executable, arguments)
            XCTAssertNotEqual(child.wait(seconds: 30), 0, "\(arguments)")
            let line = errorLine(child.standardError)
            XCTAssertTrue(line.contains(expected), "\(arguments): \(line)")
            XCTAssertTrue(line.contains("HOST:PORT") || line.contains("[::1]:7373") || line.contains("port the receiver listens on"), "shows how to write it: \(line)")
        }
    }

    func testFoldersAndFilesThatCannotBeUsedAreNamedWithTheReason() throws {
        // /root is closed to the unprivileged user the tests run the executables as.
        let forbidden = "/root/capture-forbidden-\(UUID().uuidString)/recordings"
        let receiver = try ChildProcess(Products.recv, ["--out", forbidden, "--listen", "127.0.0.1:0"])
        XCTAssertNotEqual(receiver.wait(seconds: 30), 0)
        let receiverLine = errorLine(receiver.standardError)
        XCTAssertTrue(receiverLine.contains("cannot create the output folder \(forbidden): permission denied"), receiverLine)
        assertNoInternals(receiver.standardError)

        let tokens = try ChildProcess(Products.recv, ["--out", "/tmp/unused-\(UUID().uuidString)", "--listen", "127.0.0.1:0", "--token-file", "/nonexistent/tokens"])
        XCTAssertNotEqual(tokens.wait(seconds: 30), 0)
        let tokenLine = errorLine(tokens.standardError)
        XCTAssertTrue(tokenLine.contains("cannot read /nonexistent/tokens: no such file or directory"), tokenLine)
        assertNoInternals(tokens.standardError)

        let spool = try ChildProcess(Products.send, ["127.0.0.1:7373", "--source", "tone", "--spool", forbidden])
        XCTAssertNotEqual(spool.wait(seconds: 30), 0)
        let spoolLine = errorLine(spool.standardError)
        XCTAssertTrue(spoolLine.contains("permission denied"), spoolLine)
        XCTAssertTrue(spoolLine.contains("--spool"), "says what to do: \(spoolLine)")
        assertNoInternals(spool.standardError)
    }

    /// A commit log folder the receiver cannot write is named with the reason and the flag that moves it.
    func testALogFolderThatCannotBeWrittenIsNamedWithTheReason() throws {
        let out = "/tmp/capture-out-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: out) }
        // /root is closed to the unprivileged user the tests run the executables as.
        let forbidden = "/root/capture-forbidden-\(UUID().uuidString)/log"
        let receiver = try ChildProcess(Products.recv, ["--out", out, "--listen", "127.0.0.1:0", "--log-dir", forbidden])
        XCTAssertNotEqual(receiver.wait(seconds: 30), 0)
        let line = errorLine(receiver.standardError)
        XCTAssertTrue(line.contains(forbidden), line)
        XCTAssertTrue(line.contains("permission denied"), line)
        XCTAssertTrue(line.contains("--log-dir"), "says what to do: \(line)")
        assertNoInternals(receiver.standardError)
    }

    func testPeersAppearAsUsersWriteThemInLogsAndFiles() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--log-level", "info"])
        let sent = try runSender([receiver.address, "--source", "tone", "--duration", "0.2", "--no-pace", "--stream-name", "peer"])
        XCTAssertEqual(sent.status, 0, sent.stderr)
        XCTAssertEqual(receiver.stop(), 0)
        let log = receiver.child.standardError
        XCTAssertTrue(log.contains("peer=127.0.0.1:"), log)
        assertNoInternals(log)
        let file = try XCTUnwrap(receiver.files().first)
        let info = Dictionary(try CAFFile.read(path: file.path).info.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        let source = try XCTUnwrap(info["source"])
        XCTAssertTrue(source.range(of: #"\(127\.0\.0\.1:\d+\)$"#, options: .regularExpression) != nil, "the CAF source names the peer as host:port: \(source)")
        XCTAssertFalse(source.contains("IPv4"), source)
    }

    func testATLSHandshakeCutShortIsLoggedInWords() throws {
        let fixtures = try SecurityFixtures()
        let server = try fixtures.write(try CertificateFactory.make(commonName: "recorder", hosts: ["127.0.0.1"]), as: "server")
        let receiver = try LoggingReceiver(extraArguments: ["--tls-cert", server.cert, "--tls-key", server.key])
        // The start of a TLS ClientHello record, then the client goes away.
        _ = try RawClient.exchange(port: receiver.port, sending: [0x16, 0x03, 0x01, 0x00, 0xC8, 0x01, 0x00, 0x00, 0xC4, 0x03, 0x03], timeout: 2)
        assertReceiverLogs(receiver, ["the connection was closed during the TLS handshake", "peer=127.0.0.1:"])
        XCTAssertEqual(receiver.stop(), 0)
        assertNoInternals(receiver.log)
    }

    func testASelfSignedReceiverCertificateGivenAsCATellsToPinIt() throws {
        let fixtures = try SecurityFixtures()
        let issued = try CertificateFactory.make(commonName: "recorder", hosts: ["127.0.0.1"])
        let server = try fixtures.write(issued, as: "server")
        let result = try runSender(["127.0.0.1:7373", "--source", "tone", "--tls", "--ca", server.cert], timeout: 30)
        XCTAssertNotEqual(result.status, 0)
        let line = errorLine(result.stderr)
        XCTAssertTrue(line.contains("is a server's own certificate, not a certificate authority"), line)
        XCTAssertTrue(line.contains("--pin \(issued.fingerprint.hex)"), "gives the fingerprint to pin: \(line)")
    }

    func testReceiverHelpShowsTheReceivingOptions() throws {
        for arguments in [["--help"], ["-h"], ["help"]] {
            let help = try ChildProcess(Products.recv, arguments)
            XCTAssertEqual(help.wait(), 0)
            let text = help.standardOutput
            for fragment in ["--out", "--listen", "default: 0.0.0.0:7373", "--sync-ms", "--resume-window", "--tls-cert", "--metrics",
                             "recover", "gen-cert", "USAGE: capture-recv [serve]"] {
                XCTAssertTrue(text.contains(fragment), "capture-recv \(arguments) lacks \(fragment): \(text)")
            }
        }
    }

    func testJSONLogsEndWithAJSONLine() throws {
        let result = try runSender(["127.0.0.1:7373", "--source", "file", "--file", "/nonexistent/take.wav", "--log-format", "json"], timeout: 30)
        XCTAssertEqual(result.status, 1, result.stderr)
        let lines = result.stderr.split(separator: "\n")
        XCTAssertFalse(lines.isEmpty)
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            XCTAssertNotNil(object, "every line on standard error is JSON with --log-format json: \(line)")
        }
        let last = try XCTUnwrap(lines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        XCTAssertEqual(last["level"] as? String, "error")
        XCTAssertTrue((last["message"] as? String)?.contains("/nonexistent/take.wav") ?? false, "\(last)")
    }
}
