import CaptureWire
import CAF
import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// The sender's packet log with its disk spool: what a restarted sender reads back, memory
/// eviction, segment deletion on acknowledgement, and the overflow policy when the log is full.
final class SpoolTests: XCTestCase {
    private var root: String!
    private let format = SpoolFixtures.format

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func meta(_ id: UUID = UUID()) -> SpoolMeta { SpoolFixtures.meta(id) }

    private func packets(first: Int64, frames: Int) -> EncodedPackets { SpoolFixtures.packets(first: first, frames: frames) }

    func testARestartedSenderReadsBackEveryUnacknowledgedEntryAndEndsTheStream() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        var written: [LoggedPacket] = []
        for index in 0..<10 {
            let sequence = log.append(packets(first: Int64(index * 480), frames: 480))
            written.append(LoggedPacket(sequence: sequence, content: .audio(packets(first: Int64(index * 480), frames: 480))))
        }
        log.appendGap(sampleTime: 4_800, length: 100, reason: "overrun")
        log.acknowledge(through: 3)
        log.flushSpool()
        // The process dies here: nothing is closed. A new process opens the folder.
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        XCTAssertNil(try Self.claimed(directory), "a folder locked by a live sender is not taken")
        spool.release()
        let reopened = try XCTUnwrap(try Self.claimed(directory))
        XCTAssertEqual(reopened.meta, meta(id))
        let recovered = try PacketLog(recovering: reopened)
        XCTAssertEqual(recovered.oldestKeptSequence, 4)
        XCTAssertEqual(recovered.lastSequence, 11)
        let entries = try recovered.entries(from: 4, maxCount: 100)
        XCTAssertEqual(Array(entries.prefix(7)), Array(written[3...]))
        XCTAssertEqual(entries.last, LoggedPacket(sequence: 11, content: .gap(sampleTime: 4_800, length: 100, reason: "overrun")))
        XCTAssertEqual(recovered.streamEnd, StreamEnd(position: StreamPosition(lastSequence: recovered.lastSequence, endSampleTime: 4_900), remainderFrames: 0, reason: "sender-restarted"))
    }

    /// Markers take their sequence in the log where the timeline stands when they are dropped (just
    /// past the last entry), go through the spool with their labels, and read back in their place;
    /// once the stream ended, no marker is taken.
    func testMarkersTakeTheirPlaceInTheLogAndReadBackFromTheSpool() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        XCTAssertEqual(log.appendMarker(label: "before any audio"), 1)
        log.append(packets(first: 0, frames: 480))
        XCTAssertEqual(log.appendMarker(label: ""), 3)
        log.appendGap(sampleTime: 480, length: 100, reason: "paused")
        XCTAssertEqual(log.appendMarker(label: "Überlauf ✓"), 5)
        log.append(packets(first: 580, frames: 480))
        log.finish(endSampleTime: 1_060, remainderFrames: 0, reason: "duration")
        XCTAssertEqual(log.appendMarker(label: "too late"), 0)
        log.flushSpool()
        spool.release()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let recovered = try PacketLog(recovering: try XCTUnwrap(try Self.claimed(directory)))
        let entries = try recovered.entries(from: 1, maxCount: 100)
        XCTAssertEqual(entries.map(\.content), [
            .marker(sampleTime: 0, label: "before any audio"),
            .audio(packets(first: 0, frames: 480)),
            .marker(sampleTime: 480, label: ""),
            .gap(sampleTime: 480, length: 100, reason: "paused"),
            .marker(sampleTime: 580, label: "Überlauf ✓"),
            .audio(packets(first: 580, frames: 480)),
        ])
        XCTAssertEqual(entries.map(\.sequence), Array(1...6))
        XCTAssertEqual(recovered.streamEnd?.position.endSampleTime, 1_060)
    }

    /// Filled gaps take their sequence where the timeline stands (not before the packets reach their
    /// start), go through the spool with their stretch and reason, and read back in their place;
    /// nothing is taken during an overflow or once the stream ended.
    func testFilledGapsStandWhereTheTimelineStandsAndReadBackFromTheSpool() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        log.append(packets(first: 0, frames: 480))
        XCTAssertEqual(log.appendFilledGap(sampleTime: 481, length: 10, reason: "paused"), 0, "the packets do not reach it yet")
        XCTAssertEqual(log.appendFilledGap(sampleTime: 300, length: 500, reason: "paused"), 2)
        log.append(packets(first: 480, frames: 480))
        XCTAssertEqual(log.appendFilledGap(sampleTime: 960, length: 1, reason: "overrun ✓"), 4)
        log.finish(endSampleTime: 960, remainderFrames: 0, reason: "duration")
        XCTAssertEqual(log.appendFilledGap(sampleTime: 900, length: 1, reason: "too late"), 0)
        log.flushSpool()
        spool.release()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let recovered = try PacketLog(recovering: try XCTUnwrap(try Self.claimed(directory)))
        let entries = try recovered.entries(from: 1, maxCount: 100)
        XCTAssertEqual(entries.map(\.content), [
            .audio(packets(first: 0, frames: 480)),
            .filledGap(position: 480, sampleTime: 300, length: 500, reason: "paused"),
            .audio(packets(first: 480, frames: 480)),
            .filledGap(position: 960, sampleTime: 960, length: 1, reason: "overrun ✓"),
        ])
        XCTAssertEqual(entries.map(\.sequence), Array(1...4))
        XCTAssertEqual(entries[1].firstSampleTime, 480, "a filled gap stands on the timeline where it was logged")
        XCTAssertEqual(entries[1].endSampleTime, 480)
        XCTAssertEqual(recovered.streamEnd?.position.endSampleTime, 960)
    }

    /// FNV-1a's constants over little-endian 64-bit words, then the last 0-7 bytes one by one, written
    /// out here from docs/DURABILITY.md rather than taken from the code under test.
    private func documentedChecksum(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var index = 0
        while index + 8 <= bytes.count {
            var word: UInt64 = 0
            for byte in (0..<8).reversed() { word = word << 8 | UInt64(bytes[index + byte]) }
            hash = (hash ^ word) &* 0x0000_0100_0000_01B3
            index += 8
        }
        for byte in bytes[index...] { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    private func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    /// Issue 19, item 2: once a stream is delivered as a new stream that continues it, the spool
    /// says so, so that a restarted sender carries on as the new stream (not the one the receiver
    /// no longer resumes).
    func testASpooledStreamRemembersTheStreamItContinuesAs() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        _ = log.append(packets(first: 0, frames: 480))
        log.flushSpool()
        let continuation = StreamContinuation(streamID: UUID(), continues: id, firstSequence: 1, firstSampleTime: 0)
        try spool.recordContinuation(continuation)
        spool.release()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let reopened = try XCTUnwrap(try Self.claimed(directory))
        XCTAssertEqual(reopened.meta.continuation, continuation)
        XCTAssertEqual(reopened.meta.resumeSecret, meta(id).resumeSecret, "the same resume secret goes with it")
        XCTAssertEqual(reopened.meta.streamID, id, "the spool folder keeps its name")
        reopened.release()
    }

    func testSegmentsHoldTheDocumentedRecordLayoutByteForByte() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        // 123 payload bytes and 2 sizes: the body is not a whole number of 8-byte words.
        let vbr = EncodedPackets(payload: (0..<123).map { UInt8(truncatingIfNeeded: $0 * 31 + 5) }, packetCount: 2,
                                 packetSizes: [60, 63], firstSampleTime: 960, frameCount: 1_920)
        log.append(vbr)
        log.appendGap(sampleTime: 2_880, length: 480, reason: "overrun")
        log.finish(endSampleTime: 3_360, remainderFrames: 7, reason: "duration")
        log.flushSpool()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: (directory as NSString).appendingPathComponent("seg-00000000000000000001.spool"))))

        func record(_ body: [UInt8]) -> [UInt8] { bigEndian(UInt32(body.count)) + bigEndian(documentedChecksum(body)) + body }
        let audio: [UInt8] = [0x41] + bigEndian(UInt64(1)) + bigEndian(Int64(960)) + bigEndian(UInt32(1_920)) + bigEndian(UInt32(2))
            + bigEndian(UInt32(2)) + bigEndian(UInt32(60)) + bigEndian(UInt32(63)) + vbr.payload
        let gap: [UInt8] = [0x47] + bigEndian(UInt64(2)) + bigEndian(Int64(2_880)) + bigEndian(Int64(480)) + Array("overrun".utf8)
        let end: [UInt8] = [0x45] + bigEndian(UInt64(2)) + bigEndian(Int64(3_360)) + bigEndian(UInt32(7)) + Array("duration".utf8)
        XCTAssertEqual(written, record(audio) + record(gap) + record(end))
        spool.release()
    }

    func testTheChecksumOfPiecesIsTheChecksumOfTheWhole() {
        let bytes = (0..<37).map { UInt8(truncatingIfNeeded: $0 * 97 + 13) }
        let whole = RecordChecksum.of(bytes)
        XCTAssertEqual(whole, documentedChecksum(bytes))
        XCTAssertEqual(RecordChecksum.of([UInt8]()), 0xcbf2_9ce4_8422_2325, "nothing hashed: the offset basis")
        for split in 0...bytes.count {
            for second in split...bytes.count {
                var running = RecordChecksum.Running()
                running.add(Array(bytes[..<split]))
                running.add(Array(bytes[split..<second]))
                running.add(Array(bytes[second...]))
                XCTAssertEqual(running.value, whole, "pieces split at \(split) and \(second)")
            }
        }
    }

    func testATornRecordAtTheEndIsIgnored() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        for index in 0..<3 { log.append(packets(first: Int64(index * 480), frames: 480)) }
        log.flushSpool()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let segment = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasPrefix("seg-") })
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: (directory as NSString).appendingPathComponent(segment)))
        handle.seekToEndOfFile()
        handle.write(Data([0, 0, 1, 0, 1, 2, 3]))
        try handle.close()
        spool.release()
        let recovered = try PacketLog(recovering: try XCTUnwrap(try Self.claimed(directory)))
        XCTAssertEqual(recovered.lastSequence, 3)
        XCTAssertEqual(recovered.streamEnd?.position.endSampleTime, 1_440)
    }

    func testEntriesBeyondTheMemoryLimitAreReadBackFromTheSpool() throws {
        let spool = try StreamSpool.create(root: root, meta: meta())
        let log = PacketLog(memoryLimit: 10_000, producerIsRealTime: true, spool: spool)
        var expected: [LoggedPacket] = []
        for index in 0..<20 {
            let content = packets(first: Int64(index * 1_000), frames: 1_000)
            expected.append(LoggedPacket(sequence: log.append(content), content: .audio(content)))
        }
        log.flushSpool()
        XCTAssertLessThanOrEqual(log.memoryBytesHeld, 10_000 + 4_000, "memory stays near the limit")
        XCTAssertEqual(log.unacknowledgedBytes, 80_000)
        XCTAssertEqual(try log.entries(from: 1, maxCount: 100), expected, "every entry comes back exactly, from memory or disk")
    }

    func testSentEntriesLeaveMemoryOnceSpooledAndAreReadBackForAResend() throws {
        let spool = try StreamSpool.create(root: root, meta: meta())
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        var expected: [LoggedPacket] = []
        for index in 0..<5 {
            let content = packets(first: Int64(index * 1_000), frames: 1_000)
            expected.append(LoggedPacket(sequence: log.append(content), content: .audio(content)))
        }
        log.flushSpool()
        XCTAssertEqual(log.memoryBytesHeld, 20_000, "under the memory limit, every entry stays in memory")
        log.markSent(through: 3)
        XCTAssertEqual(log.memoryBytesHeld, 8_000, "sent and spooled entries 1-3 left memory; 4 and 5 stay")
        XCTAssertEqual(log.unacknowledgedBytes, 20_000, "nothing is released before the receiver acknowledges it")
        // Sent before its spool write: it leaves memory when the write is done.
        let late = packets(first: 5_000, frames: 1_000)
        expected.append(LoggedPacket(sequence: log.append(late), content: .audio(late)))
        log.markSent(through: 6)
        log.flushSpool()
        XCTAssertEqual(log.memoryBytesHeld, 0)
        XCTAssertEqual(try log.entries(from: 1, maxCount: 10), expected, "a resend reads every entry back exactly")
        log.acknowledge(through: 6)
        XCTAssertEqual(log.unacknowledgedBytes, 0)

        let memoryOnly = PacketLog(producerIsRealTime: true)
        memoryOnly.append(packets(first: 0, frames: 1_000))
        memoryOnly.markSent(through: 1)
        XCTAssertEqual(memoryOnly.memoryBytesHeld, 4_000, "without a spool, memory is the only copy until the acknowledgement")
    }

    func testASyncCoversEverySegmentWrittenSinceTheLastAndSkipsRetiredOnes() throws {
        // The spool alone, without the log's sync timer: 4 kB entries, three to a 10 kB segment.
        let spool = try StreamSpool.create(root: root, meta: meta(), segmentBytes: 10_000)
        func append(_ sequences: ClosedRange<UInt64>) throws {
            for sequence in sequences {
                _ = try spool.append(LoggedPacket(sequence: sequence, content: .audio(packets(first: Int64(sequence) * 1_000, frames: 1_000))))
            }
        }
        try append(1...7)
        let entry = spool.unsyncedBytes / 7
        XCTAssertGreaterThan(entry, 4_000)
        try spool.synchronize()
        XCTAssertEqual(spool.unsyncedBytes, 0, "a sync after rollovers covers the segments before the current one too")
        try append(8...12)
        spool.acknowledge(recording: StreamPosition(lastSequence: 9, endSampleTime: 9_000), retiringThrough: 9)
        try spool.synchronize()
        XCTAssertEqual(spool.unsyncedBytes, 0)
        try append(13...18)
        XCTAssertEqual(spool.unsyncedBytes, 6 * entry, "six entries written since the last sync")
        spool.acknowledge(recording: StreamPosition(lastSequence: 17, endSampleTime: 17_000), retiringThrough: 17)
        XCTAssertEqual(spool.unsyncedBytes, 3 * entry, "the segment of 13-15, acknowledged whole, retired without a sync")
        try spool.synchronize()
        XCTAssertEqual(spool.unsyncedBytes, 0)
        spool.removeAll()
    }

    func testAcknowledgedSegmentsAreDeleted() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id), segmentBytes: 10_000)
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        for index in 0..<12 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.flushSpool()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let segments = { try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("seg-") }.sorted() }
        XCTAssertEqual(try segments().count, 4, "4 kB entries: a new segment after every 3 (10 kB)")
        log.acknowledge(through: 7)
        log.flushSpool()
        XCTAssertEqual(try segments(), ["seg-00000000000000000007.spool", "seg-00000000000000000010.spool"],
                       "segments holding only acknowledged entries are gone; the one with sequence 8 stays")
        XCTAssertTrue(FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent("spare.spool")),
                      "one retired segment is kept for reuse")
        log.removeSpool()
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory))
    }

    func testAReusedSegmentReadsBackOnlyWhatWasWrittenSinceItsReuse() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id), segmentBytes: 10_000)
        let log = PacketLog(memoryLimit: 4_000, producerIsRealTime: true, spool: spool)
        var appended: [LoggedPacket] = []
        func append(_ index: Int) {
            let content = packets(first: Int64(index * 1_000), frames: 1_000)
            appended.append(LoggedPacket(sequence: log.append(content), content: .audio(content)))
        }
        for index in 0..<6 { append(index) }  // seg-1 holds 1-3, seg-4 holds 4-6 (4 kB entries)
        log.flushSpool()
        log.acknowledge(through: 3)
        log.flushSpool()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let files = { try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".spool") }.sorted() }
        XCTAssertEqual(try files(), ["seg-00000000000000000004.spool", "spare.spool"])
        append(6)  // sequence 7 starts a segment: the spare, renamed, written over from its start
        log.flushSpool()
        XCTAssertEqual(try files(), ["seg-00000000000000000004.spool", "seg-00000000000000000007.spool"])
        let size = { (name: String) in
            try FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))[.size] as? Int
        }
        XCTAssertEqual(try size("seg-00000000000000000007.spool"), try size("seg-00000000000000000004.spool"),
                       "the reused file still holds the older records 2 and 3 (valid checksums) behind record 7")
        XCTAssertEqual(try log.entries(from: 4, maxCount: 10), Array(appended[3...]), "entries read back from disk are the new ones")

        // The process dies; a new one reads the spool back: 4 to 7, and nothing of the older records.
        spool.release()
        let recovered = try PacketLog(recovering: try XCTUnwrap(try Self.claimed(directory)))
        XCTAssertEqual(recovered.oldestKeptSequence, 4)
        XCTAssertEqual(recovered.lastSequence, 7)
        XCTAssertEqual(try recovered.entries(from: 4, maxCount: 10), Array(appended[3...]))
        XCTAssertEqual(recovered.streamEnd, StreamEnd(position: StreamPosition(lastSequence: recovered.lastSequence, endSampleTime: 7_000), remainderFrames: 0, reason: "sender-restarted"))

        // An end recorded in the reused segment (behind record 7, over the older record 2) reads back too.
        recovered.finish(endSampleTime: 7_000, remainderFrames: 12, reason: "end-of-source")
        recovered.flushSpool()
        recovered.spool?.release()
        let again = try XCTUnwrap(try Self.claimed(directory)).contents()
        XCTAssertEqual(again.entries.map(\.sequence), [4, 5, 6, 7])
        XCTAssertEqual(again.end, StreamEnd(position: StreamPosition(lastSequence: 7, endSampleTime: 7_000), remainderFrames: 12, reason: "end-of-source"))
    }

    func testAFullLogOverflowsToALocalFileAndTheStreamGetsAGapNamingIt() throws {
        let spool = try StreamSpool.create(root: root, meta: meta())
        let events = EventRecorder()
        let overflowFolder = (root as NSString).appendingPathComponent("overflow")
        let log = PacketLog(
            producerIsRealTime: true, spool: spool, capacity: 12_000,
            overflow: OverflowRecorder(directory: overflowFolder, streamName: "test", streamID: UUID(), description: StreamDescription(
                format: format, magicCookie: [], primingFrames: 0, startTime: Date())),
            events: { events.record($0) })
        for index in 0..<3 { XCTAssertEqual(log.append(packets(first: Int64(index * 1_000), frames: 1_000)), UInt64(index + 1)) }
        let overflowed = [packets(first: 3_000, frames: 1_000), packets(first: 4_000, frames: 1_000)]
        for content in overflowed { XCTAssertEqual(log.append(content), 0, "the log is full: the audio goes to the overflow file") }
        guard case .overflowStarted(let path)? = events.all.first else { return XCTFail("the user is told: \(events.all)") }
        log.acknowledge(through: 3)
        XCTAssertEqual(log.append(packets(first: 5_000, frames: 1_000)), 5, "room again: a gap (4), then the audio (5)")
        let gap = try XCTUnwrap(try log.entries(from: 4, maxCount: 1).first)
        guard case .gap(let sampleTime, let length, let reason) = gap.content else { return XCTFail("\(gap)") }
        XCTAssertEqual(sampleTime, 3_000)
        XCTAssertEqual(length, 2_000)
        XCTAssertTrue(reason.contains(path), reason)
        XCTAssertEqual(events.all.last, .overflowEnded(path: path, frames: 2_000))
        let file = try CAFFile.read(path: path)
        XCTAssertTrue(file.isFinalized)
        XCTAssertEqual(try file.readAudioData(), overflowed.flatMap(\.payload), "the overflowed audio is kept exactly")
    }

    /// The earlier stream in `directory`, claimed for delivery; nil while another process holds it.
    private static func claimed(_ directory: String) throws -> StreamSpool? {
        if case .claimed(let spool) = try StreamSpool.claim(directory: directory) { return spool }
        return nil
    }
}

/// Collects the log's events from any thread.
final class EventRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [PacketLogEvent] = []
    func record(_ event: PacketLogEvent) { lock.withLock { events.append(event) } }
    var all: [PacketLogEvent] { lock.withLock { events } }}
