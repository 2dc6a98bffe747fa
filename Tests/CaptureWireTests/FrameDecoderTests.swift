import CaptureWire
import Foundation
import TestSupport
import XCTest

/// The pure incremental decoder: chunking, preamble recognition, every malformed class.
final class FrameDecoderTests: XCTestCase {
    /// A session as a sender writes it: preamble and every valid frame of the vectors.
    private func sessionBytes() throws -> (bytes: [UInt8], messages: [WireMessage]) {
        var bytes = WirePreamble.bytes()
        var messages: [WireMessage] = []
        for vector in WireVectorCatalog.valid {
            guard case .frame(let message) = vector.content else { continue }
            bytes += try message.encode()
            messages.append(message)
        }
        return (bytes, messages)
    }

    func testWholeInputDecodesEveryMessage() throws {
        let session = try sessionBytes()
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertEqual(try decoder.decode(session.bytes), session.messages)
        XCTAssertEqual(decoder.preambleVersion, 1)
        XCTAssertNoThrow(try decoder.finish())
    }

    func testByteByByteGivesTheSameMessages() throws {
        let session = try sessionBytes()
        var decoder = FrameDecoder(role: .receiver)
        var messages: [WireMessage] = []
        for byte in session.bytes {
            messages += try decoder.decode([byte])
        }
        XCTAssertEqual(messages, session.messages)
        XCTAssertEqual(decoder.bufferedByteCount, 0)
    }

    func testRandomChunkSizesGiveTheSameMessages() throws {
        let session = try sessionBytes()
        for seed in UInt64(1)...20 {
            var random = SplitMix64(seed: seed)
            var decoder = FrameDecoder(role: .receiver)
            var messages: [WireMessage] = []
            var offset = 0
            while offset < session.bytes.count {
                let size = Int(random.next() % 40) + 1
                let end = min(offset + size, session.bytes.count)
                messages += try decoder.decode(session.bytes[offset..<end])
                offset = end
            }
            XCTAssertEqual(messages, session.messages, "seed \(seed)")
        }
    }

    func testIncompleteFrameWaitsAndCompletesLater() throws {
        let frame = try WireMessage.audioData(WireFixtures.pcmAudio()).encode()
        var decoder = FrameDecoder(role: .sender)
        XCTAssertEqual(try decoder.decode(frame.prefix(3)), [])
        XCTAssertEqual(try decoder.decode(frame[3..<20]), [])
        XCTAssertEqual(try decoder.decode(frame[20...]), [.audioData(WireFixtures.pcmAudio())])
    }

    func testErrorIsFinal() throws {
        var decoder = FrameDecoder(role: .sender)
        XCTAssertThrowsError(try decoder.decode([0, 0, 0, 1, 0x63])) { error in
            XCTAssertEqual(error as? WireError, .unknownFrameType(0x63))
        }
        let valid = try WireMessage.heartbeat(WireFixtures.heartbeat()).encode()
        XCTAssertThrowsError(try decoder.decode(valid)) { error in
            XCTAssertEqual(error as? WireError, .unknownFrameType(0x63))
        }
        XCTAssertThrowsError(try decoder.finish())
    }

    func testOversizedLengthIsRefusedBeforeTheTypeByteOrBody() {
        var decoder = FrameDecoder(role: .sender, maxFrameBytes: 1000)
        XCTAssertThrowsError(try decoder.decode([0x00, 0x00, 0x03, 0xE9])) { error in
            XCTAssertEqual(error as? WireError, .frameTooLarge(length: 1001, limit: 1000))
            XCTAssertEqual((error as? WireError)?.code, .frameTooLarge)
        }
    }

