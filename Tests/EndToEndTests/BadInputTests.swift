import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Hostile and broken input to a real capture-recv: each gets an Error frame with the right code (or
/// a close), is logged, and never disturbs another stream or the process.
final class BadInputTests: XCTestCase {
    private static let preamble = WirePreamble.bytes()

    private static func frame(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        let length = UInt32(body.count + 1)
        return [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF), type] + body
    }

    private static func hello(
        name: String = "bad-input", format: StreamFormat = .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), startUnixNanoseconds: Int64 = 0
    ) throws -> [UInt8] {
        try WireMessage.hello(.with {
            $0.protocolVersion = 1
            $0.startTimeUnixNs = startUnixNanoseconds
            $0.streamID = withUnsafeBytes(of: UUID().uuid) { Data($0) }
            $0.streamName = name
            $0.format = Capture_V1_StreamFormat(format)
        }).encode()
    }

    /// The Error frames in what the receiver sent back.
    private func errors(in reply: [UInt8]) throws -> [Capture_V1_Error] {
        var decoder = FrameDecoder(role: .sender)
        return try decoder.decode(reply).compactMap { message in
            if case .error(let error) = message { return error }
            return nil
        }
    }

    private func assertRefused(
        _ bytes: [UInt8], port: Int, code: Capture_V1_Error.Code, messageContains text: String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let reply = try RawClient.exchange(port: port, sending: bytes)
        let received = try errors(in: reply)
        XCTAssertEqual(received.count, 1, "one Error frame, then the receiver closes", file: file, line: line)
        XCTAssertEqual(received.first?.code, code, file: file, line: line)
        XCTAssertTrue(received.first?.fatal ?? false, file: file, line: line)
        if !text.isEmpty {
            XCTAssertTrue(received.first?.message.contains(text) ?? false, "\(received.first?.message ?? "no message") should mention \(text)", file: file, line: line)
        }
    }

    /// A client that does not speak the protocol at all gets no frame it could not read: the receiver
    /// closes the connection and logs why.
    private func assertClosed(_ bytes: [UInt8], receiver: ReceiverUnderTest, logMentions text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let reply = try RawClient.exchange(port: receiver.port, sending: bytes)
        XCTAssertEqual(reply, [], "closed without a reply", file: file, line: line)
        XCTAssertTrue(waitFor { receiver.child.standardError.contains(text) }, "the log should mention \(text): \(receiver.child.standardError)", file: file, line: line)
    }

    /// Issue 19, item 7: one 76-byte Gap frame claiming 2^40 frames used to make the receiver write
    /// silence until the disk was full. A gap longer than the time since the stream's start is
    /// refused; one the clock cannot rule out (a sender whose clock says 1970) costs no disk.
    func testAGapCannotOutrunTheClockNorCostDisk() throws {
        let receiver = try ReceiverUnderTest()
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        let lie = try WireMessage.gap(.with { $0.sequence = 1; $0.sampleTime = 0; $0.lengthFrames = 1 << 40; $0.reason = "overrun" }).encode()
        XCTAssertLessThan(lie.count, 80)
        let liar = try ProtocolClient(port: receiver.port)
        try liar.send(Self.preamble + (try Self.hello(name: "liar", startUnixNanoseconds: now - 3_000_000_000)))
        guard case .helloAccepted = try liar.nextAnswer() else { return XCTFail("the stream was not accepted") }
        try liar.send(lie)
        guard case .error(let refusal) = try liar.nextAnswer() else { return XCTFail("the gap was not refused") }
        XCTAssertEqual(refusal.code, .invalidMessage)
        XCTAssertTrue(refusal.message.contains("a gap cannot be longer than the time that passed"), refusal.message)

        // A day-long gap from a sender whose clock is at 1970: accepted, and written as a hole.
        let day: Int64 = 86_400 * 48_000
        let gap = try WireMessage.gap(.with { $0.sequence = 1; $0.sampleTime = 0; $0.lengthFrames = UInt64(day); $0.reason = "device-lost" }).encode()
        let end = try WireMessage.endOfStream(.with { $0.lastSequence = 1; $0.endSampleTime = day; $0.reason = "end-of-file" }).encode()
        let client = try ProtocolClient(port: receiver.port, timeout: 20)
        try client.send(Self.preamble + (try Self.hello(name: "unset-clock")))
        guard case .helloAccepted = try client.nextAnswer() else { return XCTFail("the stream was not accepted") }
        try client.send(gap + end)
        guard case .endAccepted(let accepted) = try client.nextAnswer() else { return XCTFail("no EndAccepted") }
        XCTAssertEqual(accepted.totalFrames, day)
        let path = receiver.directory.appendingPathComponent(accepted.fileName).path
        var status = stat()
        XCTAssertEqual(stat(path, &status), 0)
        XCTAssertGreaterThan(Int64(status.st_size), day * 4, "the file spans the day")
        XCTAssertLessThan(Int64(status.st_blocks) * 512, 1 << 20, "a day of silence (\(day * 4) bytes) takes no disk")
        let soxi = try ToolRunner.run("soxi", ["-s", path])
        XCTAssertEqual(soxi.outputText.trimmingCharacters(in: .whitespacesAndNewlines), "\(day)", "sox reads the day's frames from the header: \(soxi.errorText)")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testMalformedInputGetsErrorFramesAndTheReceiverKeepsRecording() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--handshake-timeout", "1"])
        // A good stream runs through all of it.
        let good = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "3", "--stream-name", "good", "--buffer-seconds", "0.05",
        ])
        let port = receiver.port

        try assertClosed(Array("hello there, receiver!".utf8), receiver: receiver, logMentions: "preamble")
        try assertClosed([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC], receiver: receiver, logMentions: "TLS")
        try assertClosed(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), receiver: receiver, logMentions: "HTTP")
        try assertRefused(Array("CAPSTRM".utf8) + [2], port: port, code: .unsupportedVersion, messageContains: "2")
        // An absurd length is refused from the length field alone, before any body arrives.
        try assertRefused(Self.preamble + [0xFF, 0xFF, 0xFF, 0xF0, 1], port: port, code: .frameTooLarge, messageContains: "4294967280")
        // Before authentication a megabyte Hello is refused the same way: nobody can make the
        // receiver buffer a megabyte per unauthenticated connection.
        try assertRefused(Self.preamble + [0x00, 0x10, 0x00, 0x00, 1], port: port, code: .frameTooLarge, messageContains: "before authentication")
        try assertRefused(Self.preamble + [0, 0, 0, 0], port: port, code: .malformedFrame, messageContains: "")
        try assertRefused(Self.preamble + Self.frame(0x7E, [1, 2, 3]), port: port, code: .malformedFrame, messageContains: "126")
        try assertRefused(Self.preamble + Self.frame(1, [0xFF, 0xFF, 0xFF]), port: port, code: .malformedFrame, messageContains: "")
        // Audio before Hello is out of order.
        let audio = try WireMessage.audioData(.with { $0.sequence = 1; $0.packetCount = 1; $0.payload = Data([0, 0, 0, 0]) }).encode()
        try assertRefused(Self.preamble + audio, port: port, code: .unexpectedMessage, messageContains: "Hello")
        // A format the system does not carry.
        var badFormat = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
        badFormat.bitsPerChannel = 12
        try assertRefused(Self.preamble + (try Self.hello(format: badFormat)), port: port, code: .badFormat, messageContains: "12 bits")
        // A stream name no file system likes stays inside the output folder.
        let hostile = try RawClient.exchange(port: port, sending: Self.preamble + (try Self.hello(name: "../../escape/\u{0}/x")), timeout: 1)
        var replies = FrameDecoder(role: .sender)
        guard case .helloAccepted(let accepted)? = try replies.decode(hostile).first else { return XCTFail("no HelloAccepted") }
        XCTAssertTrue(accepted.fileName.hasPrefix("escape_x_"), accepted.fileName)
        // A truncated frame and then silence: the connection is closed by the handshake timeout.
        try assertRefused(Self.preamble + [0, 0, 0, 50, 1, 2, 3], port: port, code: .timeout, messageContains: "handshake")
        // An idle connection that never sends anything is closed by the handshake timeout, with
        // no frame: it never spoke the protocol (PROTOCOL.md §3).
        try assertClosed([], receiver: receiver, logMentions: "the handshake did not complete within")

        XCTAssertEqual(good.wait(seconds: 60), 0, good.standardError)
        let files = receiver.files().map(\.lastPathComponent)
        XCTAssertEqual(files.filter { $0.hasPrefix("good_") }.count, 1)
        XCTAssertEqual(files.filter { $0.hasPrefix("escape_x_") }.count, 1, "\(files)")
        // Nothing was written outside the output folder.
        let parent = receiver.directory.deletingLastPathComponent()
        XCTAssertFalse(FileManager.default.fileExists(atPath: parent.appendingPathComponent("escape").path))
        let goodFile = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("good_") })
        XCTAssertEqual(try SndFileReader.read(path: goodFile.path).frames, 144_000)

        XCTAssertEqual(receiver.stop(), 0)
        let log = receiver.child.standardError
        XCTAssertTrue(log.contains("refused"), log)
        XCTAssertTrue(log.contains("peer=127.0.0.1:"), "refusals are logged with the peer's address, as users write it")
    }

    func testStreamNamesAreSanitizedIntoTheOutputFolder() throws {
        let receiver = try ReceiverUnderTest()
        for name in ["../../x", "/etc/passwd", "...", "a b/c\\d", "ünïcødé"] {
            let result = try runSender([receiver.address, "--source", "tone", "--duration", "0.1", "--no-pace", "--stream-name", name])
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        let names = receiver.files().map(\.lastPathComponent)
        XCTAssertEqual(names.count, 5)
        for name in names {
            XCTAssertFalse(name.hasPrefix("."), name)
            XCTAssertTrue(name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }, name)
        }
        XCTAssertTrue(names.contains { $0.hasPrefix("x_") }, "\(names)")
        XCTAssertTrue(names.contains { $0.hasPrefix("etc_passwd_") }, "\(names)")
        XCTAssertTrue(names.contains { $0.hasPrefix("stream_") }, "\(names)")
        XCTAssertEqual(receiver.stop(), 0)
    }
}
