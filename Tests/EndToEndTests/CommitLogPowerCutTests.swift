import CaptureCommitLog
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The commit log on the power-cut file system (a FUSE file system that loses every byte no fsync
/// or fdatasync covered, and never sees syncfs): what a commit returned for survives the cut, in
/// order, across segment crossings, a checkpoint and recycled segments; a batch whose write was
/// under way when the power went is not replayed.
final class CommitLogPowerCutTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("log-powercut-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private func record(_ round: Int, _ index: Int) -> CommitLogRecord {
        let size = 3_000 + (round * 7_919 + index * 3_571) % 12_000
        return CommitLogRecord(kind: 1, subject: UInt64(index), body: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ round &* 17 &+ index) })
    }

    /// Records as short lines (kind, subject, size, checksum of the body), for readable failures.
    private func digest(_ records: [CommitLogRecord]) -> [String] {
        records.map { "kind \($0.kind) subject \($0.subject) \($0.body.count) bytes \(String(RecordChecksum.of($0.body), radix: 16))" }
    }

    func testEveryCommittedBatchSurvivesAPowerCutAndAnUnsyncedOneDoesNot() throws {
        let backing = work.appendingPathComponent("disk")
        let mountpoint = work.appendingPathComponent("mnt")
        let fileSystem = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        let directory = mountpoint.appendingPathComponent("log")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let segmentSize: UInt64 = 64 << 10
        let log = try CommitLogReader(directory: directory.path, segmentSize: segmentSize).startWriting()
        var sinceCheckpoint: [CommitLogRecord] = []
        for round in 0..<40 {
            let batch = (0..<(round % 3 + 1)).map { record(round, $0) }
            for item in batch { try log.append(item) }
            let end = try log.commit()
            sinceCheckpoint += batch
            if round == 24 {
                try log.checkpoint(through: end)
                sinceCheckpoint.removeAll()
            }
        }
        let committedEnd = log.durableEnd
        XCTAssertGreaterThan(committedEnd.offset, 10 * segmentSize, "the rounds crossed many segments")
        // The power goes while the next round's batch is being written: written, not yet synced.
        let control = try XCTUnwrap(CommitLogControl.decode(Array(try Data(contentsOf: directory.appendingPathComponent("control")))).get())
        let inFlight = CommitLogBatch.encode([record(99, 0)], stamp: .init(logID: control.logID, epoch: control.epoch, position: committedEnd))
        let geometry = try XCTUnwrap(LogGeometry(segmentSize: segmentSize))
        let segmentPath = directory.appendingPathComponent(String(format: "segment-%016llx", geometry.segment(of: committedEnd))).path
        let descriptor = open(segmentPath, O_WRONLY)
        XCTAssertGreaterThanOrEqual(descriptor, 0, segmentPath)
        XCTAssertEqual(inFlight.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(geometry.offsetInSegment(committedEnd))) }, inFlight.count)
        let before = try CommitLogReader(directory: directory.path)
        var seenBefore: [CommitLogRecord] = []
        while let batch = try before.next() { seenBefore += batch }
        XCTAssertEqual(digest(seenBefore), digest(sinceCheckpoint + [record(99, 0)]), "before the cut the unsynced batch reads back, as from any cache")
        fileSystem.cut()
        close(descriptor)

        let restarted = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        let reader = try CommitLogReader(directory: directory.path)
        var replayed: [CommitLogRecord] = []
        while let batch = try reader.next() { replayed += batch }
        XCTAssertEqual(digest(replayed), digest(sinceCheckpoint), "every batch committed since the checkpoint, in order, and nothing else")
        XCTAssertEqual(reader.end, .clean(committedEnd))
        let reopened = try reader.startWriting()
        XCTAssertEqual(reopened.durableEnd, committedEnd)
        reopened.close()
        restarted.cut()
    }
}
