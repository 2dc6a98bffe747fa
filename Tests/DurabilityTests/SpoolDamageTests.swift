import CaptureWire
import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// Issue 27, items 4 and 9: what a restarted sender makes of a damaged spool. A record whose bytes
/// are damaged costs its own frames, which become `spool-damaged` gaps at their exact place; the
/// records after it are found again and delivered; a `meta.json` whose values no stream can have is
/// refused with the file and the field named. The spool's bytes are written and flipped here
/// independently of the sender's code (docs/DURABILITY.md has the layout).
final class SpoolDamageTests: XCTestCase {
    private var root: String!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("spool-damage-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    // MARK: - Helpers

    private func folder(_ id: UUID) -> String { (root as NSString).appendingPathComponent(id.uuidString.lowercased()) }
    private func kept(_ id: UUID) -> String { folder(id) + ".damaged" }
    private func segmentPath(_ id: UUID, first: UInt64 = 1) -> String { folder(id) + String(format: "/seg-%020llu.spool", first) }

    /// A stream of `count` audio entries of 480 frames (distinct bytes), spooled, optionally ended;
    /// the process "dies" (the spool is released without removal). Returns the entries written.
    @discardableResult
    private func spoolStream(_ id: UUID, count: Int, end: Bool = true, acknowledged: UInt64 = 0) throws -> [LoggedPacket] {
        let spool = try StreamSpool.create(root: root, meta: SpoolFixtures.meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        var written: [LoggedPacket] = []
        for index in 0..<count {
            let packets = SpoolFixtures.packets(first: Int64(index * 480), frames: 480)
            written.append(LoggedPacket(sequence: log.append(packets), content: .audio(packets)))
        }
        if end { log.finish(endSampleTime: Int64(count * 480), remainderFrames: 0, reason: "end-of-file") }
        if acknowledged > 0 { log.acknowledge(through: acknowledged) }
        log.flushSpool()
        spool.release()
        return written
    }

    /// Offsets and sizes of the records of a segment, read from the bytes as documented.
    private static func records(_ bytes: [UInt8]) -> [(offset: Int, size: Int)] {
        var result: [(Int, Int)] = []
        var offset = 0
        while offset + 12 <= bytes.count {
            let length = Int(bytes[offset..<(offset + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            guard offset + 12 + length <= bytes.count, length > 0 else { break }
            result.append((offset, 12 + length))
            offset += 12 + length
        }
        return result
    }

    /// Flips bit `mask` of the byte `at` bytes into record `index` of a segment; returns that record.
    @discardableResult
    private func flip(record index: Int, at: Int, mask: UInt8 = 0x10, of id: UUID, first: UInt64 = 1) throws -> (offset: Int, size: Int) {
        let path = segmentPath(id, first: first)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let record = Self.records(bytes)[index]
        bytes[record.offset + at] ^= mask
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return record
    }

    private func recovered(_ id: UUID) throws -> PacketLog {
        guard case .claimed(let spool) = try StreamSpool.claim(directory: folder(id)) else { throw SpoolError("not claimed") }
        return try PacketLog(recovering: spool)
    }

    private func damagedGap(_ sequence: UInt64, at sampleTime: Int64, length: Int64, id: UUID) -> LoggedPacket {
        LoggedPacket(sequence: sequence, content: .gap(
            sampleTime: sampleTime, length: length,
            reason: "spool-damaged: the sender's spool could not read these frames back; the damaged bytes are kept in \(kept(id))"))
    }

    // MARK: - Damaged records

    func testABitFlippedInTheFirstRecordCostsThatRecordAsAGapAndEveryOtherIsDelivered() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 10)
        try flip(record: 0, at: 12 + 29 + 100, of: id)
        let log = try recovered(id)
        XCTAssertTrue(log.holdsCapturedAudio, "a damaged first record is not an empty stream")
        XCTAssertEqual(log.oldestKeptSequence, 1)
        XCTAssertEqual(log.lastSequence, 10)
        XCTAssertEqual(try log.entries(from: 1, maxCount: 20), [damagedGap(1, at: 0, length: 480, id: id)] + Array(written[1...]))
        XCTAssertEqual(log.streamEnd, StreamEnd(position: StreamPosition(lastSequence: log.lastSequence, endSampleTime: 4_800), remainderFrames: 0, reason: "end-of-file"))
    }

    func testABitFlippedInTheMiddleCostsOnlyItsRecordAndTheRecordsAfterItAreFoundAgain() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 10)
        // One in the payload, one in the length field (the record then claims another size).
        try flip(record: 4, at: 12 + 29 + 7, of: id)
        try flip(record: 7, at: 2, mask: 0x01, of: id)
        let log = try recovered(id)
        XCTAssertEqual(log.lastSequence, 10)
        XCTAssertEqual(try log.entries(from: 1, maxCount: 20),
                       Array(written[0..<4]) + [damagedGap(5, at: 1_920, length: 480, id: id)] + Array(written[5..<7])
                       + [damagedGap(8, at: 3_360, length: 480, id: id)] + Array(written[8...]))
        XCTAssertEqual(log.streamEnd?.position.endSampleTime, 4_800)
    }

    func testADamagedLastRecordBeforeTheEndIsAGapUpToTheEnd() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 6)
        try flip(record: 5, at: 12 + 1, of: id)  // its sequence number
        let log = try recovered(id)
        XCTAssertEqual(try log.entries(from: 1, maxCount: 20), Array(written[0..<5]) + [damagedGap(6, at: 2_400, length: 480, id: id)])
        XCTAssertEqual(log.streamEnd, StreamEnd(position: StreamPosition(lastSequence: log.lastSequence, endSampleTime: 2_880), remainderFrames: 0, reason: "end-of-file"))
    }

    func testSeveralRecordsLostTogetherShareTheirSpanOneGapEach() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 8)
        let path = segmentPath(id)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let records = Self.records(bytes)
        // A block of zeros over records 3 to 5 (sequences 3, 4, 5) and into 6's header.
        for index in records[2].offset..<(records[5].offset + 4) { bytes[index] = 0 }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let log = try recovered(id)
        XCTAssertEqual(try log.entries(from: 1, maxCount: 20),
                       Array(written[0..<2]) + [damagedGap(3, at: 960, length: 480, id: id), damagedGap(4, at: 1_440, length: 480, id: id),
                                               damagedGap(5, at: 1_920, length: 480, id: id), damagedGap(6, at: 2_400, length: 480, id: id)]
                       + Array(written[6...]))
    }

    // MARK: - Damaged meta.json

    /// Every field of a `meta.json` is checked when it is read: a value no stream can have is an
    /// error naming the file and the field, never a trap further on.
    func testAMetaWithAnImpossibleValueIsRefusedNamingTheFileAndTheField() throws {
        let id = UUID()
        try spoolStream(id, count: 2)
        let metaPath = folder(id) + "/meta.json"
        let genuine = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: metaPath))) as? [String: Any])
        let cases: [(field: String, value: Any?, reason: String)] = [
            ("sampleRate", 0, "sampleRate 0 is not a sample rate capture-send records (8000 to 192000 Hz)"),
            ("sampleRate", 1e300, "sampleRate 1e+300 is not a sample rate capture-send records (8000 to 192000 Hz)"),
            ("startTime", 1e300, "startTime 1e+300 is not a time from 1970 to 2100 (seconds since 1970)"),
            ("startTime", -1e300, "startTime -1e+300 is not a time from 1970 to 2100 (seconds since 1970)"),
            ("startTime", -1, "startTime -1 is not a time from 1970 to 2100 (seconds since 1970)"),
            ("channelsPerFrame", 0, "channelsPerFrame 0 is not a channel count from 1 to 8"),
            ("primingFrames", -1, "primingFrames -1 is not possible for linear PCM (it has none)"),
            ("primingFrames", 1_000_000_000_000_000_000, "primingFrames 1000000000000000000 is not possible for linear PCM (it has none)"),
            ("bitsPerChannel", 12, "the format fields (formatID, formatFlags, bitsPerChannel, bytesPerFrame, bytesPerPacket, framesPerPacket) are not a format capture-send sends: linear PCM with 12 bits and flags 0xc is not supported: use s16, s24, s32 or f32, interleaved, little-endian"),
            ("resumeSecret", [1, 2, 3], "resumeSecret holds 3 bytes; a resume secret is 16 to 64 bytes"),
            ("magicCookie", [1], "magicCookie holds 1 bytes; linear PCM has none"),
            ("primingFrames", "many", "primingFrames holds a value of the wrong type"),
            ("sampleRate", nil, "sampleRate is missing"),
        ]
        for damage in cases {
            var meta = genuine
            meta[damage.field] = damage.value
            try JSONSerialization.data(withJSONObject: meta).write(to: URL(fileURLWithPath: metaPath))
            XCTAssertThrowsError(try StreamSpool.claim(directory: folder(id)), "\(damage.field) = \(String(describing: damage.value))") { error in
                XCTAssertEqual("\(error)", "spool: \(metaPath): \(damage.reason); the stream is left in the spool as it is")
            }
        }
    }
}
