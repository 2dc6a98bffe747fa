import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// A packet log with a main and a backup destination: an entry leaves the log and the spool only
/// when both hold it durably, a payload leaves memory only when it was sent to both, each cursor
/// reports its own progress, and dropping a backup releases what only it held.
final class BackupCursorTests: XCTestCase {
    private var root: String!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("cursor-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func meta(_ id: UUID = UUID()) -> SpoolMeta { SpoolFixtures.meta(id) }

    private func packets(first: Int64, frames: Int) -> EncodedPackets { SpoolFixtures.packets(first: first, frames: frames) }

    func testAnEntryIsReleasedOnlyWhenEveryDestinationHoldsIt() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id), segmentBytes: 10_000)
        let log = PacketLog(producerIsRealTime: true, spool: spool, destinations: 2)
        for index in 0..<12 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.flushSpool()
        let backup = LogDestination.backup(1)

        log.acknowledge(through: 9, for: .main)
        XCTAssertEqual(log.acknowledgedSequence(for: .main), 9)
        XCTAssertEqual(log.acknowledgedSequence(for: backup), 0)
        XCTAssertEqual(log.acknowledgedSequence, 0, "the backup holds nothing yet: nothing is released")
        XCTAssertEqual(log.oldestKeptSequence, 1)
        XCTAssertEqual(log.unacknowledgedBytes, 48_000)
        XCTAssertEqual(log.unacknowledgedBytes(for: .main), 12_000)
        XCTAssertEqual(log.unacknowledgedBytes(for: backup), 48_000)
        XCTAssertEqual(log.progress(for: .main).acknowledgedEndSampleTime, 9_000)
        XCTAssertEqual(log.progress(for: backup).acknowledgedEndSampleTime, 0)
        XCTAssertEqual(log.progress.acknowledgedEndSampleTime, 0)

        log.acknowledge(through: 4, for: backup)
        XCTAssertEqual(log.acknowledgedSequence, 4, "released through the lower of the two cursors")
        XCTAssertEqual(log.unacknowledgedBytes, 32_000)
        XCTAssertEqual(log.progress.acknowledgedEndSampleTime, 4_000)
        log.flushSpool()
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let segments = { try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("seg-") }.sorted() }
        XCTAssertEqual(try segments(), ["seg-00000000000000000004.spool", "seg-00000000000000000007.spool", "seg-00000000000000000010.spool"],
                       "the spool keeps every segment the backup still needs")
        XCTAssertEqual(try log.entries(from: 5, maxCount: 100).map(\.sequence), Array(5...12), "the backup's resend reads from its own cursor")

        log.acknowledge(through: 2, for: .main)
        XCTAssertEqual(log.acknowledgedSequence(for: .main), 9, "a stale acknowledgement moves nothing back")

        log.finish(endSampleTime: 12_000, remainderFrames: 0, reason: "end-of-source")
        log.acknowledge(through: 12, for: .main)
        XCTAssertTrue(log.isComplete(for: .main))
        XCTAssertFalse(log.isComplete(for: backup))
        XCTAssertFalse(log.isComplete, "the spool still holds what the backup lacks")
        log.acknowledge(through: 12, for: backup)
        XCTAssertTrue(log.isComplete)
        XCTAssertEqual(log.unacknowledgedBytes, 0)
        log.removeSpool()
    }

    func testARestartedSenderDeliversToTheMainFromTheMainsOwnPosition() throws {
        // The spool keeps what the backup lacks, but records the main receiver's position: a
        // restarted sender delivers only to the main, from where the main is.
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id), segmentBytes: 10_000)
        let log = PacketLog(producerIsRealTime: true, spool: spool, destinations: 2)
        for index in 0..<12 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.acknowledge(through: 8, for: .main)
        log.acknowledge(through: 2, for: .backup(1))
        log.flushSpool()
        spool.release()  // the sender is killed here
        let directory = (root as NSString).appendingPathComponent(id.uuidString.lowercased())
        let claimed = try SpooledStreams.claim(directory: directory)
        guard case .ready(let reopened, let recovered) = claimed else { return XCTFail("the stream is ready to deliver: \(claimed)") }
        XCTAssertEqual(recovered.oldestKeptSequence, 9, "delivery resumes after what the main receiver holds")
        XCTAssertEqual(try recovered.entries(from: 9, maxCount: 100).map(\.sequence), Array(9...12))
        reopened.removeAll()
    }

    func testDroppingABackupReleasesWhatOnlyItHeld() throws {
        let spool = try StreamSpool.create(root: root, meta: meta(UUID()))
        let log = PacketLog(producerIsRealTime: true, spool: spool, destinations: 3)
        for index in 0..<6 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.acknowledge(through: 5, for: .main)
        log.acknowledge(through: 3, for: .backup(2))
        XCTAssertEqual(log.acknowledgedSequence, 0)
        log.dropDestination(.backup(1))
        XCTAssertEqual(log.acknowledgedSequence, 3, "the remaining backup now bounds the release")
        XCTAssertEqual(log.unacknowledgedBytes(for: .backup(1)), 0)
        XCTAssertNil(log.progress(for: .backup(1)).oldestUnacknowledgedAppendedAt)
        log.acknowledge(through: 6, for: .backup(1))
        XCTAssertEqual(log.acknowledgedSequence(for: .backup(1)), 0, "a dropped destination is not served again")
        log.dropDestination(.backup(2))
        XCTAssertEqual(log.acknowledgedSequence, 5)
        XCTAssertEqual(log.unacknowledgedBytes, 4_000)
        log.removeSpool()
    }

    func testPayloadsLeaveMemoryOnlyWhenSentToEveryDestination() throws {
        let spool = try StreamSpool.create(root: root, meta: meta(UUID()))
        let log = PacketLog(producerIsRealTime: true, spool: spool, destinations: 2)
        for index in 0..<5 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.flushSpool()
        log.markSent(through: 5, for: .main)
        XCTAssertEqual(log.memoryBytesHeld, 20_000, "the backup has not been sent any: every payload stays in memory")
        log.markSent(through: 2, for: .backup(1))
        XCTAssertEqual(log.memoryBytesHeld, 12_000, "entries 1-2 went to both and are spooled")
        log.dropDestination(.backup(1))
        XCTAssertEqual(log.memoryBytesHeld, 0, "with the backup dropped, what the main was sent leaves memory")
        log.removeSpool()
    }

    func testAReceiverThatAcknowledgesWhatWasNeverSentMovesOnlyItsOwnCursorToTheEnd() {
        let log = PacketLog(producerIsRealTime: true, destinations: 2)
        for index in 0..<4 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.acknowledge(through: .max, for: .backup(1))
        XCTAssertEqual(log.acknowledgedSequence(for: .backup(1)), 4, "clamped to the last entry appended")
        XCTAssertEqual(log.unacknowledgedBytes(for: .backup(1)), 0)
        XCTAssertEqual(log.unacknowledgedBytes(for: .main), 16_000, "the main's cursor is untouched")
        XCTAssertEqual(log.acknowledgedSequence, 0)
        log.markSent(through: .max, for: .backup(1))
        log.acknowledge(through: 2, for: LogDestination.backup(7))
        XCTAssertEqual(log.acknowledgedSequence(for: .backup(7)), 0, "a destination the log does not have changes nothing")
        log.append(packets(first: 4_000, frames: 1_000))
        XCTAssertEqual(log.unacknowledgedBytes(for: .backup(1)), 4_000, "later entries are owed to it again")
        XCTAssertEqual(log.unacknowledgedBytes, 20_000)
    }

    func testListenersAreRemovedOneByOne() {
        let log = PacketLog(producerIsRealTime: true)
        let calls = LockedCounter()
        let first = log.addListener { calls.add(1) }
        log.addListener { calls.add(100) }
        log.append(packets(first: 0, frames: 10))
        XCTAssertEqual(calls.value, 101)
        log.removeListener(first)
        log.append(packets(first: 10, frames: 10))
        XCTAssertEqual(calls.value, 201, "the other destination's listener keeps being called")
    }
}

/// A counter the log's listeners add to from the appending thread.
private final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    func add(_ amount: Int) { lock.withLock { total += amount } }
    var value: Int { lock.withLock { total } }
}
