import CaptureALSA
import CaptureCore
import Dispatch
import TestSupport
import XCTest

/// `CaptureQueue` over `ALSASource`, the way capture-send and library users run it.
final class ALSAQueueTests: ALSATestCase {
    /// Opens the queue test PCM with 10 ms periods, as `--buffer-seconds 0.01 --buffers 3`.
    private func openQueueSource(_ pcm: ALSATestPCM, bufferDuration: Duration, bufferCount: Int = 3) throws -> ALSASource {
        let periodFrames = BufferSizing.framesPerBuffer(format: pcm.fixtureFormat, duration: bufferDuration)
        return try ALSASource(device: pcm.name, requested: pcm.fixtureFormat, periodFrames: periodFrames, bufferCount: bufferCount)
    }

    private func assertDeliveriesMatchFixture(_ deliveries: [ALSADeliveries.Delivery], fixture: [UInt8], bytesPerFrame: Int, file: StaticString = #filePath, line: UInt = #line) {
        for delivery in deliveries {
            let start = Int(delivery.sampleTime) * bytesPerFrame
            let end = start + delivery.frames * bytesPerFrame
            guard end <= fixture.count else { return XCTFail("buffer at \(delivery.sampleTime) runs past the fixture", file: file, line: line) }
            XCTAssertTrue(delivery.bytes == Array(fixture[start..<end]), "buffer at sample \(delivery.sampleTime) is not the fixture's audio there", file: file, line: line)
        }
    }

    func testQueueDeliversTheFixtureBitForBit() throws {
        for (pcm, bufferDuration) in [(ALSATestPCMs.queue, Duration.milliseconds(10)), (ALSATestPCMs.s24Mono44k, .milliseconds(30))] {
            let source = try openQueueSource(pcm, bufferDuration: bufferDuration)
            // Not real time: the file plugin is not paced, and exact equality needs the queue to wait
            // for its consumer rather than count overruns (the next test covers those).
            let harness = ALSAHarnessSource(source, frameLimit: pcm.fixtureFrames, isRealTime: false)
            let deliveries = ALSADeliveries()
            let queue = try CaptureQueue(source: harness, configuration: .init(bufferCount: 3, bufferDuration: bufferDuration)) { deliveries.append($0) }
            XCTAssertEqual(queue.format, pcm.fixtureFormat)
            XCTAssertEqual(queue.framesPerBuffer, source.negotiation.periodFrames)
            try queue.start()
            XCTAssertEqual(queue.waitForCompletion(), .endOfStream)
            queue.dispose()

            let all = deliveries.all
            XCTAssertTrue(all.flatMap(\.bytes) == configuration.fixture(pcm.name), "\(pcm.name): delivered audio differs from the fixture")
            var expected: Int64 = 0
            for delivery in all {
                XCTAssertEqual(delivery.sampleTime, expected)
                XCTAssertEqual(delivery.framesLostBefore, 0)
                expected += Int64(delivery.frames)
            }
            XCTAssertEqual(queue.statistics.framesCaptured, Int64(pcm.fixtureFrames))
            XCTAssertEqual(queue.statistics.overruns, 0)
            XCTAssertEqual(source.overrunCount, 0)
        }
    }

    func testStalledConsumerCausesCountedOverrunsWithAContinuousTimeline() throws {
        let pcm = ALSATestPCMs.queue
        let source = try openQueueSource(pcm, bufferDuration: .milliseconds(10))
        // Real time, as ALSASource says; the capture thread is held at 1 s so the test can let the
        // consumer go on while the source still has audio.
        let gateFrame = 48_000
        let harness = ALSAHarnessSource(source, frameLimit: pcm.fixtureFrames, isRealTime: source.isRealTime, gateAtFrame: gateFrame)
        XCTAssertTrue(harness.isRealTime)
        let deliveries = ALSADeliveries()
        let consumerReleased = DispatchSemaphore(value: 0)
        let firstCallback = ManagedFlag()
        let queue = try CaptureQueue(source: harness, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(10))) { buffer in
            deliveries.append(buffer)
            if firstCallback.setIfUnset() { consumerReleased.wait() }  // the stalled consumer
        }
        try queue.start()

