import CaptureCommitLog
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The commit log on a real file system: what a commit makes durable comes back at the next
/// opening, exactly and in order; what was only appended does not; segments are crossed, recycled
/// at checkpoints and bounded; a torn tail ends the log quietly, damage in its middle stops it
/// loudly; a full volume and unreadable files are clear errors that lose nothing committed.
final class CommitLogTests: XCTestCase {
    private var folder: URL!
    private static let segmentSize: UInt64 = 64 << 10

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("commit-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        _ = try? ToolRunner.run("umount", [folder.appendingPathComponent("small").path])
        try? FileManager.default.removeItem(at: folder)
    }

    private func reader(_ directory: URL? = nil) throws -> CommitLogReader {
        try CommitLogReader(directory: (directory ?? folder).path, segmentSize: Self.segmentSize)
    }

    /// Every batch from the last checkpoint, and where reading ended.
    private func replay(_ directory: URL? = nil) throws -> (batches: [[CommitLogRecord]], end: CommitLogEnd?) {
        let reader = try reader(directory)
        var batches: [[CommitLogRecord]] = []
        while let batch = try reader.next() { batches.append(batch) }
        return (batches, reader.end)
    }

    /// A record whose body is `size` bytes that name the round and the record.
    private func record(round: Int, index: Int, size: Int) -> CommitLogRecord {
        var generator = SplitMix64(seed: UInt64(round * 1000 + index))
        return CommitLogRecord(kind: UInt8(index % 3 + 1), subject: UInt64(index), body: (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
    }

    private func segmentFiles(_ directory: URL? = nil) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: (directory ?? folder).path).filter { $0.hasPrefix("segment-") }.sorted()
    }

    // MARK: - What comes back

    func testCommittedBatchesComeBackExactlyAndAppendedOnesDoNot() throws {
        let first = try reader()
        XCTAssertNil(try first.next(), "a new log is empty")
        XCTAssertEqual(first.end, .clean(.start))
        let log = try first.startWriting()
        XCTAssertEqual(log.epoch, 1)
        let round1 = [record(round: 1, index: 0, size: 0), record(round: 1, index: 1, size: 1), record(round: 1, index: 2, size: 4000)]
        for item in round1 { try log.append(item) }
        let end1 = try log.commit()
        XCTAssertEqual(end1, LogPosition(48 + 16 + 24 + 16 + 4000))
        let round2 = [record(round: 2, index: 0, size: 333)]
        for item in round2 { try log.append(item) }
        let end2 = try log.commit()
        XCTAssertEqual(try log.commit(), end2, "a commit with nothing new changes nothing")
        // Appended, never committed: a crash now loses it, and nothing in it was acknowledged.
        try log.append(record(round: 3, index: 0, size: 100))
        log.close()

        let second = try reader()
        XCTAssertEqual(digest(try XCTUnwrap(second.next())), digest(round1))
        XCTAssertEqual(digest(try XCTUnwrap(second.next())), digest(round2))
        XCTAssertNil(try second.next())
        XCTAssertEqual(second.end, .clean(end2))
        let reopened = try second.startWriting()
        XCTAssertEqual(reopened.epoch, 2)
        XCTAssertEqual(reopened.durableEnd, end2)
    }

    func testRoundsCrossingManySegmentsComeBackInOrder() throws {
        let log = try reader().startWriting()
        var written: [[CommitLogRecord]] = []
        for round in 0..<60 {
            // 1 to 3 records of up to 30,000 bytes: about one segment every three rounds, and
            // rounds that do not fit where the last one ended.
            let batch = (0..<(round % 3 + 1)).map { record(round: round, index: $0, size: (round * 7919 + $0 * 104_729) % 30_000) }
            for item in batch { try log.append(item) }
            try log.commit()
            written.append(batch)
        }
        log.close()
        let (batches, end) = try replay()
        // A round that crosses a segment comes back as two batches: the records keep their order.
        XCTAssertEqual(digest(batches.flatMap { $0 }), digest(written.flatMap { $0 }))
        XCTAssertGreaterThanOrEqual(batches.count, written.count)
        guard case .clean(let position) = end else { return XCTFail("\(String(describing: end))") }
        XCTAssertGreaterThan(position.offset, 8 * Self.segmentSize)
        XCTAssertGreaterThanOrEqual(try segmentFiles().count, 9)
    }