    func testAReceiversFirstFrameHasTheSmallerHelloLimitAndLaterFramesTheFullOne() throws {
        // 81,921 bytes claimed for the Hello: refused from the length field, before the body.
        var receiver = FrameDecoder(role: .receiver)
        XCTAssertThrowsError(try receiver.decode(WirePreamble.bytes() + [0x00, 0x01, 0x40, 0x01])) { error in
            XCTAssertEqual(error as? WireError, .helloTooLarge(length: 81_921, limit: WireProtocol.maxHelloFrameBytes))
            XCTAssertEqual((error as? WireError)?.code, .frameTooLarge)
            XCTAssertTrue("\(error)".contains("before authentication"), "\(error)")
        }
        // A Hello with the largest cookie allowed fits; then a near-megabyte AudioData does too.
        let hello = Capture_V1_Hello.with {
            $0.protocolVersion = 1
            $0.streamID = Data(repeating: 7, count: 16)
            $0.streamName = String(repeating: "n", count: 255)
            $0.authToken = String(repeating: "t", count: 1_024)
            $0.magicCookie = Data(repeating: 1, count: 65_536)
        }
        var audio = WireFixtures.pcmAudio(frames: 4)
        audio.payload = Data(repeating: 0, count: 1_000_000)
        var accepting = FrameDecoder(role: .receiver)
        let messages = try accepting.decode(WirePreamble.bytes() + (try WireMessage.hello(hello).encode()) + (try WireMessage.audioData(audio).encode()))
        XCTAssertEqual(messages.count, 2)
    }

    func testFrameExactlyAtTheConfiguredLimitIsAccepted() throws {
        var audio = WireFixtures.pcmAudio(frames: 4)
        let frame = try WireMessage.audioData(audio).encode()
        let length = frame.count - 4
        var decoder = FrameDecoder(role: .sender, maxFrameBytes: length)
        XCTAssertEqual(try decoder.decode(frame), [.audioData(audio)])
        audio.frameCount += 1000  // one more varint byte
        var tooSmall = FrameDecoder(role: .sender, maxFrameBytes: length)
        XCTAssertThrowsError(try tooSmall.decode(WireMessage.audioData(audio).encode())) { error in
            XCTAssertEqual(error as? WireError, .frameTooLarge(length: UInt32(length + 1), limit: length))
        }
    }

    func testUnknownTypeIsRefusedBeforeTheBody() {
        var decoder = FrameDecoder(role: .sender)
        XCTAssertThrowsError(try decoder.decode([0x00, 0x00, 0x10, 0x00, 0x00])) { error in
            XCTAssertEqual(error as? WireError, .unknownFrameType(0))
            XCTAssertTrue(String(describing: error).contains("unknown frame type 0"))
        }
    }

    func testZeroLength() {
        var decoder = FrameDecoder(role: .sender)
        XCTAssertThrowsError(try decoder.decode([0, 0, 0, 0])) { error in
            XCTAssertEqual(error as? WireError, .zeroLengthFrame)
            XCTAssertEqual((error as? WireError)?.code, .malformedFrame)
        }
    }

    func testUndecodableBodyNamesTheMessageType() {
        var decoder = FrameDecoder(role: .sender)
        // Hello whose field 3 (string) holds invalid UTF-8.
        XCTAssertThrowsError(try decoder.decode([0, 0, 0, 4, 1, 0x1A, 0x01, 0xFF])) { error in
            guard case .undecodableBody(let type, let count, _)? = error as? WireError else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(type, .hello)
            XCTAssertEqual(count, 3)
        }
    }

    func testUnknownFieldsAreKeptAndReencoded() throws {
        // Heartbeat with field 1 and an unknown field 15 (varint 7): a later revision's addition.
        let frame: [UInt8] = [0, 0, 0, 5, 6, 0x08, 0x2A, 0x78, 0x07]
        var decoder = FrameDecoder(role: .sender)
        let messages = try decoder.decode(frame)
        guard case .heartbeat(let heartbeat)? = messages.first else { return XCTFail("no heartbeat") }
        XCTAssertEqual(heartbeat.sentUnixNs, 42)
        XCTAssertEqual(try messages[0].encode(), frame)
    }