        XCTAssertTrue(pollUntil { harness.isWaitingAtGate }, "the capture thread never reached 1 s of audio")
        let duringStall = queue.statistics
        XCTAssertGreaterThan(duringStall.overruns, 0)
        // One buffer is in the callback and two wait filled: everything else read so far is lost.
        XCTAssertEqual(duringStall.framesLost, Int64(gateFrame - 3 * queue.framesPerBuffer))
        consumerReleased.signal()
        // Once the third buffer reaches the callback the first two are back in the pool, so the
        // capture thread, let go, has somewhere to put the audio after the stall.
        XCTAssertTrue(pollUntil { deliveries.all.count >= 3 })
        harness.openGate()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)
        queue.dispose()

        let statistics = queue.statistics
        let all = deliveries.all
        let delivered = all.reduce(0) { $0 + $1.frames }
        XCTAssertGreaterThan(statistics.overruns, 0)
        XCTAssertEqual(Int64(delivered), statistics.framesCaptured)
        XCTAssertEqual(Int64(delivered) + statistics.framesLost, Int64(pcm.fixtureFrames), "lost frames must be exactly the frames not delivered")

        // The timeline counts lost frames: each buffer starts where the previous ended plus the gap.
        var expected: Int64 = 0
        var reportedLost: Int64 = 0
        for delivery in all {
            XCTAssertEqual(delivery.sampleTime, expected + Int64(delivery.framesLostBefore))
            reportedLost += Int64(delivery.framesLostBefore)
            expected = delivery.sampleTime + Int64(delivery.frames)
        }
        let lostAtTheEnd = Int64(pcm.fixtureFrames) - expected
        XCTAssertEqual(reportedLost + lostAtTheEnd, statistics.framesLost)
        XCTAssertEqual(all.dropFirst().first?.framesLostBefore, 0, "the two buffers filled before the stall follow on")
        // The read held at the gate had already been aimed at the scratch buffer, so the first
        // buffer after the stall starts one buffer after the gate, and reports the whole gap.
        let firstAfterStall = gateFrame + queue.framesPerBuffer
        XCTAssertEqual(all.dropFirst(3).first?.sampleTime, Int64(firstAfterStall))
        XCTAssertEqual(all.dropFirst(3).first?.framesLostBefore, firstAfterStall - 3 * queue.framesPerBuffer, "the first buffer after the stall reports the gap")
        // ...and the audio at each position is the fixture's audio there.
        assertDeliveriesMatchFixture(all, fixture: configuration.fixture(pcm.name), bytesPerFrame: 4)
        // Memory stays bounded: only the pool's three buffers ever reach the callback.
        XCTAssertLessThanOrEqual(Set(all.map(\.bufferAddress)).count, 3)
    }

    func testLibraryUsePauseAndResumeGiveContiguousAudio() throws {
        let pcm = ALSATestPCMs.queue
        let source = try openQueueSource(pcm, bufferDuration: .milliseconds(10))
        let frameLimit = 48_000
        let pauseFrame = 9_600
        let harness = ALSAHarnessSource(source, frameLimit: frameLimit, isRealTime: false, gateAtFrame: pauseFrame)
        let deliveries = ALSADeliveries()
        let queue = try CaptureQueue(source: harness, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(10))) { deliveries.append($0) }
        try queue.start()
        XCTAssertTrue(queue.isRunning)

        XCTAssertTrue(pollUntil { harness.isWaitingAtGate })
        queue.pause()
        harness.openGate()
        // The pause takes effect: the source is stopped and what was filled has been delivered.
        XCTAssertTrue(pollUntil { harness.stops == 1 && Int64(deliveries.frameCount) == queue.statistics.framesCaptured })
        XCTAssertFalse(queue.isRunning)
        let beforePause = deliveries.all
        let pausedAt = beforePause.reduce(0) { $0 + $1.frames }
        XCTAssertGreaterThanOrEqual(pausedAt, pauseFrame)

        try queue.resume()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)
        queue.stop(immediate: false)
        queue.dispose()
        XCTAssertEqual(harness.starts, 2, "started, then started again on resume")

        let all = deliveries.all
        let afterResume = Array(all.dropFirst(beforePause.count))
        XCTAssertFalse(afterResume.isEmpty)
        var expected: Int64 = 0
        for delivery in beforePause {
            XCTAssertEqual(delivery.sampleTime, expected, "before the pause")
            expected += Int64(delivery.frames)
        }
        for delivery in afterResume {
            XCTAssertEqual(delivery.sampleTime, expected, "after the resume")
            XCTAssertEqual(delivery.framesLostBefore, 0)
            expected += Int64(delivery.frames)
        }
        XCTAssertEqual(expected, Int64(frameLimit))
        // The device continues exactly where it left off: the audio is the fixture, unbroken.
        XCTAssertTrue(all.flatMap(\.bytes) == Array(configuration.fixture(pcm.name).prefix(frameLimit * 4)))
        XCTAssertEqual(queue.statistics.overruns, 0)
    }
}

/// A flag that one thread sets once.
private final class ManagedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var isSet = false

    /// Sets the flag; returns `true` only for the call that set it.
    func setIfUnset() -> Bool {
        lock.withLock {
            defer { isSet = true }
            return !isSet
        }
    }
}
