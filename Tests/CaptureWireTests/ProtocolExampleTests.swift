import CaptureWire
import Foundation
import TestSupport
import XCTest

/// The worked example of proto/PROTOCOL.md §13 is a valid conversation, byte for byte.
final class ProtocolExampleTests: XCTestCase {
    private func block(_ name: String) throws -> [UInt8] {
        let spec = try String(
            contentsOf: WireVectorCatalog.folder.deletingLastPathComponent().appendingPathComponent("PROTOCOL.md"),
            encoding: .utf8)
        let start = try XCTUnwrap(spec.range(of: "```\(name)\n"), "PROTOCOL.md has no \(name) block")
        let end = try XCTUnwrap(spec.range(of: "```", range: start.upperBound..<spec.endIndex))
        return try WireHexFile.parse(String(spec[start.upperBound..<end.lowerBound]))
    }

    func testSenderBytesAreAValidStreamForTheReceiver() throws {
        var decoder = FrameDecoder(role: .receiver)
        let messages = try decoder.decode(block("hex-sender-to-receiver"))
        try decoder.finish()
        var state = ReceiverStreamState()
        try state.receivePreamble(version: try XCTUnwrap(decoder.preambleVersion))
        XCTAssertEqual(messages.map(\.type), [.hello, .audioData, .endOfStream])
        guard case .decideOnHello(let hello) = try state.receive(messages[0]) else { return XCTFail("no Hello") }
        XCTAssertEqual(hello.message, WireFixtures.hello())
        try state.accept(resumingAt: .beginning(of: hello))
        XCTAssertEqual(try state.receive(messages[1]), .writeAudio(WireFixtures.pcmAudioWithLevels()))
        guard case .audioData(let audio) = messages[1], case .valid(let levels) = AudioLevels.check(audio, channelCount: 2) else {
            return XCTFail("the example's AudioData carries valid levels")
        }
        XCTAssertEqual(levels.peakDBFS, [0, 0])
        XCTAssertEqual(levels.rmsDBFS, [-6, -6])
        guard case .finishStream(let end) = try state.receive(messages[2]) else { return XCTFail("no end") }
        XCTAssertEqual(end.reason, "duration")
        XCTAssertEqual(state.phase, .ended)
    }

    func testReceiverBytesAreAValidAnswerForTheSender() throws {
        var decoder = FrameDecoder(role: .sender)
        let messages = try decoder.decode(block("hex-receiver-to-sender"))
        try decoder.finish()
        XCTAssertEqual(messages.map(\.type), [.helloAccepted, .ack, .endAccepted])
        var state = SenderStreamState()
        try state.helloSent()
        XCTAssertEqual(try state.receive(messages[0]), .accepted(WireFixtures.helloAccepted()))
        try state.sent(sequence: 1)
        try state.endOfStreamSent(lastSequence: 1, endSampleTime: 4)
        XCTAssertEqual(try state.receive(messages[1]), .acknowledged(WireFixtures.ack(1, sampleTime: 4)))
        guard case .endAccepted(let end) = try state.receive(messages[2]) else { return XCTFail("no EndAccepted") }
        XCTAssertEqual(end.totalFrames, 4)
        XCTAssertEqual(end.totalPackets, 4)
        XCTAssertEqual(state.phase, .ended)
    }

    func testExampleBytesAreCanonical() throws {
        for name in ["hex-sender-to-receiver", "hex-receiver-to-sender"] {
            let bytes = try block(name)
            var decoder = FrameDecoder(role: name == "hex-sender-to-receiver" ? .receiver : .sender)
            let messages = try decoder.decode(bytes)
            let preamble = name == "hex-sender-to-receiver" ? WirePreamble.bytes() : []
            XCTAssertEqual(preamble + (try messages.flatMap { try $0.encode() }), bytes, name)
        }
    }
}