    func testANewLogOfAnUnusableSegmentSizeIsRefusedSayingWhatSizesWork() throws {
        for size: UInt64 in [1_000, (64 << 10) + 4, 8 << 30] {
            XCTAssertThrowsError(try CommitLogReader(directory: folder.path, segmentSize: size)) { error in
                XCTAssertEqual(error as? CommitLogError, .unusableSegmentSize(size))
                XCTAssertTrue("\(error)".contains("a multiple of 8 bytes from 65536 to 4294967296"), "\(error)")
            }
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), [], "nothing made")
    }

    func testARecordLargerThanASegmentIsRefusedWithTheLimit() throws {
        let log = try reader().startWriting()
        let limit = Int(Self.segmentSize) - 48 - 16
        XCTAssertEqual(log.largestRecordBody, limit)
        XCTAssertThrowsError(try log.append(CommitLogRecord(kind: 1, subject: 1, body: Array(repeating: 1, count: limit + 1)))) { error in
            XCTAssertEqual(error as? CommitLogError, .recordTooLarge(size: limit + 1, limit: limit))
        }
        let largest = CommitLogRecord(kind: 1, subject: 1, body: Array(repeating: 2, count: limit))
        try log.append(record(round: 0, index: 0, size: 10))
        try log.append(largest)
        try log.commit()
        log.close()
        XCTAssertEqual(digest(try replay().batches), digest([[record(round: 0, index: 0, size: 10)], [largest]]))
    }

    // MARK: - Checkpoints and recycling

    func testACheckpointMovesReplayAndRecyclesSegmentsSoTheLogStaysBounded() throws {
        var log = try reader().startWriting()
        var sinceCheckpoint: [[CommitLogRecord]] = []
        var largestSegmentCount = 0
        for round in 0..<300 {
            let batch = [record(round: round, index: 0, size: 9_000 + round % 5 * 1_000)]
            for item in batch { try log.append(item) }
            let end = try log.commit()
            sinceCheckpoint.append(batch)
            if round % 10 == 9, round < 295 {
                try log.checkpoint(through: end)
                sinceCheckpoint.removeAll()
            }
            if round == 150 {
                // A restart in the middle: the recycled segments' old batches are not mistaken for new ones.
                log.close()
                let (batches, _) = try replay()
                XCTAssertEqual(digest(batches), digest(sinceCheckpoint), "replay after a restart at round 150")
                log = try reader().startWriting()
            }
            largestSegmentCount = max(largestSegmentCount, try segmentFiles().count)
        }
        log.close()
        // 300 rounds of about 11 kB are 50 segments of 64 KiB; between checkpoints at most 2 are
        // written, and the rest of the files are the ones made ahead or kept as spares.
        XCTAssertLessThanOrEqual(largestSegmentCount, 6, "segments are recycled, not accumulated")
        let (batches, end) = try replay()
        XCTAssertEqual(digest(batches), digest(sinceCheckpoint), "replay starts at the last checkpoint")
        XCTAssertEqual(batches.count, 10)
        guard case .clean = end else { return XCTFail("\(String(describing: end))") }
    }

    func testACheckpointBeforeTheEndReplaysFromThere() throws {
        let log = try reader().startWriting()
        var ends: [LogPosition] = []
        for round in 0..<6 {
            try log.append(record(round: round, index: 0, size: 5_000))
            ends.append(try log.commit())
        }
        try log.checkpoint(through: ends[3])
        try log.checkpoint(through: ends[1])  // never backwards
        XCTAssertEqual(log.checkpoint, ends[3])
        log.close()
        XCTAssertEqual(digest(try replay().batches), digest([[record(round: 4, index: 0, size: 5_000)], [record(round: 5, index: 0, size: 5_000)]]))
        // A second opening, then a checkpoint exactly where it began: replay still reads what follows.
        let second = try reader().startWriting()
        try second.checkpoint(through: ends[5])
        try second.append(record(round: 6, index: 0, size: 10))
        try second.commit()
        second.close()
        XCTAssertEqual(digest(try replay().batches), digest([[record(round: 6, index: 0, size: 10)]]))
    }

    // MARK: - Torn tails and damage

    /// Commits three rounds; returns the position of the third batch and the segment file.
    private func threeRounds() throws -> (third: LogPosition, end: LogPosition, segment: String) {
        let log = try reader().startWriting()
        var positions: [LogPosition] = [.start]
        for round in 0..<3 {
            try log.append(record(round: round, index: 0, size: 1_000))
            positions.append(try log.commit())
        }
        log.close()
        return (positions[2], positions[3], folder.appendingPathComponent(try segmentFiles()[0]).path)
    }

    private func overwrite(_ path: String, at offset: UInt64, with bytes: [UInt8]) throws {
        let file = try DurableFile.open(path: path, create: false)
        try file.write(bytes, at: Int64(offset))
        file.close()
    }

    func testABatchTornByACrashEndsTheLogAndTheNextOpeningWritesOverIt() throws {
        let (third, end, segment) = try threeRounds()
        // The crash cut the third batch's write short: its last 500 bytes never reached the disk.
        try overwrite(segment, at: end.offset - 500, with: Array(repeating: 0, count: 500))
        let reader = try reader()
        XCTAssertEqual(digest(try XCTUnwrap(reader.next())), digest([record(round: 0, index: 0, size: 1_000)]))
        XCTAssertEqual(digest(try XCTUnwrap(reader.next())), digest([record(round: 1, index: 0, size: 1_000)]))
        XCTAssertNil(try reader.next())
        XCTAssertEqual(reader.end, .tornTail(third, .checksumMismatch))
        let log = try reader.startWriting()
        XCTAssertEqual(log.durableEnd, third, "the next batch goes where the torn one began")
        try log.append(record(round: 9, index: 0, size: 10))
        try log.commit()
        log.close()
        XCTAssertEqual(digest(try replay().batches.last ?? []), digest([record(round: 9, index: 0, size: 10)]))
        XCTAssertEqual(try replay().batches.count, 3)
    }

    func testAHeaderTornByACrashEndsTheLog() throws {
        let (third, _, segment) = try threeRounds()
        try overwrite(segment, at: third.offset + 8, with: Array(repeating: 0xFF, count: 8))
        let (batches, end) = try replay()
        XCTAssertEqual(batches.count, 2)
        XCTAssertEqual(end, .clean(third), "no batch of the chain there: the log ends")
    }

    func testDamageBeforeIntactBatchesStopsTheLogLoudly() throws {
        let (third, _, segment) = try threeRounds()
        // A byte of the second batch's audio changed on the disk after it was synced: the third is intact.
        let second = LogPosition(48 + 16 + 1000)
        try overwrite(segment, at: second.offset + 300, with: [0x42])
        let reader = try reader()
        XCTAssertNotNil(try reader.next())
        XCTAssertThrowsError(try reader.next()) { error in
            XCTAssertEqual(
                error as? CommitLogError,
                .damaged(path: segment, position: second, reason: "its checksum does not match, yet a batch written after it follows at \(third.offset)"))
            let text = (error as? CommitLogError)?.description ?? ""
            XCTAssertTrue(text.contains("later records are intact"), text)
            XCTAssertTrue(text.contains("Check the disk"), text)
        }
        XCTAssertLessThan(second, third)
    }

    func testADamagedHeaderBeforeIntactBatchesStopsTheLogLoudlyToo() throws {
        let (third, _, segment) = try threeRounds()
        let second = LogPosition(48 + 16 + 1000)
        // The second batch's length field changed on the disk: where the third begins cannot be
        // read from it, but the third is found further on.
        try overwrite(segment, at: second.offset + 8, with: [0x01, 0x00, 0x00, 0x00])
        XCTAssertThrowsError(try replay()) { error in
            XCTAssertEqual(
                error as? CommitLogError,
                .damaged(path: segment, position: second, reason: "the bytes there are not a batch, yet a batch written after it follows at \(third.offset)"))
        }
    }

    func testAnEarlierOpeningsLeftoversPastTheEndAreNotReplayed() throws {
        let (_, end, segment) = try threeRounds()
        let reopened = try reader().startWriting()  // epoch 2
        try reopened.append(record(round: 5, index: 0, size: 64))
        let end2 = try reopened.commit()
        reopened.close()
        // Forge what an epoch-1 batch left where the epoch-2 chain now ends.
        let control = try XCTUnwrap(CommitLogControl.decode(Array(try Data(contentsOf: folder.appendingPathComponent("control")))).get())
        let leftover = CommitLogBatch.encode([record(round: 6, index: 0, size: 64)], stamp: .init(logID: control.logID, epoch: 1, position: end2))
        try overwrite(segment, at: end2.offset, with: leftover)
        let (batches, finalEnd) = try replay()
        XCTAssertEqual(batches.count, 4)
        XCTAssertEqual(digest(batches.last ?? []), digest([record(round: 5, index: 0, size: 64)]))
        XCTAssertEqual(finalEnd, .clean(end2))
        XCTAssertGreaterThan(end2, end)
    }

    // MARK: - Files that cannot be trusted or read

    func testAForeignSegmentAMissingOrDamagedControlAndAnUnreadableFileAreClearErrors() throws {
        _ = try threeRounds()
        let other = folder.appendingPathComponent("other")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        let otherLog = try reader(other).startWriting()
        try otherLog.append(record(round: 0, index: 0, size: 10))
        try otherLog.commit()
        otherLog.close()
        let segment = folder.appendingPathComponent(try segmentFiles()[0])
        let saved = try Data(contentsOf: segment)
        try FileManager.default.removeItem(at: segment)
        try FileManager.default.copyItem(at: other.appendingPathComponent(try segmentFiles(other)[0]), to: segment)
        XCTAssertThrowsError(try replay()) { error in
            guard case .foreignSegment(let path, _) = error as? CommitLogError else { return XCTFail("\(error)") }
            XCTAssertEqual(path, segment.path)
        }
        try saved.write(to: segment)

        let control = folder.appendingPathComponent("control")
        let controlBytes = try Data(contentsOf: control)
        var damaged = controlBytes
        damaged[20] ^= 1
        try damaged.write(to: control)
        XCTAssertThrowsError(try reader()) { error in
            XCTAssertEqual(error as? CommitLogError, .damagedControl(path: control.path, reason: "its checksum does not match"))
            XCTAssertTrue("\(error)".contains("move the log's folder aside"), "\(error)")
        }
        try FileManager.default.removeItem(at: control)
        XCTAssertThrowsError(try reader()) { error in
            XCTAssertEqual(error as? CommitLogError, .missingControl(directory: folder.path))
        }
        // A folder where the control file should be: it opens, but cannot be read.
        try FileManager.default.createDirectory(at: control, withIntermediateDirectories: false)
        XCTAssertThrowsError(try reader()) { error in
            guard case .unreadable(let path, let reason) = error as? CommitLogError else { return XCTFail("\(error)") }
            XCTAssertEqual(path, control.path)
            XCTAssertTrue(reason.contains("Is a directory"), reason)
        }
        try FileManager.default.removeItem(at: control)
        try controlBytes.write(to: control)
        XCTAssertEqual(try replay().batches.count, 3, "restored, the log reads again")
    }

    func testAFullVolumeAppendsNothingLosesNothingAndACheckpointMakesRoomAgain() throws {
        let small = folder.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        // Room for the control file and three 64 KiB segments, not four.
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=224k", "tmpfs", small.path])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a small tmpfs here (needs root): \(mounted.errorText)") }
        let log = try reader(small).startWriting()
        var committed: [CommitLogRecord] = []
        var refusal: CommitLogError?
        for round in 0..<20 {
            let item = record(round: round, index: 0, size: 20_000)
            let before = log.appendEnd
            do {
                try log.append(item)
            } catch {
                refusal = error
                XCTAssertEqual(log.appendEnd, before, "nothing appended")
                break
            }
            try log.commit()
            committed.append(item)
        }
        XCTAssertEqual(refusal, .logVolumeFull(directory: small.path, segmentSize: Self.segmentSize))
        XCTAssertTrue(refusal?.description.contains("give the commit log folder (ReceiverConfiguration.logDirectory) another volume") == true, "\(String(describing: refusal))")
        XCTAssertFalse(try FileManager.default.contentsOfDirectory(atPath: small.path).contains { $0.hasSuffix(".partial") }, "no partial segment left")
        // The recordings caught up: the checkpoint recycles the first segments and the log goes on.
        try log.checkpoint(through: log.durableEnd)
        let next = record(round: 99, index: 0, size: 20_000)
        try log.append(next)
        try log.commit()
        log.close()
        XCTAssertEqual(digest(try replay(small).batches), digest([[next]]))
        XCTAssertGreaterThanOrEqual(committed.count, 6)
    }
}

/// Records as short lines (kind, subject, size, checksum of the body), so that a failed comparison
/// of megabytes of records prints what differs and not every byte.
func digest(_ records: [CommitLogRecord]) -> [String] {
    records.map { "kind \($0.kind) subject \($0.subject) \($0.body.count) bytes \(String(RecordChecksum.of($0.body), radix: 16))" }
}

/// Batches as digests, one list per batch.
func digest(_ batches: [[CommitLogRecord]]) -> [[String]] { batches.map { digest($0) } }
