import CaptureCommitLog
import CaptureCore
import CaptureWire
@testable import CaptureReceiver
import Foundation
import XCTest

/// The receiver's records in its commit log: what a round and a file record hold comes back exactly,
/// byte for byte as the format documents, and bodies that are not the receiver's are refused.
final class ReceiverLogRecordTests: XCTestCase {
    private static let stream = UUID(uuidString: "01234567-89AB-CDEF-0123-456789ABCDEF")!

    func testEachKindComesBackExactly() {
        let records: [(String, ReceiverLogRecord)] = [
            ("file", .file(LoggedFile(stream: Self.stream, relativePath: "studio/take_20260101T000000Z.caf"))),
            ("empty round (a position only)", .round(LoggedRound(packetsBefore: 7, position: StreamPositionRecord(position: StreamPosition(lastSequence: 9, endSampleTime: 480), packets: 7), operations: []))),
            ("PCM audio, silence and a marker", .round(LoggedRound(
                packetsBefore: 0, position: StreamPositionRecord(position: StreamPosition(lastSequence: 3, endSampleTime: 1_004), packets: 1_004),
                operations: [
                    .audio(payload: [1, 2, 3, 4], packetSizes: [], frameCount: 2),
                    .marker(framePosition: 2, name: "gap: 1000 frames not captured (overrun, é)"),
                    .silence(frames: 1_000),
                    .audio(payload: [5, 6, 7, 8], packetSizes: [], frameCount: 2),
                ]))),
            ("Opus packets", .round(LoggedRound(
                packetsBefore: 12, position: StreamPositionRecord(position: StreamPosition(lastSequence: 40, endSampleTime: 96_000), packets: 15),
                operations: [.audio(payload: Array(repeating: 0xA5, count: 300), packetSizes: [100, 120, 80], frameCount: 2_880)]))),
        ]
        for (name, record) in records {
            let encoded = record.encoded(subject: 42)
            XCTAssertEqual(encoded.subject, 42, name)
            XCTAssertEqual(ReceiverLogRecord(encoded), record, name)
        }
    }

    func testTheRoundBodyIsLaidOutAsDocumented() {
        let round = ReceiverLogRecord.round(LoggedRound(
            packetsBefore: 1, position: StreamPositionRecord(position: StreamPosition(lastSequence: 2, endSampleTime: 3), packets: 4),
            operations: [.audio(payload: [0xAA, 0xBB], packetSizes: [2], frameCount: 960), .silence(frames: 5), .marker(framePosition: 6, name: "m")]))
        let encoded = round.encoded(subject: 1)
        XCTAssertEqual(encoded.kind, 2)
        let expected: [UInt8] =
            [0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 2] + [0, 0, 0, 0, 0, 0, 0, 3] + [0, 0, 0, 0, 0, 0, 0, 4] + [0, 0, 0, 3]
            + [0x41] + [0, 0, 3, 0xC0] + [0, 0, 0, 1] + [0, 0, 0, 2] + [0, 0, 0, 2] + [0xAA, 0xBB]
            + [0x53] + [0, 0, 0, 0, 0, 0, 0, 5]
            + [0x4D] + [0, 0, 0, 0, 0, 0, 0, 6] + [0, 0, 0, 1] + [0x6D]
        XCTAssertEqual(encoded.body, expected)
        let file = ReceiverLogRecord.file(LoggedFile(stream: Self.stream, relativePath: "a.caf")).encoded(subject: 1)
        XCTAssertEqual(file.kind, 1)
        XCTAssertEqual(file.body, Array(Self.stream.wireBytes) + Array("a.caf".utf8))
    }

