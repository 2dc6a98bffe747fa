import CaptureCommitLog
import XCTest

/// The batch and control-file formats, byte for byte: what decodes, and exactly why bytes that are
/// not a batch of this chain are refused.
final class CommitLogBatchTests: XCTestCase {
    private let stamp = CommitLogBatch.Stamp(logID: 0xA11C_E5ED, epoch: 3, position: LogPosition(4096))

    private func expectation(position: UInt64 = 4096, epochs: ClosedRange<UInt64> = 2...3, room: UInt64 = 1 << 20) -> CommitLogBatch.Expectation {
        CommitLogBatch.Expectation(logID: 0xA11C_E5ED, position: LogPosition(position), epochs: epochs, room: room)
    }

    private let records = [
        CommitLogRecord(kind: 1, subject: 7, body: []),
        CommitLogRecord(kind: 2, subject: 7, body: [1]),
        CommitLogRecord(kind: 3, subject: 8, body: Array(0..<8)),
        CommitLogRecord(kind: 255, subject: .max, body: Array(repeating: 0xEE, count: 9)),
    ]

    func testRecordsComeBackExactlyWithTheirKindsSubjectsAndBodies() throws {
        let bytes = CommitLogBatch.encode(records, stamp: stamp)
        // 48-byte header; records of 16-byte headers and bodies padded to 8: 16 + 24 + 24 + 32.
        XCTAssertEqual(bytes.count, 48 + 16 + 24 + 24 + 32)
        XCTAssertEqual(Array(bytes[0..<4]), Array("CLB1".utf8))
        let header = try CommitLogBatch.header(bytes[...], expected: expectation()).get()
        XCTAssertEqual(header, CommitLogBatch.Header(length: bytes.count, count: 4, continuesInNextSegment: false, stamp: stamp))
        XCTAssertEqual(try CommitLogBatch.records(bytes[...], header: header).get(), records)
        let marker = CommitLogBatch.encode([], stamp: stamp, continuesInNextSegment: true)
        XCTAssertEqual(marker.count, 48)
        XCTAssertEqual(try CommitLogBatch.header(marker[...], expected: expectation()).get().continuesInNextSegment, true)
    }

    func testBytesThatAreNotABatchOfThisChainSayWhy() {
        let good = CommitLogBatch.encode(records, stamp: stamp)
        var unknownFlag = good
        unknownFlag[4] = 2
        let otherLog = CommitLogBatch.Stamp(logID: 0xBAD, epoch: 3, position: LogPosition(4096))
        let cases: [(String, [UInt8], CommitLogBatch.Expectation, CommitLogBatch.Absence)] = [
            ("zeros", Array(repeating: 0, count: 64), expectation(), .unwritten),
            ("the end of the file", [], expectation(), .unwritten),
            ("a header cut short", Array(good.prefix(20)), expectation(), .notABatch),
            ("garbage", Array(repeating: 0x5A, count: 64), expectation(), .notABatch),
            ("an unknown flag", unknownFlag, expectation(), .notABatch),
            ("an older part of a recycled segment", good, expectation(position: 4096 + 65536), .stale(LogPosition(4096))),
            ("another log's segment", CommitLogBatch.encode(records, stamp: otherLog), expectation(), .foreignLog(0xBAD)),
            ("an earlier opening's leftovers", good, expectation(epochs: 4...5), .olderEpoch(3)),
            ("an epoch not yet opened", good, expectation(epochs: 0...2), .notABatch),
            ("longer than the segment's room", good, expectation(room: UInt64(good.count - 8)), .impossibleLength(good.count)),
        ]
        for (name, bytes, expected, absence) in cases {
            XCTAssertEqual(CommitLogBatch.header(bytes[...], expected: expected), .failure(absence), name)
        }
    }

    func testADamagedOrCutOffBatchIsNotTrusted() throws {
        let good = CommitLogBatch.encode(records, stamp: stamp)
        let header = try CommitLogBatch.header(good[...], expected: expectation()).get()
        XCTAssertEqual(CommitLogBatch.records(good.prefix(good.count - 8), header: header), .failure(.cutOff(available: good.count - 8)))
        for index in [4, 12, 40, 48, 70, good.count - 1] {
            var damaged = good
            damaged[index] ^= 0x01
            // A flipped header byte may already fail the header; a flipped body or checksum byte fails the checksum.
            if case .success(let damagedHeader) = CommitLogBatch.header(damaged[...], expected: expectation()) {
                XCTAssertEqual(CommitLogBatch.records(damaged[...], header: damagedHeader), .failure(.checksumMismatch), "byte \(index)")
            }
        }
    }

    func testTheControlFileRoundTripsAndRefusesDamage() throws {
        let geometry = try XCTUnwrap(LogGeometry(segmentSize: 1 << 20))
        let control = CommitLogControl(logID: 42, geometry: geometry, epoch: 9, checkpoint: LogPosition(3 << 20 + 4096), checkpointEpoch: 8)
        let bytes = control.encoded
        XCTAssertEqual(bytes.count, 56)
        XCTAssertEqual(CommitLogControl.decode(bytes), .success(control))
        var flipped = bytes
        flipped[30] ^= 0x10
        XCTAssertEqual(CommitLogControl.decode(flipped), .failure(.checksumMismatch))
        XCTAssertEqual(CommitLogControl.decode(Array(bytes.dropLast())), .failure(.wrongSize(55)))
        XCTAssertEqual(CommitLogControl.decode(Array(repeating: 0, count: 56)), .failure(.notAControlFile))
        let inconsistent = CommitLogControl(logID: 42, geometry: geometry, epoch: 2, checkpoint: .start, checkpointEpoch: 3)
        XCTAssertEqual(CommitLogControl.decode(inconsistent.encoded), .failure(.inconsistent))
    }

    func testSegmentSizesOutOfRangeAreRefused() {
        XCTAssertNil(LogGeometry(segmentSize: 1024))
        XCTAssertNil(LogGeometry(segmentSize: (64 << 10) + 4))
        XCTAssertNil(LogGeometry(segmentSize: (1 << 32) + 8))
        let geometry = LogGeometry(segmentSize: 64 << 10)
        XCTAssertEqual(geometry?.segment(of: LogPosition(3 * 65536 + 10)), 3)
        XCTAssertEqual(geometry?.room(at: LogPosition(3 * 65536 + 10)), 65526)
        XCTAssertEqual(geometry?.offsetInSegment(LogPosition(3 * 65536 + 10)), 10)
    }
}
