@testable import CaptureCommitLog
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// The segment preparer makes the log's next segment off the commit thread: what it hands over is a
/// whole zero-filled segment under its final name; it never touches a segment that exists (a recycled
/// one holds old batches the log will overwrite itself); a segment it was not asked for, or could not
/// make, is left to the log.
final class SegmentPreparerTests: XCTestCase {
    private var folder: URL!
    private static let segmentSize: UInt64 = 64 << 10

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("segment-preparer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: folder)
    }

    private var logFolder: CommitLogFolder { CommitLogFolder(directory: folder.path) }

    private func contents(_ number: UInt64) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: logFolder.segmentPath(number))))
    }

    func testAPreparedSegmentIsWholeZeroFilledAndUnderItsFinalName() throws {
        let preparer = SegmentPreparer(folder: logFolder, segmentSize: Self.segmentSize)
        defer { preparer.stop() }
        preparer.prepare(7)
        preparer.waitUntilPrepared()
        let file = try XCTUnwrap(preparer.take(7))
        defer { file.close() }
        XCTAssertEqual(try contents(7), [UInt8](repeating: 0, count: Int(Self.segmentSize)))
        XCTAssertEqual(try logFolder.segmentNumbers(), [7])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".partial") }, [])
        XCTAssertNil(preparer.take(7), "handed over once")
    }

    func testAnExistingSegmentIsNeverOverwritten() throws {
        let old = try logFolder.makeSegment(3, size: Self.segmentSize)
        let written: [UInt8] = Array(repeating: 0xA5, count: 4096)
        try old.write(written, at: 0)
        old.close()
        let preparer = SegmentPreparer(folder: logFolder, segmentSize: Self.segmentSize)
        defer { preparer.stop() }
        preparer.prepare(3)
        preparer.waitUntilPrepared()
        XCTAssertNil(preparer.take(3), "the log opens an existing segment itself")
        XCTAssertEqual(Array(try contents(3).prefix(4096)), written, "a recycled segment's contents stay")
    }

    func testASegmentNotBegunIsLeftToTheLogAndTheThreadLetsItBe() throws {
        // The log needs the segment before the thread began it: the log makes it, not both.
        let preparer = SegmentPreparer(folder: logFolder, segmentSize: Self.segmentSize)
        defer { preparer.stop() }
        for number in UInt64(10)..<UInt64(40) {
            preparer.prepare(number)
            if let taken = preparer.take(number) {
                taken.close()
            } else {
                // As the log does: open what exists, else make it.
                let file = try logFolder.openSegment(number) ?? logFolder.makeSegment(number, size: Self.segmentSize)
                file.close()
            }
        }
        preparer.waitUntilPrepared()
        XCTAssertEqual(try logFolder.segmentNumbers(), Array(UInt64(10)..<UInt64(40)))
        for number in UInt64(10)..<UInt64(40) {
            XCTAssertEqual(try contents(number), [UInt8](repeating: 0, count: Int(Self.segmentSize)))
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".partial") }, [])
    }

    func testASegmentNotAskedForIsLeftToTheLog() throws {
        let preparer = SegmentPreparer(folder: logFolder, segmentSize: Self.segmentSize)
        defer { preparer.stop() }
        XCTAssertNil(preparer.take(1))
        preparer.prepare(2)
        preparer.waitUntilPrepared()
        XCTAssertNil(preparer.take(1), "another number than the one asked for")
        let two = try XCTUnwrap(preparer.take(2))
        two.close()
        XCTAssertEqual(try logFolder.segmentNumbers(), [2], "nothing but the segment asked for")
    }

    func testASegmentThatDoesNotFitLeavesNoPartialFileAndIsLeftToTheLog() throws {
        let small = folder.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=32k", "tmpfs", small.path])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a small tmpfs here (needs root): \(mounted.errorText)") }
        defer { _ = try? ToolRunner.run("umount", [small.path]) }
        let preparer = SegmentPreparer(folder: CommitLogFolder(directory: small.path), segmentSize: Self.segmentSize)
        defer { preparer.stop() }
        preparer.prepare(1)
        preparer.waitUntilPrepared()
        XCTAssertNil(preparer.take(1), "the log makes it itself when it needs it, and reports the full volume then")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: small.path), [], "no partial segment left")
    }

    func testANewLogHasItsNextSegmentMadeAheadWithoutARoundMakingIt() throws {
        let log = try CommitLogReader(directory: folder.path, segmentSize: Self.segmentSize).startWriting()
        defer { log.close() }
        log.waitForPreparedSegment()
        XCTAssertEqual(try logFolder.segmentNumbers(), [0, 1], "the segment written and the one after it")
        XCTAssertEqual(try contents(1), [UInt8](repeating: 0, count: Int(Self.segmentSize)))
    }
}

extension SegmentPreparerTests {
    func testACheckpointRecyclingSegmentsWhileOneIsAskedForLeavesEverySegmentWholeAndDistinct() throws {
        // Rounds cross segments while the preparer makes the next ones, and checkpoints rename old
        // segments forward: no number is made twice or lost, and replay stays exact.
        let log = try CommitLogReader(directory: folder.path, segmentSize: Self.segmentSize).startWriting()
        var sinceCheckpoint: [[UInt8]] = []
        for round in 0..<120 {
            let body = [UInt8](repeating: UInt8(truncatingIfNeeded: round), count: 7_000 + round % 3 * 2_000)
            try log.append(CommitLogRecord(kind: 1, subject: UInt64(round), body: body))
            let end = try log.commit()
            sinceCheckpoint.append(body)
            if round % 7 == 6 {
                try log.checkpoint(through: end)
                sinceCheckpoint.removeAll()
            }
        }
        log.close()
        let numbers = try logFolder.segmentNumbers()
        XCTAssertEqual(Set(numbers).count, numbers.count)
        XCTAssertLessThanOrEqual(numbers.count, 6, "recycled, not accumulated")
        for number in numbers {
            XCTAssertEqual(try contents(number).count, Int(Self.segmentSize), "segment \(number) is whole")
        }
        let reader = try CommitLogReader(directory: folder.path, segmentSize: Self.segmentSize)
        var replayed: [[UInt8]] = []
        while let batch = try reader.next() { replayed += batch.map(\.body) }
        XCTAssertEqual(replayed, sinceCheckpoint)
    }
}
