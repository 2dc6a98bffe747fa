import CaptureWire
import CaptureWireNIO
import NIOCore
import NIOEmbedded
import XCTest

/// The SwiftNIO frame decoder and encoder in an EmbeddedChannel.
final class WireNIOHandlerTests: XCTestCase {
    /// Records user inbound events (the preamble notice).
    private final class EventRecorder: ChannelInboundHandler {
        typealias InboundIn = WireMessage
        typealias InboundOut = WireMessage
        var events: [WirePreambleReceived] = []

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let preamble = event as? WirePreambleReceived { events.append(preamble) }
            context.fireUserInboundEventTriggered(event)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.fireChannelRead(data)
        }
    }

    private func decoderChannel(role: WireRole, maxFrameBytes: Int = WireProtocol.defaultMaxFrameBytes) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            ByteToMessageHandler(WireFrameDecoder(role: role, maxFrameBytes: maxFrameBytes)))
        return channel
    }

    private func buffer(_ bytes: some Sequence<UInt8>) -> ByteBuffer {
        ByteBuffer(bytes: Array(bytes))
    }

    private func readAll(_ channel: EmbeddedChannel) throws -> [WireMessage] {
        var messages: [WireMessage] = []
        while let message = try channel.readInbound(as: WireMessage.self) { messages.append(message) }
        return messages
    }

    func testFrameSplitAcrossReads() throws {
        let channel = try decoderChannel(role: .sender)
        let audio = WireFixtures.pcmAudio()
        let frame = try WireMessage.audioData(audio).encode()
        try channel.writeInbound(buffer(frame.prefix(2)))
        try channel.writeInbound(buffer(frame[2..<12]))
        XCTAssertEqual(try readAll(channel), [])
        try channel.writeInbound(buffer(frame[12...]))
        XCTAssertEqual(try readAll(channel), [.audioData(audio)])
        XCTAssertTrue(try channel.finish().isClean)
    }

    func testTwoFramesInOneRead() throws {
        let channel = try decoderChannel(role: .sender)
        let ack = WireMessage.ack(WireFixtures.ack(2, sampleTime: 484))
        let heartbeat = WireMessage.heartbeat(WireFixtures.heartbeat())
        try channel.writeInbound(buffer(try ack.encode() + heartbeat.encode()))
        XCTAssertEqual(try readAll(channel), [ack, heartbeat])
        XCTAssertTrue(try channel.finish().isClean)
    }

    func testOversizedFrameIsRefusedBeforeItsBodyArrives() throws {
        let channel = try decoderChannel(role: .sender, maxFrameBytes: 64 * 1024)
        // Header of a 2 MiB AudioData, and nothing of its body.
        XCTAssertThrowsError(try channel.writeInbound(buffer([0x00, 0x20, 0x00, 0x01, 0x03]))) { error in
            XCTAssertEqual(error as? WireError, .frameTooLarge(length: 0x20_0001, limit: 64 * 1024))
        }
        _ = try? channel.finish()
    }

    func testReceiverReadsThePreambleAndFiresAnEvent() throws {
        let channel = try decoderChannel(role: .receiver)
        let recorder = EventRecorder()
        try channel.pipeline.syncOperations.addHandler(recorder)
        let hello = WireMessage.hello(WireFixtures.hello())
        let bytes = WirePreamble.bytes() + (try hello.encode())
        try channel.writeInbound(buffer(bytes.prefix(5)))
        XCTAssertEqual(recorder.events, [])
        try channel.writeInbound(buffer(bytes[5...]))
        XCTAssertEqual(recorder.events, [WirePreambleReceived(version: 1)])
        XCTAssertEqual(try readAll(channel), [hello])
        XCTAssertTrue(try channel.finish().isClean)
    }

    func testReceiverRefusesATLSClient() throws {
        let channel = try decoderChannel(role: .receiver)
        XCTAssertThrowsError(try channel.writeInbound(buffer([0x16, 0x03, 0x01, 0x02, 0x00]))) { error in
            XCTAssertEqual(error as? WireError, .clientSpeaksTLS)
        }
        _ = try? channel.finish()
    }

    func testConnectionClosedMidFrameIsReported() throws {
        let channel = try decoderChannel(role: .sender)
        let frame = try WireMessage.audioData(WireFixtures.pcmAudio()).encode()
        try channel.writeInbound(buffer(frame.prefix(15)))
        XCTAssertThrowsError(try channel.finish()) { error in
            XCTAssertEqual(error as? WireError, .truncatedFrame(receivedBytes: 15, expectedBytes: frame.count))
        }
    }

    func testEncoderWritesTheVectorBytes() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(WireFrameEncoder()))
        for vector in WireVectorCatalog.valid {
            guard case .frame(let message) = vector.content else { continue }
            try channel.writeOutbound(message)
            let written = try XCTUnwrap(try channel.readOutbound(as: ByteBuffer.self))
            XCTAssertEqual(Array(written.readableBytesView), try WireVectorCatalog.load(vector), vector.file)
        }
        XCTAssertTrue(try channel.finish().isClean)
    }

    func testSenderEncoderWritesThePreambleOnceBeforeTheFirstFrame() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(WireFrameEncoder(sendsPreamble: true)))
        let hello = WireMessage.hello(WireFixtures.hello())
        let heartbeat = WireMessage.heartbeat(WireFixtures.heartbeat())
        try channel.writeOutbound(hello)
        try channel.writeOutbound(heartbeat)
        let first = try XCTUnwrap(try channel.readOutbound(as: ByteBuffer.self))
        let second = try XCTUnwrap(try channel.readOutbound(as: ByteBuffer.self))
        XCTAssertEqual(Array(first.readableBytesView), WirePreamble.bytes() + (try hello.encode()))
        XCTAssertEqual(Array(second.readableBytesView), try heartbeat.encode())
        XCTAssertTrue(try channel.finish().isClean)
    }

    func testSenderEncoderOutputDecodesAtTheReceiver() throws {
        let sender = EmbeddedChannel()
        try sender.pipeline.syncOperations.addHandler(MessageToByteHandler(WireFrameEncoder(sendsPreamble: true)))
        let receiver = try decoderChannel(role: .receiver)
        let audio = WireFixtures.pcmAudio(sequence: 1, firstSampleTime: 0, frames: 48_000)
        let messages: [WireMessage] = [.hello(WireFixtures.hello()), .audioData(audio), .endOfStream(WireFixtures.endOfStream())]
        for message in messages { try sender.writeOutbound(message) }
        while let bytes = try sender.readOutbound(as: ByteBuffer.self) {
            try receiver.writeInbound(bytes)
        }
        XCTAssertEqual(try readAll(receiver), messages)
        XCTAssertTrue(try sender.finish().isClean)
        XCTAssertTrue(try receiver.finish().isClean)
    }
}
