@testable import CaptureReceiver
import Foundation
import XCTest

/// A lane runs its operations by priority, in order within each: a round's steps first, then the
/// streams' own operations, then opening new streams. So a burst of slow opens holds back neither
/// the streams already recording nor a round, and so no Ack.
final class WriterLaneTests: XCTestCase {
    func testJobsRunByPriorityAndInTheirOrderWithinEach() {
        let lane = WriterLane(name: "test lane")
        defer { lane.stop() }
        let order = OrderRecorder()
        let running = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        lane.submit(.opening) {
            running.signal()
            release.wait()
            order.add("open A")
        }
        running.wait()  // the lane is busy with the first open
        lane.submit(.opening) { order.add("open B") }
        lane.submit(.opening) { order.add("open C") }
        lane.submit { order.add("write 1") }
        lane.submit(.round) { order.add("round take") }
        lane.submit { order.add("write 2") }
        lane.submit(.round) { order.add("round durable") }
        release.signal()
        lane.drain()
        XCTAssertEqual(order.values, ["open A", "round take", "round durable", "write 1", "write 2", "open B", "open C"])
    }

    func testAHigherPriorityJobCutsInBetweenTwoQueuedOnes() {
        let lane = WriterLane(name: "test lane")
        defer { lane.stop() }
        let order = OrderRecorder()
        let gate = DispatchSemaphore(value: 0)
        let firstRunning = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let writeRunning = DispatchSemaphore(value: 0)
        let releaseWrite = DispatchSemaphore(value: 0)
        lane.submit(.opening) { gate.wait() }
        lane.submit(.opening) {
            firstRunning.signal()
            release.wait()
            order.add("open 1")
        }
        lane.submit(.opening) { order.add("open 2") }
        gate.signal()
        firstRunning.wait()  // "open 1" runs, "open 2" waits in the same batch
        lane.submit {
            writeRunning.signal()
            releaseWrite.wait()
            order.add("write")
        }
        release.signal()
        writeRunning.wait()  // the write went ahead of "open 2"; a round's step now goes ahead of it too
        lane.submit(.round) { order.add("round take") }
        releaseWrite.signal()
        lane.drain()
        XCTAssertEqual(order.values, ["open 1", "write", "round take", "open 2"])
    }

    func testAStoppedLaneRunsJobsOnTheCallersThread() {
        let lane = WriterLane(name: "test lane")
        lane.stop()
        let order = OrderRecorder()
        lane.submit(.round) { order.add("late round") }
        lane.submit { order.add("late write") }
        XCTAssertEqual(order.values, ["late round", "late write"])
    }
}

/// What ran, in order (jobs run on the lane's thread).
private final class OrderRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String] = []
    func add(_ value: String) { lock.withLock { recorded.append(value) } }
    var values: [String] { lock.withLock { recorded } }
}
