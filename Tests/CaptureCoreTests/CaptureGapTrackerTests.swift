import CaptureCore
import XCTest

/// `CaptureGapTracker`: each row a sequence of deliveries (start, frames, lost before, paused
/// before) and the gaps they close, in order.
final class CaptureGapTrackerTests: XCTestCase {
    private func buffer(_ start: Int64, _ frames: Int, lost: Int = 0, paused: Int = 0) -> CapturedBuffer {
        CapturedBuffer(
            bytes: UnsafeRawBufferPointer(start: nil, count: 0), startTime: CaptureTimestamp(sampleTime: start, hostTime: 0),
            packetCount: frames, framesLostBefore: lost, framesPausedBefore: paused)
    }

    func testEachRow() {
        typealias Gap = CaptureGapTracker.Gap
        let rows: [(deliveries: [CapturedBuffer], gaps: [Gap], atFinish: [Gap], line: UInt)] = [
            // No loss, no pause.
            ([buffer(0, 100), buffer(100, 100)], [], [], #line),
            // An overrun before a buffer.
            ([buffer(0, 100), buffer(150, 100, lost: 50)], [.lost(start: 100, frames: 50)], [], #line),
            // A pause reported twice while it lasts, then the rest with the buffer after it: one gap.
            ([buffer(0, 100), buffer(130, 0, paused: 30), buffer(160, 0, paused: 30), buffer(170, 100, paused: 10)],
             [.paused(start: 100, frames: 70)], [], #line),
            // After the resume, the pause came before frames lost since.
            ([buffer(0, 100), buffer(160, 100, lost: 20, paused: 40)], [.paused(start: 100, frames: 40), .lost(start: 140, frames: 20)], [], #line),
            // In a report, frames lost came before the pause.
            ([buffer(0, 100), buffer(160, 0, lost: 20, paused: 40), buffer(160, 100)], [.lost(start: 100, frames: 20), .paused(start: 120, frames: 40)], [], #line),
            // A stop during a pause: the pause closes at the finish.
            ([buffer(0, 100), buffer(130, 0, paused: 30)], [], [.paused(start: 100, frames: 30)], #line),
            // A pause before any audio.
            ([buffer(25, 0, paused: 25), buffer(25, 100)], [.paused(start: 0, frames: 25)], [], #line),
        ]
        for row in rows {
            var tracker = CaptureGapTracker()
            var gaps: [Gap] = []
            for delivery in row.deliveries { gaps += tracker.take(delivery) }
            XCTAssertEqual(gaps, row.gaps, line: row.line)
            XCTAssertEqual(tracker.finish(), row.atFinish, line: row.line)
            XCTAssertEqual(tracker.finish(), [], "finished once", line: row.line)
        }
    }
}
