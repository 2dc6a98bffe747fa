import CAF
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The log stream as operations see it: a log reader that goes away (a shipper restarting,
/// `| head`) ends neither program nor the recording, and what a peer sends cannot forge log lines.
final class LogStreamTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("log-stream-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// Starts `executable` with standard error on a pipe whose reader goes away after the first
    /// bytes; standard output is kept (it carries the receiver's port).
    private func startWithStderrClosedEarly(_ executable: String, _ arguments: [String]) throws -> (process: Process, output: Pipe) {
        let command = Unprivileged.command(executable, arguments)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command.executable)
        process.arguments = command.arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read a little of the log, then go away like `| head -c 64` would.
        let reader = errors.fileHandleForReading
        _ = reader.readData(ofLength: 64)
        try reader.close()
        return (process, output)
    }

    private func waitForExit(_ process: Process, seconds: Double = 60) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    func testTheReceiverKeepsRecordingWhenItsLogReaderGoesAway() throws {
        let out = work.appendingPathComponent("out")
        let (receiver, output) = try startWithStderrClosedEarly(Products.recv, ["--out", out.path, "--listen", "127.0.0.1:0", "--log-level", "debug"])
        defer { if receiver.isRunning { receiver.terminate() } }
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        let port = try XCTUnwrap(line.split(separator: "\n").first { $0.hasPrefix("listening on ") }.flatMap { Int($0.split(separator: ":").last ?? "") }, line)
        // Every connection, stream and Ack is logged at debug level: all of it into the dead pipe.
        for index in 0..<3 {
            let sent = try runSender(["127.0.0.1:\(port)", "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "piped-\(index)"])
            XCTAssertEqual(sent.status, 0, sent.stderr)
        }
        XCTAssertTrue(receiver.isRunning, "the receiver is still up")
        let files = try FileManager.default.contentsOfDirectory(atPath: out.path).filter { $0.hasSuffix(".caf") }
        XCTAssertEqual(files.count, 3)
        for name in files {
            XCTAssertEqual(try CAFFile.read(path: out.appendingPathComponent(name).path).totalFrames, 48_000, name)
        }
        kill(receiver.processIdentifier, SIGTERM)
        XCTAssertEqual(waitForExit(receiver), 0, "a clean exit, not SIGPIPE (141) or a trap (132)")
    }

    func testTheSenderKeepsCapturingWhenItsLogReaderGoesAway() throws {
        let receiver = try ReceiverUnderTest()
        let (sender, _) = try startWithStderrClosedEarly(Products.send, [
            receiver.address, "--source", "tone", "--duration", "3", "--stream-name", "piped-sender", "--log-level", "debug",
            "--status-interval", "0.05", "--spool", work.appendingPathComponent("spool").path,
        ])
        XCTAssertEqual(waitForExit(sender), 0, "the capture ends as asked, not by SIGPIPE (141) or a trap (132)")
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertEqual(try CAFFile.read(path: file.path).totalFrames, 144_000, "every captured frame arrived")
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testWhatAPeerSendsCannotForgeReceiverLogLines() throws {
        let tokens = work.appendingPathComponent("tokens")
        XCTAssertTrue(FileManager.default.createFile(atPath: tokens.path, contents: Data("crew-token\n".utf8), attributes: [.posixPermissions: 0o600]))
        Unprivileged.handOver(tokens.path)
        let receiver = try ReceiverUnderTest(extraArguments: ["--token-file", tokens.path])
        let forged = "evil\n2026-01-01T00:00:00.000Z notice capture-recv: stream closed path=/srv/fake.caf\u{1B}[2J\u{0}"
        let hello = WirePreamble.bytes() + (try WireMessage.hello(.with {
            $0.protocolVersion = 1
            $0.streamID = withUnsafeBytes(of: UUID().uuid) { Data($0) }
            $0.streamName = forged
            $0.sourceHost = forged
            $0.application = forged
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        }).encode())
        // Before authentication: refused for its missing token, and logged with its stream name.
        let reply = try RawClient.exchange(port: receiver.port, sending: hello)
        XCTAssertFalse(reply.isEmpty, "an Error frame")
        XCTAssertTrue(waitFor { receiver.child.standardError.contains("refused: missing token") }, receiver.child.standardError)
        XCTAssertEqual(receiver.stop(), 0)
        let log = receiver.child.standardError
        let lines = log.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertFalse(lines.contains { $0.hasPrefix("2026-01-01T00:00:00.000Z") }, "no forged line: \(log)")
        XCTAssertFalse(log.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0 }, "no escape sequence, no NUL")
        XCTAssertTrue(log.contains(#"evil\n2026-01-01T00:00:00.000Z notice capture-recv: stream closed path=/srv/fake.caf\u{1B}[2J\u{0}"#), log)
    }
}
