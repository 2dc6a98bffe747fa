import CAF
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 19, item 4: the stream id is no key. While a stream waits for its sender (link lost),
/// anyone holding its id, any valid token, or even its secret from another identity is refused
/// with NOT_STREAM_OWNER; the real sender then resumes and its file is complete and untouched.
final class StreamOwnershipTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("ownership-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// A Hello resuming `streamID` with `secret` and `token`.
    private func hijack(port: Int, streamID: UUID, secret: [UInt8], token: String = "") throws -> Capture_V1_Error? {
        let client = try ProtocolClient(port: port)
        try client.sendPreamble()
        try client.send(.hello(.with {
            $0.protocolVersion = 1
            $0.streamID = withUnsafeBytes(of: streamID.uuid) { Data($0) }
            $0.streamName = "hijacker"
            $0.authToken = token
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            $0.startTimeUnixNs = Int64(Date().timeIntervalSince1970 * 1e9)
            $0.resumeFromSequence = 2
            $0.resumeSecret = Data(secret)
        }))
        guard case .error(let error)? = try client.nextAnswer() else { return nil }
        return error
    }

    /// The stream id and resume secret capture-send keeps in its spool.
    private func spooled(_ spool: URL) throws -> (id: UUID, secret: [UInt8]) {
        let folder = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: spool.path).first { UUID(uuidString: $0) != nil })
        let meta = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: spool.appendingPathComponent(folder).appendingPathComponent("meta.json"))) as? [String: Any])
        let secret = try XCTUnwrap(meta["resumeSecret"] as? [Int]).map { UInt8($0) }
        XCTAssertEqual(secret.count, 32)
        return (try XCTUnwrap(UUID(uuidString: folder)), secret)
    }

    private func runStreamWithHijackers(receiverArguments: [String], senderEnvironment: [String: String], attempts: (Int, UUID, [UInt8]) throws -> Void) throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--idle-timeout", "2"] + receiverArguments)
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 11)
        let spool = work.appendingPathComponent("spool-\(UUID().uuidString)")
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(link.port)", "--source", "tone", "--duration", "4", "--stream-name", "owned", "--buffer-seconds", "0.05",
            "--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--idle-timeout", "20", "--log-level", "info",
        ], environment: senderEnvironment)
        Resilience.waitUntil("the stream is acknowledged") { sender.standardError.contains("streaming") && receiver.child.standardError.contains("stream opened") }
        let (id, secret) = try spooled(spool)
        // The link goes silent: the receiver lets go of the stream, which waits for its sender.
        link.mode = .stall
        Resilience.waitUntil("the receiver let go of the stream") { receiver.child.standardError.contains("the file stays open for the sender to resume") }
        try attempts(receiver.port, id, secret)
        link.mode = .pass
        link.resetAll()
        XCTAssertEqual(Resilience.finish(sender, seconds: 40), 0, sender.standardError)
        let files = receiver.files()
        XCTAssertEqual(files.count, 1, "\(files)")
        let file = try XCTUnwrap(files.first)
        XCTAssertEqual(try CAFFile.read(path: file.path).readAudioData(), try Resilience.toneBytes(frames: 4 * 48_000), "the real sender's stream, whole and untouched")
        XCTAssertTrue(receiver.child.standardError.contains("code=notStreamOwner"), receiver.child.standardError)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testWithoutTokensTheStreamIdAloneCannotResumeAStream() throws {
        try runStreamWithHijackers(receiverArguments: [], senderEnvironment: [:]) { port, id, secret in
            let none = try hijack(port: port, streamID: id, secret: [])
            XCTAssertEqual(none?.code, .notStreamOwner, "\(String(describing: none))")
            XCTAssertTrue(none?.message.contains("the resume secret does not match") ?? false, "\(String(describing: none))")
            let guessed = try hijack(port: port, streamID: id, secret: Array(repeating: 7, count: 32))
            XCTAssertEqual(guessed?.code, .notStreamOwner)
            var nearly = secret
            nearly[31] ^= 1
            XCTAssertEqual(try hijack(port: port, streamID: id, secret: nearly)?.code, .notStreamOwner, "one bit off")
        }
    }

    func testWithTokensAStreamIsBoundToTheTokenThatStartedIt() throws {
        let tokens = work.appendingPathComponent("tokens")
        try "unit-a-token\nunit-b-token\n".write(to: tokens, atomically: true, encoding: .utf8)
        Unprivileged.handOver(tokens.path)
        try runStreamWithHijackers(receiverArguments: ["--token-file", tokens.path], senderEnvironment: ["CAPTURE_TOKEN": "unit-a-token"]) { port, id, secret in
            // Another valid token, even with the stream's own secret (read from the victim's spool).
            let other = try hijack(port: port, streamID: id, secret: secret, token: "unit-b-token")
            XCTAssertEqual(other?.code, .notStreamOwner, "\(String(describing: other))")
            XCTAssertTrue(other?.message.contains("started with another token") ?? false, "\(String(describing: other))")
            let noSecret = try hijack(port: port, streamID: id, secret: [], token: "unit-a-token")
            XCTAssertEqual(noSecret?.code, .notStreamOwner, "the right token without the secret")
        }
    }
}