    func testAudioDataFastPathMatchesSwiftProtobufEncoding() throws {
        var audio = WireFixtures.vbrAudio()
        audio.unknownFields = try Capture_V1_Heartbeat(serializedBytes: [0x78, 0x07] as [UInt8]).unknownFields
        var empty = Capture_V1_AudioData()
        empty.sequence = 3
        var big = WireFixtures.pcmAudio(sequence: 9, firstSampleTime: 123_456, frames: 60_000)
        big.frameCount = 60_000
        for message in [audio, empty, big, WireFixtures.pcmAudio()] {
            let parts = try WireMessage.audioData(message).bodyParts()
            let joined = parts.head + Array(parts.payload) + parts.tail
            XCTAssertEqual(joined, try message.serializedBytes() as [UInt8])
        }
    }

    // MARK: Preamble

    func testPreambleSplitAcrossChunksIsAccepted() throws {
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertEqual(try decoder.decode(Array("CAP".utf8)), [])
        XCTAssertNil(decoder.preambleVersion)
        XCTAssertEqual(try decoder.decode(Array("STRM".utf8) + [1]), [])
        XCTAssertEqual(decoder.preambleVersion, 1)
    }

    func testTLSClientHelloIsNamedFromItsFirstTwoBytes() {
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertEqual(try decoder.decode([0x16]), [])
        XCTAssertThrowsError(try decoder.decode([0x03])) { error in
            XCTAssertEqual(error as? WireError, .clientSpeaksTLS)
            XCTAssertEqual(
                String(describing: error),
                "the client speaks TLS; start capture-recv with ReceiverTLSConfiguration.certificatePath/ReceiverTLSConfiguration.privateKeyPath"
                    + " or connect without TLS (SenderConfiguration.tls)")
        }
    }

    func testHTTPMethodsAreRecognised() {
        for method in ["GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "CONNECT"] {
            var decoder = FrameDecoder(role: .receiver)
            XCTAssertThrowsError(try decoder.decode(Array("\(method) /streams HTTP/1.1\r\n".utf8))) { error in
                XCTAssertEqual(error as? WireError, .clientSpeaksHTTP(method: method))
                XCTAssertTrue(String(describing: error).contains("HTTP \(method) request"))
            }
        }
    }

    func testGarbageFailsAsSoonAsItCannotBeAnythingKnown() {
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertThrowsError(try decoder.decode([0x43, 0x41, 0x58])) { error in  // "CAX"
            XCTAssertEqual(error as? WireError, .badPreamble(received: [0x43, 0x41, 0x58]))
            XCTAssertEqual((error as? WireError)?.code, .malformedFrame)
            XCTAssertTrue(String(describing: error).contains("43 41 58"))
        }
    }

    func testOtherVersionNamesBothVersions() {
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertThrowsError(try decoder.decode(Array("CAPSTRM".utf8) + [7])) { error in
            XCTAssertEqual((error as? WireError)?.code, .unsupportedVersion)
            let text = String(describing: error)
            XCTAssertTrue(text.contains("version 7") && text.contains("version 1"), text)
        }
    }

    func testConnectionClosedInThePreamble() {
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertThrowsError(try { () throws(WireError) in
            _ = try decoder.decode(Array("CAPS".utf8))
            try decoder.finish()
        }()) { error in
            XCTAssertEqual(error as? WireError, .truncatedPreamble(receivedBytes: 4))
        }
    }

    // MARK: Sender side: a receiver that does not speak frames

    func testSenderRecognisesATLSReceiver() {
        var decoder = FrameDecoder(role: .sender)
        // A TLS alert record (a TLS server's answer to bytes that are not a ClientHello).
        XCTAssertThrowsError(try decoder.decode([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46])) { error in
            XCTAssertEqual(error as? WireError, .receiverSpeaksTLS)
            XCTAssertTrue(String(describing: error).contains("connect with TLS (SenderConfiguration.tls)"))
        }
    }

    func testSenderRecognisesAnHTTPReceiver() {
        var decoder = FrameDecoder(role: .sender)
        XCTAssertThrowsError(try decoder.decode(Array("HTTP/1.1 400 Bad Request\r\n".utf8))) { error in
            XCTAssertEqual(error as? WireError, .receiverSpeaksHTTP)
        }
    }
}
