import CaptureReceiver
import CaptureWire
import Foundation
import XCTest

/// The receiver's position log: the last intact record is what a restarted receiver resumes at.
final class StreamPositionLogTests: XCTestCase {
    private var caf: String!

    override func setUpWithError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("position-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        caf = folder.appendingPathComponent("stream.caf").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: (caf as NSString).deletingLastPathComponent)
    }

    func testLastRecordIsTheLastAppended() throws {
        let log = try StreamPositionLog.create(cafPath: caf, initial: StreamPositionRecord(position: .start, packets: 0))
        try log.append(StreamPositionRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 96_000), packets: 96_000))
        try log.append(StreamPositionRecord(position: StreamPosition(lastSequence: 9, endSampleTime: 200_000), packets: 199_000))

        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: caf), StreamPositionRecord(position: StreamPosition(lastSequence: 9, endSampleTime: 200_000), packets: 199_000))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: StreamPositionLog.path(for: caf))).count, 8 + 3 * 32)
    }

    func testATornOrDamagedLastRecordFallsBackToThePreviousOne() throws {
        let log = try StreamPositionLog.create(cafPath: caf, initial: StreamPositionRecord(position: .start, packets: 0))
        try log.append(StreamPositionRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 96_000), packets: 96_000))

        let path = StreamPositionLog.path(for: caf)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data([0, 0, 0, 0, 0, 0, 0, 12, 0, 0]))  // a record cut off by a crash
        try handle.close()
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: caf)?.position.lastSequence, 4, "a partial record is ignored")

        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes.removeLast(10)
        bytes[8 + 32 + 3] ^= 0xFF  // flip a bit in the last whole record
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: caf), StreamPositionRecord(position: .start, packets: 0),
                       "a record that fails its checksum is not trusted")
    }

    /// A record with a good checksum whose counts no stream reaches (crafted, or damage the
    /// checksum missed) used to be taken, and the resume point after it (sequence + 1) trapped
    /// the receiver; it is not trusted now: the record before it is used (issue 27).
    func testARecordBeyondTheProtocolsCountsIsNotTrusted() throws {
        let log = try StreamPositionLog.create(cafPath: caf, initial: StreamPositionRecord(position: .start, packets: 0))
        try log.append(StreamPositionRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 96_000), packets: 96_000))
        for impossible in [
            StreamPositionRecord(position: StreamPosition(lastSequence: .max, endSampleTime: 1), packets: 1),
            StreamPositionRecord(position: StreamPosition(lastSequence: 5, endSampleTime: -1), packets: 1),
            StreamPositionRecord(position: StreamPosition(lastSequence: 5, endSampleTime: .max), packets: 1),
            StreamPositionRecord(position: StreamPosition(lastSequence: 5, endSampleTime: 1), packets: .max),
        ] {
            try log.append(impossible)
            XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: caf), StreamPositionRecord(position: StreamPosition(lastSequence: 4, endSampleTime: 96_000), packets: 96_000), "\(impossible)")
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: StreamPositionLog.path(for: caf))))
            XCTAssertEqual(StreamPositionLog.lastRecord(length: Int64(bytes.count)) { count, offset in Array(bytes[Int(offset)..<(Int(offset) + count)]) }?.position.lastSequence, 4,
                           "the in-memory step reads the same")
        }
    }

    func testNoLogOrAForeignFileGivesNoRecord() throws {
        XCTAssertNil(try StreamPositionLog.lastRecord(cafPath: caf))
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: StreamPositionLog.path(for: caf)))
        XCTAssertNil(try StreamPositionLog.lastRecord(cafPath: caf))
    }
}
