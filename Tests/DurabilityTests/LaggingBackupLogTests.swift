import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// The packet log's room is the main receiver's (issue 27, item 3): a backup whose backlog would
/// make the main overflow is given up at once instead, and the main keeps every packet; a source
/// read faster than real time is paced by the main alone, a lagging backup given up at the memory
/// limit without a spool, and kept on disk up to the spool's limit with one; only an
/// acknowledgement that advances counts as a backup's progress.
final class LaggingBackupLogTests: XCTestCase {
    private var root: String!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("lagging-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Entry `index`: 1,000 frames, 4,000 bytes.
    private static func packets(_ index: Int) -> EncodedPackets { SpoolFixtures.packets(first: Int64(index * 1_000), frames: 1_000) }

    /// Runs `produce` on a thread of its own and waits for it to return: a producer held up by the
    /// log would never return (the minute is only a safety net against hanging the suite).
    private func runProducer(_ what: String, _ produce: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            produce()
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "\(what): the producer was held up")
    }

    func testABackupThatWouldMakeTheMainOverflowIsGivenUpAndTheMainKeepsEveryPacket() {
        let events = Recorded<PacketLogEvent>()
        let log = PacketLog(producerIsRealTime: true, capacity: 10_000, destinations: 3, events: { events.add($0) })
        let drops = Recorded<Drop>()
        let token = log.addDropListener { drops.add(Drop(destination: $0, room: $1)) }
        // Backup 2 keeps up with the main; backup 1 acknowledges nothing.
        for index in 0..<6 {
            XCTAssertEqual(log.append(Self.packets(index)), UInt64(index + 1), "entry \(index + 1) is logged, not overflowed")
            log.acknowledge(through: UInt64(index + 1), for: .main)
            log.acknowledge(through: UInt64(index + 1), for: .backup(2))
        }
        let room = BackupRoom(bytes: 10_000, limit: .spoolMax)
        XCTAssertEqual(drops.values, [Drop(destination: .backup(1), room: room)], "given up at entry 3, when its 8,000 bytes and 4,000 more passed 10,000")
        XCTAssertEqual(log.givenUpRoom(for: .backup(1)), room)
        XCTAssertNil(log.givenUpRoom(for: .backup(2)))
        XCTAssertNil(log.givenUpRoom(for: .main))
        XCTAssertEqual(events.values, [], "no overflow, no audio lost")
        XCTAssertEqual(log.acknowledgedSequence, 6, "released as the main and backup 2 acknowledged")
        XCTAssertEqual(log.unacknowledgedBytes, 0)
        XCTAssertEqual(log.unacknowledgedBytes(for: .backup(1)), 0)
        XCTAssertEqual(log.progress(for: .backup(1)).acknowledgedEndSampleTime, 0, "its file lacks everything from sample 0")
        log.removeListener(token)
        log.append(Self.packets(6))
        log.acknowledge(through: 7, for: .backup(1))
        XCTAssertEqual(log.acknowledgedSequence(for: .backup(1)), 0, "a backup given up is not served again")
        XCTAssertEqual(drops.values.count, 1)
    }

    func testTheMainsOwnBacklogStillOverflowsAndGivesNoBackupUp() {
        let events = Recorded<PacketLogEvent>()
        let log = PacketLog(producerIsRealTime: true, capacity: 10_000, destinations: 2, events: { events.add($0) })
        let drops = Recorded<Drop>()
        log.addDropListener { drops.add(Drop(destination: $0, room: $1)) }
        XCTAssertEqual(log.append(Self.packets(0)), 1)
        XCTAssertEqual(log.append(Self.packets(1)), 2)
        XCTAssertEqual(log.append(Self.packets(2)), 0, "the main's own 8,000 bytes and 4,000 more pass 10,000: overflow")
        XCTAssertEqual(events.values, [.audioLost(.logFullWithoutOverflow(capacity: 10_000))])
        XCTAssertEqual(drops.values, [], "giving the backup up would not have helped the main")
        XCTAssertNil(log.givenUpRoom(for: .backup(1)))
    }

    func testAFastSourceIsPacedByTheMainAndALaggingBackupIsGivenUpAtTheMemoryLimitWithoutASpool() {
        let log = PacketLog(memoryLimit: 10_000, producerIsRealTime: false, destinations: 2)
        let drops = Recorded<Drop>()
        log.addDropListener { drops.add(Drop(destination: $0, room: $1)) }
        runProducer("12 entries, the main acknowledging each") {
            for index in 0..<12 {
                log.append(Self.packets(index))
                log.acknowledge(through: UInt64(index + 1), for: .main)
            }
        }
        XCTAssertEqual(drops.values, [Drop(destination: .backup(1), room: BackupRoom(bytes: 10_000, limit: .fastSource))])
        XCTAssertEqual(log.lastSequence, 12)
        XCTAssertEqual(log.memoryBytesHeld, 0, "nothing is kept for the backup given up")
    }

