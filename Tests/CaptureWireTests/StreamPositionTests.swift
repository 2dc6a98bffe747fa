import CaptureWire
import Foundation
import XCTest

/// `StreamPosition`, the one type for where a stream stands: each row a position and what it says
/// comes next, both ways round.
final class StreamPositionTests: XCTestCase {
    func testEachPositionAndWhatComesNext() {
        let rows: [(position: StreamPosition, nextSequence: UInt64, nextSampleTime: Int64, coversNothing: Bool, line: UInt)] = [
            (.start, 1, 0, true, #line),
            (StreamPosition(lastSequence: 0, endSampleTime: 96_000), 1, 96_000, true, #line),
            (StreamPosition(lastSequence: 1, endSampleTime: 4), 2, 4, false, #line),
            (StreamPosition(lastSequence: 40, endSampleTime: 600), 41, 600, false, #line),
            (StreamPosition(lastSequence: WireProtocol.maximumSequence, endSampleTime: 7), WireProtocol.maximumSequence + 1, 7, false, #line),
        ]
        for row in rows {
            XCTAssertEqual(row.position.nextSequence, row.nextSequence, line: row.line)
            XCTAssertEqual(row.position.nextSampleTime, row.nextSampleTime, line: row.line)
            XCTAssertEqual(row.position.coversNothing, row.coversNothing, line: row.line)
            XCTAssertEqual(
                StreamPosition(nextSequence: row.nextSequence, nextSampleTime: row.nextSampleTime), row.position,
                "what comes next names the same position", line: row.line)
        }
    }

    /// HelloAccepted's `next_sequence` read as a position: sequences start at 1, so 0 (which no valid
    /// message carries) covers nothing, like 1.
    func testEachNextSequenceReadAsAPosition() {
        let rows: [(nextSequence: UInt64, nextSampleTime: Int64, lastSequence: UInt64, line: UInt)] = [
            (0, 0, 0, #line),
            (1, 0, 0, #line),
            (1, 480, 0, #line),
            (2, 4, 1, #line),
            (41, 600, 40, #line),
        ]
        for row in rows {
            let position = StreamPosition(nextSequence: row.nextSequence, nextSampleTime: row.nextSampleTime)
            XCTAssertEqual(position, StreamPosition(lastSequence: row.lastSequence, endSampleTime: row.nextSampleTime), line: row.line)
        }
    }

    func testAppendingAnEntryCoversTheNextSequence() {
        let rows: [(from: StreamPosition, entryEnd: Int64, to: StreamPosition, line: UInt)] = [
            (.start, 4, StreamPosition(lastSequence: 1, endSampleTime: 4), #line),
            (StreamPosition(lastSequence: 1, endSampleTime: 4), 8, StreamPosition(lastSequence: 2, endSampleTime: 8), #line),
            // A marker or a filled gap covers no frames: the timeline stays.
            (StreamPosition(lastSequence: 2, endSampleTime: 8), 8, StreamPosition(lastSequence: 3, endSampleTime: 8), #line),
        ]
        for row in rows {
            XCTAssertEqual(row.from.appendingEntry(endingAt: row.entryEnd), row.to, line: row.line)
        }
    }

    func testPositionsOrderBySequenceThenSampleTime() {
        let rows: [(lhs: StreamPosition, rhs: StreamPosition, ascending: Bool, line: UInt)] = [
            (.start, StreamPosition(lastSequence: 1, endSampleTime: 0), true, #line),
            (StreamPosition(lastSequence: 1, endSampleTime: 4), StreamPosition(lastSequence: 2, endSampleTime: 4), true, #line),
            (StreamPosition(lastSequence: 2, endSampleTime: 4), StreamPosition(lastSequence: 2, endSampleTime: 8), true, #line),
            (StreamPosition(lastSequence: 3, endSampleTime: 0), StreamPosition(lastSequence: 2, endSampleTime: 8), false, #line),
            (StreamPosition(lastSequence: 2, endSampleTime: 8), StreamPosition(lastSequence: 2, endSampleTime: 8), false, #line),
        ]
        for row in rows {
            XCTAssertEqual(row.lhs < row.rhs, row.ascending, line: row.line)
        }
    }

    /// A new stream begins before sequence 1 at its start sample time; one that continues another
    /// begins before the first sequence its Hello names.
    func testANewStreamBeginsBeforeItsFirstSequence() throws {
        var hello = WireFixtures.hello()
        hello.startSampleTime = 48_000
        XCTAssertEqual(StreamPosition.beginning(of: try ValidatedHello(hello)), StreamPosition(lastSequence: 0, endSampleTime: 48_000))
        hello.resumeFromSequence = 501
        hello.continues = .with { $0.streamID = Data(repeating: 9, count: 16); $0.firstSequence = 501 }
        XCTAssertEqual(StreamPosition.beginning(of: try ValidatedHello(hello)), StreamPosition(lastSequence: 500, endSampleTime: 48_000))
    }
}