    /// A stream's pending round (`PendingRound`) carries the file's packets from one round to the
    /// next, counts the audio bytes that start a round early, and forgets what a segment cut or a
    /// lone sync made durable, the next round then starting at the new file's packets.
    func testAPendingRoundCarriesPacketsBetweenRoundsAndForgetsWhatACutMadeDurable() {
        var round = PendingRound(packetsBefore: 10)
        round.audio(TimedAudio(first: 0, payload: Data([1, 2, 3]), packetSizes: [1, 2], frameCount: 1_920))
        round.silence(frames: 480)
        XCTAssertEqual(round.bytes, 4, "three audio bytes, and one for the silence")
        let first = StreamPositionRecord(position: StreamPosition(lastSequence: 3, endSampleTime: 2_400), packets: 12)
        XCTAssertEqual(
            ReceiverLogRecord(CommitLogRecord(kind: ReceiverLogRecord.roundKind, subject: 9, body: round.take(position: first))),
            .round(LoggedRound(packetsBefore: 10, position: first, operations: [
                .audio(payload: [1, 2, 3], packetSizes: [1, 2], frameCount: 1_920), .silence(frames: 480),
            ])))
        XCTAssertEqual(round.bytes, 0)

        round.audio(TimedAudio(first: 2_400, payload: Data([4]), packetSizes: [1], frameCount: 960))
        round.restart(packetsBefore: 2)
        XCTAssertEqual(round.bytes, 0, "a cut made it durable: it starts no round")
        round.marker(framePosition: 0, name: "m")
        let second = StreamPositionRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 3_360), packets: 2)
        XCTAssertEqual(
            ReceiverLogRecord(CommitLogRecord(kind: ReceiverLogRecord.roundKind, subject: 9, body: round.take(position: second))),
            .round(LoggedRound(packetsBefore: 2, position: second, operations: [.marker(framePosition: 0, name: "m")])),
            "the next round begins at the new file's packets, without what the cut covered")
    }

    /// The writer builds a round's body as it writes (`RoundRecordBody`): each body taken holds
    /// exactly the operations since the last one, a discarded stretch is gone, and the bytes are
    /// the documented record's.
    func testARoundBodyBuiltAsTheStreamWritesIsTheRoundsRecord() {
        var body = RoundRecordBody()
        XCTAssertTrue(body.isEmpty)
        [UInt8](repeating: 7, count: 5).withUnsafeBytes { body.appendAudio($0, packetSizes: [2, 3], frameCount: 1_920) }
        body.appendMarker(framePosition: 1_920, name: "gap: 960 frames not captured (overrun)")
        XCTAssertFalse(body.isEmpty)
        let firstPosition = StreamPositionRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 2_880), packets: 2)
        let first = body.take(packetsBefore: 0, position: firstPosition)
        XCTAssertTrue(body.isEmpty)
        XCTAssertEqual(
            ReceiverLogRecord(CommitLogRecord(kind: ReceiverLogRecord.roundKind, subject: 1, body: first)),
            .round(LoggedRound(packetsBefore: 0, position: firstPosition, operations: [
                .audio(payload: [7, 7, 7, 7, 7], packetSizes: [2, 3], frameCount: 1_920),
                .marker(framePosition: 1_920, name: "gap: 960 frames not captured (overrun)"),
            ])))

        body.appendSilence(frames: 99)
        body.discard()
        XCTAssertTrue(body.isEmpty)
        [UInt8]([1, 2]).withUnsafeBytes { body.appendAudio($0, packetSizes: [], frameCount: 1) }
        body.appendSilence(frames: 10)
        let secondPosition = StreamPositionRecord(position: StreamPosition(lastSequence: 6, endSampleTime: 2_891), packets: 2_891)
        let second = body.take(packetsBefore: 2_880, position: secondPosition)
        let expected = ReceiverLogRecord.round(LoggedRound(
            packetsBefore: 2_880, position: secondPosition,
            operations: [.audio(payload: [1, 2], packetSizes: [], frameCount: 1), .silence(frames: 10)]))
        XCTAssertEqual(second, expected.encoded(subject: 1).body)
        XCTAssertEqual(ReceiverLogRecord(CommitLogRecord(kind: ReceiverLogRecord.roundKind, subject: 1, body: second)), expected)

        let empty = body.take(packetsBefore: 2_891, position: secondPosition)
        XCTAssertEqual(empty, [0, 0, 0, 0, 0, 0, 0x0B, 0x4B] + [0, 0, 0, 0, 0, 0, 0, 6] + [0, 0, 0, 0, 0, 0, 0x0B, 0x4B] + [0, 0, 0, 0, 0, 0, 0x0B, 0x4B] + [0, 0, 0, 0])
    }

    func testBodiesThatAreNotTheReceiversAreRefused() {
        let good = ReceiverLogRecord.round(LoggedRound(
            packetsBefore: 0, position: StreamPositionRecord(position: StreamPosition(lastSequence: 1, endSampleTime: 2), packets: 2),
            operations: [.audio(payload: [1, 2, 3, 4], packetSizes: [], frameCount: 2)])).encoded(subject: 1)
        let cases: [(String, CommitLogRecord)] = [
            ("unknown kind", CommitLogRecord(kind: 9, subject: 1, body: good.body)),
            ("round cut short", CommitLogRecord(kind: 2, subject: 1, body: Array(good.body.dropLast()))),
            ("round with bytes after its operations", CommitLogRecord(kind: 2, subject: 1, body: good.body + [0])),
            ("unknown operation", CommitLogRecord(kind: 2, subject: 1, body: Array(good.body.prefix(36)) + [0x58])),
            ("fewer packets after than before", CommitLogRecord(kind: 2, subject: 1, body: [0, 0, 0, 0, 0, 0, 0, 9] + Array(good.body.dropFirst(8)))),
            ("file without a path", CommitLogRecord(kind: 1, subject: 1, body: Array(Self.stream.wireBytes))),
            ("file with a short id", CommitLogRecord(kind: 1, subject: 1, body: [1, 2, 3])),
            ("file path not UTF-8", CommitLogRecord(kind: 1, subject: 1, body: Array(Self.stream.wireBytes) + [0xFF, 0xFE])),
        ]
        for (name, record) in cases {
            XCTAssertNil(ReceiverLogRecord(record), name)
        }
    }
}