    func testASourceWaitingForTheMainIsWokenByTheMainsAcknowledgementAloneAndGivesTheLaggingBackupUp() {
        let log = PacketLog(memoryLimit: 10_000, producerIsRealTime: false, destinations: 2)
        let drops = Recorded<Drop>()
        log.addDropListener { drops.add(Drop(destination: $0, room: $1)) }
        let appended = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for index in 0..<3 { log.append(Self.packets(index)) }
            appended.signal()
            log.append(Self.packets(3))  // waits: the main has 12,000 bytes unacknowledged
            done.signal()
        }
        appended.wait()
        while !log.isProducerWaiting { usleep(1_000) }  // the producer reached its wait
        XCTAssertEqual(drops.values, [], "the backup is no further behind than the main")
        // Only the main acknowledges: nothing leaves the log (the backup still lacks it all), but
        // the source may go on, and the backup, now 12,000 bytes behind on its own, is given up.
        log.acknowledge(through: 3, for: .main)
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "the producer was woken by the main's acknowledgement")
        XCTAssertEqual(drops.values, [Drop(destination: .backup(1), room: BackupRoom(bytes: 10_000, limit: .fastSource))])
        XCTAssertEqual(log.lastSequence, 4)
        XCTAssertEqual(log.unacknowledgedBytes, 4_000)
    }

    func testAFastSourceWithASpoolKeepsWhatALaggingBackupLacksOnDiskUpToTheSpoolsLimit() throws {
        let spool = try StreamSpool.create(root: root, meta: SpoolFixtures.meta(), segmentBytes: 1 << 20)
        let log = PacketLog(memoryLimit: 10_000, producerIsRealTime: false, spool: spool, capacity: 40_000, destinations: 2)
        let drops = Recorded<Drop>()
        log.addDropListener { drops.add(Drop(destination: $0, room: $1)) }
        runProducer("10 entries, the main acknowledging each") {
            for index in 0..<10 {
                log.append(Self.packets(index))
                log.acknowledge(through: UInt64(index + 1), for: .main)
            }
        }
        log.flushSpool()
        XCTAssertEqual(drops.values, [], "40,000 bytes behind: within the spool's limit")
        XCTAssertEqual(log.unacknowledgedBytes(for: .backup(1)), 40_000)
        XCTAssertLessThanOrEqual(log.memoryBytesHeld, 10_000, "what the backup lacks is on disk, not in memory")
        XCTAssertEqual(try log.entries(from: 1, maxCount: 100).map(\.sequence), Array(1...10), "the backup's resend reads it back")
        runProducer("two more") {
            log.append(Self.packets(10))
            log.append(Self.packets(11))
        }
        XCTAssertEqual(drops.values, [Drop(destination: .backup(1), room: BackupRoom(bytes: 40_000, limit: .spoolMax))])
        log.removeSpool()
    }

    func testOnlyAnAcknowledgementThatAdvancesCountsAsProgress() {
        let log = PacketLog(producerIsRealTime: true, destinations: 2)
        for index in 0..<3 { log.append(Self.packets(index)) }
        XCTAssertNil(log.progress(for: .backup(1)).lastAdvanceAt)
        XCTAssertNotNil(log.progress(for: .backup(1)).oldestUnacknowledgedAppendedAt, "it lacks entries 1-3")
        log.acknowledge(through: 2, for: .backup(1))
        let advanced = log.progress(for: .backup(1)).lastAdvanceAt
        XCTAssertNotNil(advanced)
        log.acknowledge(through: 1, for: .backup(1))
        XCTAssertEqual(log.progress(for: .backup(1)).lastAdvanceAt, advanced, "a stale acknowledgement is no progress")
        XCTAssertNotNil(log.progress(for: .backup(1)).lastAcknowledgementAt, "but it is a report of its position")
        log.acknowledge(through: .max, for: .backup(1))
        let atTheEnd = log.progress(for: .backup(1))
        XCTAssertNotNil(atTheEnd.lastAdvanceAt)
        XCTAssertNil(atTheEnd.oldestUnacknowledgedAppendedAt, "it lacks nothing")
        log.acknowledge(through: .max, for: .backup(1))
        XCTAssertEqual(log.progress(for: .backup(1)).lastAdvanceAt, atTheEnd.lastAdvanceAt, "acknowledging beyond the end again advances nothing")
        XCTAssertNil(log.progress(for: .main).lastAdvanceAt, "the main's cursor is its own")
    }
}

/// A backup given up by the log, as its drop listener is told.
private struct Drop: Equatable, Sendable {
    var destination: LogDestination
    var room: BackupRoom
}

/// Values recorded from the log's threads.
///
/// Sendability (`@unchecked Sendable`): `stored` is read and written only under `lock`.
private final class Recorded<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Value] = []
    func add(_ value: Value) { lock.withLock { stored.append(value) } }
    var values: [Value] { lock.withLock { stored } }
}
