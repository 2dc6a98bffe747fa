import CaptureWire
import Foundation
import TestSupport
import XCTest

/// The test vectors in proto/vectors: their bytes, what they decode to, and how invalid ones fail.
final class WireVectorTests: XCTestCase {
    /// Rewrites the vector files from the catalog; run with WIRE_WRITE_VECTORS=1 after a deliberate change.
    func testWriteVectorsWhenAsked() throws {
        guard ProcessInfo.processInfo.environment["WIRE_WRITE_VECTORS"] == "1" else {
            throw XCTSkip("set WIRE_WRITE_VECTORS=1 to rewrite proto/vectors")
        }
        try FileManager.default.createDirectory(at: WireVectorCatalog.folder, withIntermediateDirectories: true)
        for vector in WireVectorCatalog.all {
            let bytes = try WireVectorCatalog.expectedBytes(vector)
            let headerBytes: Int? = vector.file.hasPrefix("preamble") || vector.file.hasPrefix("invalid-preamble") ? nil : 5
            let text = WireHexFile.format(bytes, comments: vector.comments, firstLineBytes: headerBytes)
            try text.write(to: WireVectorCatalog.folder.appendingPathComponent(vector.file), atomically: true, encoding: .utf8)
        }
    }

    func testEveryVectorFileIsInTheCatalogAndListedInTheReadme() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: WireVectorCatalog.folder.path)
            .filter { $0.hasSuffix(".hex") }.sorted()
        XCTAssertEqual(files, WireVectorCatalog.all.map(\.file).sorted())
        let readme = try String(contentsOf: WireVectorCatalog.folder.appendingPathComponent("README.md"), encoding: .utf8)
        for file in files {
            XCTAssertTrue(readme.contains("`\(file)`"), "README.md does not list \(file)")
        }
    }

    func testEveryVectorFileStartsWithACommentAndHoldsTheCatalogBytes() throws {
        for vector in WireVectorCatalog.all {
            let text = try String(contentsOf: WireVectorCatalog.folder.appendingPathComponent(vector.file), encoding: .utf8)
            XCTAssertTrue(text.hasPrefix("#"), "\(vector.file) must start with a # comment line")
            XCTAssertEqual(try WireVectorCatalog.load(vector), try WireVectorCatalog.expectedBytes(vector), vector.file)
        }
    }

    func testPreambleVectorIsCAPSTRMAndVersion1() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.valid.first { $0.file == "preamble.hex" })
        XCTAssertEqual(try WireVectorCatalog.load(vector), [0x43, 0x41, 0x50, 0x53, 0x54, 0x52, 0x4D, 0x01])
        var decoder = FrameDecoder(role: .receiver)
        XCTAssertEqual(try decoder.decode(WireVectorCatalog.load(vector)), [])
        XCTAssertEqual(decoder.preambleVersion, 1)
    }

    func testValidFramesDecodeToTheirMessagesAndReencodeByteForByte() throws {
        for vector in WireVectorCatalog.valid {
            guard case .frame(let expected) = vector.content else { continue }
            let bytes = try WireVectorCatalog.load(vector)
            var decoder = FrameDecoder(role: .sender)
            let messages = try decoder.decode(bytes)
            XCTAssertEqual(messages, [expected], vector.file)
            XCTAssertEqual(decoder.bufferedByteCount, 0, vector.file)
            XCTAssertEqual(try messages.first?.encode(), bytes, "\(vector.file) does not re-encode byte for byte")
        }
    }

    /// The continuation vector is a Hello a receiver accepts, beginning where it says (PROTOCOL.md §8.1).
    func testTheContinuationVectorIsAValidHelloThatContinuesAnother() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.valid.first { $0.file == "frame-01-hello-continuation.hex" })
        var decoder = FrameDecoder(role: .sender)
        guard case .hello(let hello)? = try decoder.decode(WireVectorCatalog.load(vector)).first else { return XCTFail("not a Hello") }
        let validated = try ValidatedHello(hello)
        XCTAssertEqual(StreamPosition.beginning(of: validated), StreamPosition(nextSequence: 501, nextSampleTime: 96_000))
        XCTAssertEqual(UUID(wireBytes: hello.continues.streamID), WireFixtures.streamID)
        XCTAssertEqual(hello.resumeSecret.count, 32)
    }

    func testFrameHeadersOfValidVectors() throws {
        for vector in WireVectorCatalog.valid {
            guard case .frame(let message) = vector.content else { continue }
            let bytes = try WireVectorCatalog.load(vector)
            let length = bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            XCTAssertEqual(length, bytes.count - 4, vector.file)
            XCTAssertEqual(bytes[4], message.type.rawValue, vector.file)
        }
    }

    func testPCMAudioVectorCarriesTheSamplesLittleEndian() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.valid.first { $0.file == "frame-03-audio-data-pcm.hex" })
        var decoder = FrameDecoder(role: .sender)
        guard case .audioData(let audio)? = try decoder.decode(WireVectorCatalog.load(vector)).first else {
            return XCTFail("not AudioData")
        }
        let samples = stride(from: 0, to: audio.payload.count, by: 2).map {
            Int16(bitPattern: UInt16(audio.payload[$0]) | UInt16(audio.payload[$0 + 1]) << 8)
        }
        XCTAssertEqual(samples, [0, 0, 1000, -1000, 2000, -2000, 32767, -32768])
        XCTAssertEqual(audio.packetCount, 4)
        XCTAssertEqual(audio.frameCount, 4)
    }

    /// protoc, an independent protobuf implementation, reads every valid body as its message type
    /// with the same field values: its text output parses back to the message the vector carries.
    func testProtocDecodesEveryValidBodyToTheSameFields() throws {
        for vector in WireVectorCatalog.valid {
            guard case .frame(let message) = vector.content else { continue }
            let bytes = try WireVectorCatalog.load(vector)
            let text = try WireProtoc.decode(
                Array(bytes.dropFirst(5)), messageType: "capture.v1.\(message.type)",
                protoFile: WireVectorCatalog.protoFile)
            XCTAssertEqual(try Self.parseTextFormat(text, as: message.type), message, "protoc disagrees on \(vector.file)")
        }
    }

    func testInvalidVectorsGiveTheirSpecificErrors() throws {
        for vector in WireVectorCatalog.invalid {
            guard case .invalid(_, let role, let expected) = vector.content else { continue }
            let bytes = try WireVectorCatalog.load(vector)
            var decoder = FrameDecoder(role: role)
            XCTAssertThrowsError(try { () throws(WireError) in
                _ = try decoder.decode(bytes)
                try decoder.finish()
            }(), vector.file) { error in
                XCTAssertEqual(error as? WireError, expected, vector.file)
            }
        }
    }

    func testInvalidFrameVectorsFailTheSameWayAfterAPreambleAtTheReceiver() throws {
        for vector in WireVectorCatalog.invalid {
            guard case .invalid(_, .sender, let expected) = vector.content else { continue }
            let bytes = try WireVectorCatalog.load(vector)
            var decoder = FrameDecoder(role: .receiver)
            // The receiver's first frame is the Hello, read under the smaller Hello limit.
            var expectedAtReceiver = expected
            if case .frameTooLarge(let length, _) = expected {
                expectedAtReceiver = .helloTooLarge(length: length, limit: WireProtocol.maxHelloFrameBytes)
            }
            XCTAssertThrowsError(try { () throws(WireError) in
                _ = try decoder.decode(WirePreamble.bytes() + bytes)
                try decoder.finish()
            }(), vector.file) { error in
                XCTAssertEqual(error as? WireError, expectedAtReceiver, vector.file)
            }
        }
    }

    func testTruncatedVectorWaitsForMoreBeforeTheConnectionCloses() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.invalid.first { $0.file == "invalid-frame-truncated-body.hex" })
        var decoder = FrameDecoder(role: .sender)
        XCTAssertEqual(try decoder.decode(WireVectorCatalog.load(vector)), [])
        XCTAssertEqual(decoder.bufferedByteCount, 15)
    }

    func testBadFormatHelloVectorIsRefusedWithTheStreamFormatErrorText() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.invalid.first { $0.file == "invalid-hello-bad-format.hex" })
        guard case .refusedByReceiver(let expectedMessage, let expectedError) = vector.content else {
            return XCTFail("catalog entry has the wrong kind")
        }
        var decoder = FrameDecoder(role: .receiver)
        let messages = try decoder.decode(WirePreamble.bytes() + WireVectorCatalog.load(vector))
        XCTAssertEqual(messages, [expectedMessage])
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        XCTAssertThrowsError(try state.receive(messages[0])) { error in
            let wireError = error as? WireError
            XCTAssertEqual(wireError, expectedError)
            XCTAssertEqual(wireError?.code, .badFormat)
            XCTAssertEqual(
                wireError?.errorFrame.message,
                "the stream format is not accepted: sample rate 1000.0 Hz is out of range: use 8000 to 192000 Hz")
        }
    }

    private static func parseTextFormat(_ text: String, as type: WireMessageType) throws -> WireMessage {
        switch type {
        case .hello: return .hello(try Capture_V1_Hello(textFormatString: text))
        case .helloAccepted: return .helloAccepted(try Capture_V1_HelloAccepted(textFormatString: text))
        case .audioData: return .audioData(try Capture_V1_AudioData(textFormatString: text))
        case .gap: return .gap(try Capture_V1_Gap(textFormatString: text))
        case .ack: return .ack(try Capture_V1_Ack(textFormatString: text))
        case .heartbeat: return .heartbeat(try Capture_V1_Heartbeat(textFormatString: text))
        case .endOfStream: return .endOfStream(try Capture_V1_EndOfStream(textFormatString: text))
        case .endAccepted: return .endAccepted(try Capture_V1_EndAccepted(textFormatString: text))
        case .error: return .error(try Capture_V1_Error(textFormatString: text))
        case .marker: return .marker(try Capture_V1_Marker(textFormatString: text))
        case .filledGap: return .filledGap(try Capture_V1_FilledGap(textFormatString: text))
        }
    }
}
