import CaptureWire
import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// The recovery scan's rules past the two cases of issue 27 item 4: damage at the end of a killed
/// stream, damage in audio the receiver already has or across its acknowledged position, the
/// `acked` file of this version and of the one before, damaged bytes kept beside the spool, a
/// stream with nothing readable left, Opus, and values no stream can hold (damage, never a trap).
final class SpoolRecoveryTests: XCTestCase {
    private var root: String!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("spool-recovery-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func folder(_ id: UUID) -> String { (root as NSString).appendingPathComponent(id.uuidString.lowercased()) }
    private func kept(_ id: UUID) -> String { folder(id) + ".damaged" }
    private func segmentPath(_ id: UUID) -> String { folder(id) + "/seg-00000000000000000001.spool" }
    private var reason: (UUID) -> String {
        { "spool-damaged: the sender's spool could not read these frames back; the damaged bytes are kept in \(self.kept($0))" }
    }

    @discardableResult
    private func spoolStream(_ id: UUID, count: Int, end: Bool = true, acknowledged: UInt64 = 0, meta: SpoolMeta? = nil,
                             packets: (Int) -> EncodedPackets = { SpoolFixtures.packets(first: Int64($0 * 480), frames: 480) }) throws -> [LoggedPacket] {
        let spool = try StreamSpool.create(root: root, meta: meta ?? SpoolFixtures.meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        var written: [LoggedPacket] = []
        for index in 0..<count {
            let content = packets(index)
            written.append(LoggedPacket(sequence: log.append(content), content: .audio(content)))
        }
        if end { log.finish(endSampleTime: written.last?.endSampleTime ?? 0, remainderFrames: 0, reason: "end-of-file") }
        if acknowledged > 0 { log.acknowledge(through: acknowledged) }
        log.flushSpool()
        spool.release()
        return written
    }

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

    private func segmentBytes(_ id: UUID) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: segmentPath(id)))) }

    private func damage(_ id: UUID, records: ClosedRange<Int>) throws {
        var bytes = try segmentBytes(id)
        let all = Self.records(bytes)
        for index in all[records.lowerBound].offset..<(all[records.upperBound].offset + all[records.upperBound].size) { bytes[index] ^= 0x5A }
        try Data(bytes).write(to: URL(fileURLWithPath: segmentPath(id)))
    }

    private func claimed(_ id: UUID) throws -> StreamSpool {
        guard case .claimed(let spool) = try StreamSpool.claim(directory: folder(id)) else { throw SpoolError("not claimed") }
        return spool
    }

    // MARK: - Where the damage is

    func testDamageAtTheEndOfAKilledStreamCostsFromWhereItBeginsToTheEnd() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 10, end: false)
        var bytes = try segmentBytes(id)
        bytes[Self.records(bytes)[9].offset + 12 + 29 + 5] ^= 0x04  // one bit of its payload
        try Data(bytes).write(to: URL(fileURLWithPath: segmentPath(id)))
        let spool = try claimed(id)
        let contents = try spool.contents()
        XCTAssertEqual(contents.entries.map(\.sequence), Array(1...9))
        XCTAssertEqual(contents.damage, [SpoolDamage(
            regions: [SpoolDamage.Region(segment: 1, offset: Self.records(try segmentBytes(id))[9].offset, length: written[9].byteCount + 41)],
            cost: .tail(from: 4_320, sequence: 10))])
        XCTAssertEqual(spool.damageReport?.state, "damaged: seconds from 0.090 to the end lost")
        let log = try PacketLog(recovering: spool)
        XCTAssertEqual(log.streamEnd, StreamEnd(position: StreamPosition(lastSequence: log.lastSequence, endSampleTime: 4_320), remainderFrames: 0, reason: "sender-restarted"))
        spool.release()
    }

    func testARecordTornByACrashIsNotDamage() throws {
        let id = UUID()
        try spoolStream(id, count: 3, end: false)
        // A record cut short: its header says more bytes than the file holds.
        var bytes = try segmentBytes(id)
        bytes.removeLast(100)
        try Data(bytes).write(to: URL(fileURLWithPath: segmentPath(id)))
        let contents = try claimed(id).contents()
        XCTAssertEqual(contents.entries.map(\.sequence), [1, 2])
        XCTAssertEqual(contents.damage, [])
    }

    func testADamagedEndRecordCostsNoAudio() throws {
        let id = UUID()
        try spoolStream(id, count: 4)
        var bytes = try segmentBytes(id)
        bytes[bytes.count - 3] ^= 1  // in the end record's reason
        try Data(bytes).write(to: URL(fileURLWithPath: segmentPath(id)))
        let spool = try claimed(id)
        let contents = try spool.contents()
        XCTAssertEqual(contents.entries.map(\.sequence), [1, 2, 3, 4])
        XCTAssertEqual(contents.damage.map(\.cost), [.endRecord])
        XCTAssertNil(contents.end)
        XCTAssertEqual(spool.damageReport?.state, "damaged: no audio lost")
        XCTAssertEqual(spool.damageReport?.delivered(streamName: "test", receiver: "r:1"),
                       "the spool of stream test was damaged in only the record of its end, so no audio was lost; it was delivered to r:1; no damaged bytes were kept")
        spool.release()
    }

    // MARK: - What the receiver already has

    func testTheAckedFileRecordsTheReceiversPositionInSequenceAndSamples() throws {
        let id = UUID()
        try spoolStream(id, count: 6, acknowledged: 4)
        let acked = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder(id) + "/acked")))
        XCTAssertEqual(acked, [0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0x07, 0x80], "sequence 4, sample 1920, big-endian")
        XCTAssertEqual(SpoolAckedRecord.decode(acked), SpoolAckedRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 1_920)))
    }

    func testDamageTheReceiverAlreadyHasCostsNothing() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 8, acknowledged: 5)
        try damage(id, records: 2...2)
        let spool = try claimed(id)
        let log = try PacketLog(recovering: spool)
        XCTAssertEqual(spool.damageReport?.damage.map(\.cost), [.nothing])
        XCTAssertEqual(try log.entries(from: 6, maxCount: 10), Array(written[5...]))
        spool.release()
    }

    func testDamageAcrossTheAcknowledgedPositionStartsWhereTheReceiverStands() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 8, acknowledged: 4)
        try damage(id, records: 2...5)  // sequences 3 to 6; the receiver has 1 to 4
        let spool = try claimed(id)
        let log = try PacketLog(recovering: spool)
        XCTAssertEqual(spool.damageReport?.damage.map(\.cost), [.frames(1_920..<2_880, sequences: 5...6)])
        XCTAssertEqual(try log.entries(from: 5, maxCount: 10), [
            LoggedPacket(sequence: 5, content: .gap(sampleTime: 1_920, length: 480, reason: reason(id))),
            LoggedPacket(sequence: 6, content: .gap(sampleTime: 2_400, length: 480, reason: reason(id))),
        ] + Array(written[6...]))
        spool.release()
    }

    /// Migration: an `acked` file of the version before this one holds the sequence only (8
    /// bytes). It still says where delivery resumes; only damage across it cannot be placed, and
    /// such a stream is kept, not delivered with a wrong timeline.
    func testAnAckedFileOfTheVersionBeforeStillReads() throws {
        let id = UUID()
        let written = try spoolStream(id, count: 8, acknowledged: 4)
        let acked = URL(fileURLWithPath: folder(id) + "/acked")
        try Data([0, 0, 0, 0, 0, 0, 0, 4]).write(to: acked)
        let log = try PacketLog(recovering: try claimed(id))
        XCTAssertEqual(log.oldestKeptSequence, 5)
        XCTAssertEqual(try log.entries(from: 5, maxCount: 10), Array(written[4...]))
        log.spool?.release()

        try damage(id, records: 2...5)
        guard case .undeliverable(_, let report) = try SpooledStreams.claim(directory: folder(id)) else { return XCTFail("not delivered") }
        XCTAssertEqual(report.state, "damaged: cannot be delivered (the spool does not record where the damaged records began: its acked file is from an older version)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: segmentPath(id)), "kept in the spool")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: kept(id)).count, 1, "its damaged bytes are kept too")
    }

    /// Fuzz finding (Fuzz/regressions/spool/undeliverable-entries-skip-a-sequence): past damage
    /// that cannot be placed, the entries after it were still listed to deliver, with a hole in
    /// their sequences. An undeliverable stream lists only what comes before that damage.
    func testAnUndeliverableStreamListsNothingPastTheDamage() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: SpoolFixtures.meta(id))
        // Entry 4 begins where 2 ends: whatever 3 held, no frame is left for it.
        for (sequence, first) in [(1, 0), (2, 480), (3, 960), (4, 960), (5, 1_440)] as [(UInt64, Int64)] {
            _ = try spool.append(LoggedPacket(sequence: sequence, content: .audio(SpoolFixtures.packets(first: first, frames: 480))))
        }
        spool.release()
        var bytes = try segmentBytes(id)
        bytes[Self.records(bytes)[2].offset + 100] ^= 1
        try Data(bytes).write(to: URL(fileURLWithPath: segmentPath(id)))
        let contents = try claimed(id).contents()
        // A record of no frames is a marker's: the damaged one is delivered as a marker that says
        // it was lost, and the sequences run on without a hole.
        XCTAssertNil(contents.undeliverable)
        XCTAssertEqual(contents.entries.map(\.sequence), [1, 2, 3, 4, 5])
        XCTAssertEqual(contents.entries[2].replacement?.content, .marker(sampleTime: 960, label: SpoolDamageFill.lostMarkerLabel))
    }

    // MARK: - Keeping the damaged bytes

    func testClaimingADamagedStreamKeepsItsDamagedBytesBesideTheSpool() throws {
        let id = UUID()
        try spoolStream(id, count: 6)
        let original = try segmentBytes(id)
        try damage(id, records: 4...4)  // the later first: the helper finds records by reading from the start
        try damage(id, records: 1...1)
        let damaged = try segmentBytes(id)
        let records = Self.records(original)
        guard case .ready(let spool, let log) = try SpooledStreams.claim(directory: folder(id)) else { return XCTFail("ready") }
        XCTAssertEqual(spool.damageReport?.keptIn, kept(id))
        XCTAssertEqual(spool.damageReport?.state, "damaged: seconds 0.010-0.020, 0.040-0.050 lost")
        let names = try FileManager.default.contentsOfDirectory(atPath: kept(id)).sorted()
        XCTAssertEqual(names, ["seg-00000000000000000001-at-\(records[1].offset).bytes", "seg-00000000000000000001-at-\(records[4].offset).bytes"])
        for (name, record) in zip(names, [records[1], records[4]]) {
            XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: kept(id) + "/" + name))), Array(damaged[record.offset..<(record.offset + record.size)]),
                           "the damaged bytes as they are on disk")
        }
        log.removeSpool()
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder(id)), "the delivered stream leaves the spool")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: kept(id)).count, 2, "its damaged bytes stay")
    }

    func testAStreamWhoseOnlyRecordIsDamagedIsKeptAndListedNeverTakenForEmpty() throws {
        let id = UUID()
        try spoolStream(id, count: 1, end: false)
        try damage(id, records: 0...0)
        let listed = try XCTUnwrap(SpooledStreams.list(root: root).first)
        XCTAssertTrue(listed.holdsCapturedAudio)
        XCTAssertEqual(listed.damage, "damaged: cannot be delivered (none of its audio reads back)")
        guard case .undeliverable = try SpooledStreams.claim(directory: folder(id)) else { return XCTFail("not removed as empty") }
        XCTAssertTrue(FileManager.default.fileExists(atPath: segmentPath(id)))
    }

    // MARK: - Opus

    func testOpusDamageBecomesSilencePacketsOfTheStreamsPacketDuration() throws {
        let id = UUID()
        let format = StreamFormat.opus(channels: 2, framesPerPacket: 960)
        let meta = SpoolMeta(streamID: id, streamName: "opus", destination: SpoolDestination(address: "127.0.0.1:7373"), description: StreamDescription(
            format: format, magicCookie: [], primingFrames: 312, startTime: Date(timeIntervalSince1970: 1_800_000_000)), resumeSecret: Array(repeating: 1, count: 32))
        // Three packets of 960 frames per entry.
        let written = try spoolStream(id, count: 5, meta: meta) { index in
            EncodedPackets(payload: [UInt8](repeating: UInt8(index), count: 30), packetCount: 3, packetSizes: [10, 10, 10],
                           firstSampleTime: Int64(index * 2_880), frameCount: 2_880)
        }
        try damage(id, records: 2...2)
        let spool = try claimed(id)
        let log = try PacketLog(recovering: spool)
        let entries = try log.entries(from: 1, maxCount: 10)
        XCTAssertEqual(Array(entries[0..<2]), Array(written[0..<2]))
        XCTAssertEqual(Array(entries[3...]), Array(written[3...]))
        guard case .audio(let silence) = entries[2].content else { return XCTFail("silence, not a gap: an Opus stream cannot skip time") }
        XCTAssertEqual(silence.firstSampleTime, 5_760)
        XCTAssertEqual(silence.frameCount, 2_880)
        XCTAssertEqual(silence.packetCount, 3)
        let packet = try XCTUnwrap(SpoolDamageFill.silentOpusPacket(channels: 2, framesPerPacket: 960))
        XCTAssertEqual(silence.packetSizes, [UInt32](repeating: UInt32(packet.count), count: 3))
        XCTAssertEqual(silence.payload, packet + packet + packet)
        spool.release()
    }

    // MARK: - Values no stream holds

    /// A record with a good checksum whose values no stream reaches (crafted, or damage the
    /// checksum missed) and an `acked` file beyond any sequence used to trap in the arithmetic of
    /// reading back (sequence + 1, first sample + frames); they are damage now.
    func testRecordsAndAnAckedFileWithImpossibleValuesAreDamageNotATrap() throws {
        let id = UUID()
        try spoolStream(id, count: 3, end: false)
        func record(_ body: [UInt8]) -> [UInt8] {
            var framed: [UInt8] = []
            framed += withUnsafeBytes(of: UInt32(body.count).bigEndian) { Array($0) }
            framed += withUnsafeBytes(of: RecordChecksum.of(body).bigEndian) { Array($0) }
            return framed + body
        }
        func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        let bytes = try segmentBytes(id)
        let beyondTimeline = record([0x41] + be(UInt64(4)) + be(Int64.max - 10) + be(UInt32(480)) + be(UInt32(480)) + be(UInt32(0)) + [UInt8](repeating: 1, count: 1_920))
        let lastSequence = record([0x47] + be(UInt64.max) + be(Int64(1_440)) + be(Int64(10)) + Array("overrun".utf8))
        try Data(bytes + beyondTimeline + lastSequence).write(to: URL(fileURLWithPath: segmentPath(id)))
        try Data(be(UInt64.max)).write(to: URL(fileURLWithPath: folder(id) + "/acked"))
        let spool = try claimed(id)
        let log = try PacketLog(recovering: spool)
        XCTAssertEqual(log.oldestKeptSequence, 1, "an acked file beyond any sequence is ignored")
        XCTAssertEqual(log.lastSequence, 3)
        XCTAssertEqual(spool.damageReport?.damage.map(\.cost), [.tail(from: 1_440, sequence: 4)])
        spool.release()
    }

    /// A segment named after the last sequence there is (its records would count past it) is not
    /// read: sequences above 2^62 are damage.
    func testASegmentNamedBeyondEverySequenceIsNotRead() throws {
        let id = UUID()
        try spoolStream(id, count: 2, end: false)
        // Its record carries the sequence its name says: reading on from it used to overflow.
        let body: [UInt8] = [0x47] + withUnsafeBytes(of: UInt64.max.bigEndian) { Array($0) } + withUnsafeBytes(of: Int64(960).bigEndian) { Array($0) }
            + withUnsafeBytes(of: Int64(10).bigEndian) { Array($0) }
        let record = withUnsafeBytes(of: UInt32(body.count).bigEndian) { Array($0) } + withUnsafeBytes(of: RecordChecksum.of(body).bigEndian) { Array($0) } + body
        try Data(record).write(to: URL(fileURLWithPath: folder(id) + "/seg-18446744073709551615.spool"))
        let contents = try claimed(id).contents()
        XCTAssertEqual(contents.entries.map(\.sequence), [1, 2])
        XCTAssertEqual(contents.damage, [])
    }
}
