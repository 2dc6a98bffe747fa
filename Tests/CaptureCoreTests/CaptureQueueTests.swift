import CaptureCore
import Dispatch
import Foundation
import XCTest

/// Collects what the queue's callback receives, from the delivery thread.
final class DeliveredBuffers: @unchecked Sendable {
    struct Delivery {
        var sampleTime: Int64
        var hostTime: UInt64
        var frames: Int
        var framesLostBefore: Int
        var framesPausedBefore: Int = 0
        var bytes: [UInt8]
    }
    private let lock = NSLock()
    private var storage: [Delivery] = []

    func append(_ buffer: CapturedBuffer) {
        let delivery = Delivery(
            sampleTime: buffer.startTime.sampleTime, hostTime: buffer.startTime.hostTime,
            frames: buffer.packetCount, framesLostBefore: buffer.framesLostBefore, framesPausedBefore: buffer.framesPausedBefore,
            bytes: Array(buffer.bytes)
        )
        lock.withLock { storage.append(delivery) }
    }

    var all: [Delivery] { lock.withLock { storage } }
    var count: Int { lock.withLock { storage.count } }
}

/// A real-time source for tests: delivers a 16-bit mono ramp (sample i has value i mod 65536) at once,
/// without pacing, like ALSA's file plugin; a device that never waits for its reader.
final class RampSource: AudioSource {
    let format = StreamFormat.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16)
    let isRealTime: Bool
    let totalFrames: Int64
    private(set) var produced: Int64 = 0
    private(set) var startCount = 0
    private(set) var stopCount = 0
    private(set) var closed = false

    init(totalFrames: Int64, isRealTime: Bool = true) {
        self.totalFrames = totalFrames
        self.isRealTime = isRealTime
    }

    static func value(at frame: Int64) -> Int16 { Int16(truncatingIfNeeded: frame) }

    func start() throws(CaptureError) { startCount += 1 }
    func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        let count = Int(min(Int64(frameCapacity), totalFrames - produced))
        guard count > 0 else { return .endOfStream }
        for index in 0..<count {
            buffer.storeBytes(of: Self.value(at: produced + Int64(index)).littleEndian, toByteOffset: index * 2, as: Int16.self)
        }
        produced += Int64(count)
        return .frames(count)
    }
    func stop() { stopCount += 1 }
    func close() { closed = true }
}

/// Waits, polling, until `condition` holds or `seconds` pass.
func waitUntil(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        usleep(1_000)
    }
    return true
}

final class CaptureQueueTests: XCTestCase {
    func testToneArrivesSampleExactAndContiguous() throws {
        let settings = ToneSource.Settings(frequency: 1_000, levelDBFS: -6, sampleRate: 8_000, channels: 2, sample: .s16, duration: .seconds(1.3), paced: false)
        let source = try ToneSource(settings: settings)
        let reference = try ToneSource(settings: settings)
        let delivered = DeliveredBuffers()
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(100))) { delivered.append($0) }
        XCTAssertEqual(queue.framesPerBuffer, 800)
        XCTAssertEqual(queue.bufferByteSize, 3_200)
        try queue.start()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)

        let buffers = delivered.all
        XCTAssertEqual(buffers.map(\.frames).reduce(0, +), 10_400)
        XCTAssertEqual(buffers.count, 13)
        var expectedStart: Int64 = 0
        for buffer in buffers {
            XCTAssertEqual(buffer.sampleTime, expectedStart)
            XCTAssertEqual(buffer.framesLostBefore, 0)
            expectedStart += Int64(buffer.frames)
        }
        // Host times never go backwards.
        XCTAssertEqual(buffers.map(\.hostTime), buffers.map(\.hostTime).sorted())

        var expected = [UInt8](repeating: 0, count: 10_400 * 4)
        expected.withUnsafeMutableBytes { bytes in
            _ = try? reference.read(into: bytes, frameCapacity: 10_400)
        }
        XCTAssertEqual(buffers.flatMap(\.bytes), expected)
        // Spot check against the formula: frame 2 of a 1 kHz tone at 8 kHz is at +90 degrees.
        let peak = Int16(bitPattern: UInt16(expected[8]) | UInt16(expected[9]) << 8)
        XCTAssertEqual(peak, 16_422, "-6 dBFS is 10^(-6/20) = 0.50119 of full scale 32767")
        XCTAssertEqual(queue.statistics.framesCaptured, 10_400)
        XCTAssertEqual(queue.statistics.buffersDelivered, 13)
        XCTAssertEqual(queue.statistics.overruns, 0)
        queue.dispose()
    }

    func testStopWithoutImmediateDeliversQueuedBuffers() throws {
        try assertStop(immediate: false, expectedDeliveries: 3)
    }

    func testImmediateStopDropsQueuedBuffers() throws {
        try assertStop(immediate: true, expectedDeliveries: 1)
    }

    /// The first buffer's callback is held while the two other buffers fill; then the queue stops.
    private func assertStop(immediate: Bool, expectedDeliveries: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let source = RampSource(totalFrames: .max, isRealTime: false)
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let delivered = DeliveredBuffers()
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(50))) { buffer in
            delivered.append(buffer)
            if delivered.count == 1 {
                entered.signal()
                release.wait()
            }
        }
        try queue.start()
        entered.wait()
        XCTAssertTrue(waitUntil { queue.statistics.framesCaptured == 3 * 400 }, "the spare buffers fill", file: file, line: line)
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            queue.stop(immediate: immediate)
            stopped.signal()
        }
        // stop waits for the queue to finish, which needs the held callback to return.
        XCTAssertEqual(stopped.wait(timeout: .now() + 0.2), .timedOut, file: file, line: line)
        release.signal()
        stopped.wait()
        XCTAssertEqual(delivered.count, expectedDeliveries, file: file, line: line)
        XCTAssertEqual(delivered.all.map(\.sampleTime), (0..<Int64(expectedDeliveries)).map { $0 * 400 }, file: file, line: line)
        XCTAssertEqual(queue.waitForCompletion(), .stopped, file: file, line: line)
        XCTAssertFalse(queue.isRunning)
        XCTAssertThrowsError(try queue.start(), file: file, line: line)
        queue.dispose()
        XCTAssertTrue(source.closed, file: file, line: line)
    }

    func testPauseStopsTheSourceAndResumeContinuesTheTimeline() throws {
        let source = RampSource(totalFrames: .max, isRealTime: false)
        let delivered = DeliveredBuffers()
        let gate = DispatchSemaphore(value: 0)
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(50))) { buffer in
            delivered.append(buffer)
            gate.wait()  // the test lets each buffer through one at a time
        }
        try queue.start()
        gate.signal()
        XCTAssertTrue(waitUntil { delivered.count == 2 })
        queue.pause()
        // Let everything captured before the pause drain; the source must then be stopped.
        for _ in 0..<10 { gate.signal() }
        XCTAssertTrue(waitUntil { source.stopCount == 1 })
        XCTAssertTrue(waitUntil { queue.statistics.buffersDelivered == Int64(delivered.count) && delivered.count * 400 == Int(queue.statistics.framesCaptured) })
        let deliveredWhilePaused = delivered.count
        XCTAssertFalse(queue.isRunning)

        try queue.resume()
        XCTAssertTrue(waitUntil { source.startCount == 2 })
        for _ in 0..<3 { gate.signal() }
        XCTAssertTrue(waitUntil { delivered.count >= deliveredWhilePaused + 2 })
        XCTAssertTrue(queue.isRunning)
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            queue.stop(immediate: true)
            stopped.signal()
        }
        // Keep the gate open until the stop has gone through: a callback already running may need
        // one more signal after the drop flag is set.
        while stopped.wait(timeout: .now() + .milliseconds(5)) == .timedOut { gate.signal() }
        XCTAssertEqual(queue.waitForCompletion(), .stopped)
        // Pausing is not a loss: the timeline stays contiguous.
        var expected: Int64 = 0
        for buffer in delivered.all {
            XCTAssertEqual(buffer.sampleTime, expected)
            XCTAssertEqual(buffer.framesLostBefore, 0)
            expected += Int64(buffer.frames)
        }
        XCTAssertEqual(queue.statistics.overruns, 0)
        queue.dispose()
    }

    /// A real-time source read one buffer at a time, when the test allows it; says how often it was
    /// started and stopped.
    private final class GatedRealTimeSource: AudioSource, @unchecked Sendable {
        let format = StreamFormat.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16)
        let isRealTime = true
        let readAllowed = DispatchSemaphore(value: 0)
        private let lock = NSLock()
        private var counts = (reads: 0, starts: 0, stops: 0)

        var readsEntered: Int { lock.withLock { counts.reads } }
        var stops: Int { lock.withLock { counts.stops } }
        var starts: Int { lock.withLock { counts.starts } }

        func start() throws(CaptureError) { lock.withLock { counts.starts += 1 } }
        func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
            lock.withLock { counts.reads += 1 }
            readAllowed.wait()
            for index in 0..<(frameCapacity * 2) { buffer[index] = UInt8(truncatingIfNeeded: index) }
            return .frames(frameCapacity)
        }
        func stop() { lock.withLock { counts.stops += 1 } }
        func close() {}
    }

    /// A paused real-time queue reports the pause as it goes: empty buffers, each starting where the
    /// pause so far ends, then the first buffer after the resume reports the rest; a stop during a
    /// pause reports it up to the stop. The timeline stays whole, and `buffersDelivered` counts
    /// only buffers that hold frames.
    func testAPausedRealTimeQueueReportsThePauseAsItGoesAndUpToAStop() throws {
        let source = GatedRealTimeSource()
        let delivered = DeliveredBuffers()
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(50))) { delivered.append($0) }
        defer { queue.dispose() }
        try queue.start()
        source.readAllowed.signal()
        source.readAllowed.signal()
        XCTAssertTrue(waitUntil(60) { delivered.count == 2 && source.readsEntered == 3 })
        queue.pause()
        source.readAllowed.signal()  // the third read returns; the capture thread then sees the pause
        XCTAssertTrue(waitUntil(60) { source.stops == 1 })
        let reports = { delivered.all.filter { $0.frames == 0 } }
        let audioBuffers = { delivered.all.filter { $0.frames > 0 }.count }
        XCTAssertTrue(waitUntil(60) { reports().count >= 3 }, "the pause is reported while it lasts")
        XCTAssertTrue(reports().allSatisfy { $0.framesPausedBefore > 0 && $0.framesLostBefore == 0 && $0.bytes.isEmpty })

        try queue.resume()
        XCTAssertTrue(waitUntil(60) { source.starts == 2 && source.readsEntered == 4 })
        source.readAllowed.signal()
        XCTAssertTrue(waitUntil(60) { audioBuffers() == 4 })

        // Paused again, then stopped while paused: the last report reaches the stop.
        XCTAssertTrue(waitUntil(60) { source.readsEntered == 5 })
        queue.pause()
        source.readAllowed.signal()
        XCTAssertTrue(waitUntil(60) { source.stops == 2 && audioBuffers() == 5 })
        XCTAssertTrue(waitUntil(60) { delivered.all.last?.frames == 0 }, "the second pause is reported too")
        queue.stop(immediate: false)
        XCTAssertEqual(queue.waitForCompletion(), .stopped)

        let all = delivered.all
        XCTAssertEqual(all.last?.frames, 0, "the stream ends with the pause, up to the stop")
        var expected: Int64 = 0
        for buffer in all {
            XCTAssertEqual(buffer.sampleTime, expected + Int64(buffer.framesPausedBefore), "the timeline goes on through the pause, without a hole or an overlap")
            XCTAssertEqual(buffer.framesLostBefore, 0)
            if buffer.frames > 0 { XCTAssertEqual(buffer.bytes.count, buffer.frames * 2) }
            expected = buffer.sampleTime + Int64(buffer.frames)
        }
        XCTAssertGreaterThan(all.reversed().prefix { $0.frames == 0 }.reduce(0) { $0 + $1.framesPausedBefore }, 0, "the second pause is in the timeline")
        XCTAssertEqual(queue.statistics.buffersDelivered, Int64(all.filter { $0.frames > 0 }.count), "reports are not buffers of audio")
        XCTAssertEqual(queue.statistics.framesCaptured, Int64(all.reduce(0) { $0 + $1.frames }))
        XCTAssertEqual(queue.statistics.overruns, 0)
    }

    func testStalledConsumerCausesCountedOverrunsNotUnboundedMemory() throws {
        let total: Int64 = 400 * 200
        let source = RampSource(totalFrames: total, isRealTime: true)
        let delivered = DeliveredBuffers()
        let release = DispatchSemaphore(value: 0)
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(50))) { buffer in
            delivered.append(buffer)
            if delivered.count == 1 { release.wait() }  // the stall: a test seam in the consumer
        }
        try queue.start()
        // While the consumer stalls, the device keeps producing: the whole ramp gets read.
        XCTAssertTrue(waitUntil { source.produced == total })
        release.signal()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)

        let buffers = delivered.all
        let stats = queue.statistics
        let deliveredFrames = Int64(buffers.map(\.frames).reduce(0, +))
        XCTAssertGreaterThanOrEqual(stats.overruns, 1)
        XCTAssertEqual(deliveredFrames + stats.framesLost, total, "every frame is either delivered or counted as lost")
        XCTAssertEqual(stats.framesCaptured, deliveredFrames)
        // Losses before a delivered buffer are reported with it; a loss at the very end has no buffer
        // after it and shows as the distance from the last buffer's end to the stream's end.
        let lastEnd = (buffers.last.map { $0.sampleTime + Int64($0.frames) }) ?? 0
        XCTAssertEqual(Int64(buffers.map(\.framesLostBefore).reduce(0, +)) + (total - lastEnd), stats.framesLost)
        // Never more than the pool: the first buffer plus the two spares, then the rest lost.
        XCTAssertLessThanOrEqual(buffers.count, 3 + 1)
        // The timeline is honest: each buffer starts where the previous ended plus what was lost.
        var expected: Int64 = 0
        for buffer in buffers {
            expected += Int64(buffer.framesLostBefore)
            XCTAssertEqual(buffer.sampleTime, expected)
            let first = Int16(bitPattern: UInt16(buffer.bytes[0]) | UInt16(buffer.bytes[1]) << 8)
            XCTAssertEqual(first, RampSource.value(at: buffer.sampleTime), "the samples are the ones captured at that time")
            expected += Int64(buffer.frames)
        }
        queue.dispose()
    }

    /// A device for the tests of `framesBeforeOverrun`: the ramp of `RampSource`, delivered at once,
    /// with the free room of its ring buffer given by `room` (called with the seconds since the last
    /// read), counting how often the queue asks.
    final class RoomReportingSource: AudioSource, @unchecked Sendable {
        let ramp: RampSource
        private let room: @Sendable (Double) -> Int
        private let lock = NSLock()
        private var asked = 0
        private var lastRead = Date()

        init(totalFrames: Int64, room: @escaping @Sendable (Double) -> Int) {
            ramp = RampSource(totalFrames: totalFrames, isRealTime: true)
            self.room = room
        }

        var format: StreamFormat { ramp.format }
        var isRealTime: Bool { true }
        var asks: Int { lock.withLock { asked } }
        func start() throws(CaptureError) { try ramp.start() }
        func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
            lock.withLock { lastRead = Date() }
            return try ramp.read(into: buffer, frameCapacity: frameCapacity)
        }
        func framesBeforeOverrun() -> Int? {
            let since = lock.withLock { () -> Double in
                asked += 1
                return Date().timeIntervalSince(lastRead)
            }
            return room(since)
        }
        func stop() { ramp.stop() }
        func close() { ramp.close() }
    }

    func testAStalledConsumerLosesNothingWhileTheDeviceStillHasRoom() throws {
        // 0.05 s buffers at 8 kHz are 400 frames; the device's ring buffer always has room for 100.
        let framesPerBuffer = 400
        let total = Int64(20 * framesPerBuffer)
        let source = RoomReportingSource(totalFrames: total) { _ in 100 * framesPerBuffer }
        let delivered = DeliveredBuffers()
        let release = DispatchSemaphore(value: 0)
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(50))) { buffer in
            delivered.append(buffer)
            if delivered.count == 1 { release.wait() }  // the stall: a test seam in the consumer
        }
        XCTAssertEqual(queue.framesPerBuffer, framesPerBuffer)
        try queue.start()
        // Every buffer is in use: the capture thread asks the device how much room it has left.
        XCTAssertTrue(waitUntil { source.asks >= 1 })
        release.signal()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)

        let statistics = queue.statistics
        XCTAssertEqual(statistics.overruns, 0, "the audio waited in the device, not in a scratch buffer")
        XCTAssertEqual(statistics.framesLost, 0)
        XCTAssertEqual(statistics.framesCaptured, total)
        var expected: Int64 = 0
        for buffer in delivered.all {
            XCTAssertEqual(buffer.framesLostBefore, 0)
            XCTAssertEqual(buffer.sampleTime, expected)
            for frame in 0..<buffer.frames {
                let sample = Int16(bitPattern: UInt16(buffer.bytes[2 * frame]) | UInt16(buffer.bytes[2 * frame + 1]) << 8)
                XCTAssertEqual(sample, RampSource.value(at: expected + Int64(frame)))
            }
            expected += Int64(buffer.frames)
        }
        XCTAssertEqual(expected, total, "every frame reached the callback, in order")
        queue.dispose()
    }

    func testAStalledConsumerStillCostsCountedLossOnceTheDeviceRunsOutOfRoom() throws {
        // A ring buffer of 3 periods that fills at 8 kHz from the last read on: the queue may wait
        // while more than a period is free, then must drain it, so the device itself never overruns.
        let framesPerBuffer = 400
        let total = Int64(12 * framesPerBuffer)
        let source = RoomReportingSource(totalFrames: total) { seconds in
            max(0, 3 * framesPerBuffer - framesPerBuffer - Int(seconds * 8_000))
        }
        let delivered = DeliveredBuffers()
        let release = DispatchSemaphore(value: 0)
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(50))) { buffer in
            delivered.append(buffer)
            if delivered.count == 1 { release.wait() }
        }
        try queue.start()
        // The consumer stays stalled until the device has been read to its end: the queue waited
        // each time no more than the room lasted, then drained and counted the loss.
        XCTAssertTrue(waitUntil { source.ramp.produced == total }, "the queue never waits past the device's room")
        release.signal()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)

        let statistics = queue.statistics
        let deliveredFrames = Int64(delivered.all.map(\.frames).reduce(0, +))
        XCTAssertGreaterThanOrEqual(statistics.overruns, 1)
        XCTAssertGreaterThan(statistics.framesLost, 0)
        XCTAssertEqual(deliveredFrames + statistics.framesLost, total, "every frame is either delivered or counted as lost")
        XCTAssertGreaterThanOrEqual(source.asks, 1, "the queue looked at the device's room before draining it")
        queue.dispose()
    }

    func testBuffersReadWhileCatchingUpAreAllHandedOnBeforeTheSourceWaits() throws {
        // A device with a backlog: the first `backlog` buffers are already in its ring (reads return
        // at once and it says so), then it is in step with real time: the next read waits.
        final class CatchingUpSource: AudioSource, @unchecked Sendable {
            let format = StreamFormat.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16)
            let isRealTime = true
            let backlog: Int
            let released = DispatchSemaphore(value: 0)
            private var reads = 0
            private var produced: Int64 = 0

            init(backlog: Int) { self.backlog = backlog }

            func start() throws(CaptureError) {}
            func canReadWithoutWaiting(frames: Int) -> Bool { reads < backlog }
            func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
                if reads == backlog { released.wait() }
                if reads > backlog { return .endOfStream }
                reads += 1
                for index in 0..<frameCapacity {
                    buffer.storeBytes(of: RampSource.value(at: produced + Int64(index)).littleEndian, toByteOffset: index * 2, as: Int16.self)
                }
                produced += Int64(frameCapacity)
                return .frames(frameCapacity)
            }
            func stop() {}
            func close() {}
        }
        let backlog = 7
        let source = CatchingUpSource(backlog: backlog)
        let delivered = DeliveredBuffers()
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 4, bufferDuration: .milliseconds(10))) { delivered.append($0) }
        try queue.start()
        let backlogFrames = Int64(backlog * queue.framesPerBuffer)
        // The source now waits in its read: nothing read before may be left waiting with it.
        XCTAssertTrue(waitUntil {
            Int64(delivered.all.map(\.frames).reduce(0, +)) + queue.statistics.framesLost == backlogFrames
        }, "every buffer of the backlog reached the callback (or was counted lost) while the source waited")
        source.released.signal()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)
        var expected: Int64 = 0
        for buffer in delivered.all {
            expected += Int64(buffer.framesLostBefore)
            XCTAssertEqual(buffer.sampleTime, expected)
            let first = Int16(bitPattern: UInt16(buffer.bytes[0]) | UInt16(buffer.bytes[1]) << 8)
            XCTAssertEqual(first, RampSource.value(at: buffer.sampleTime))
            expected += Int64(buffer.frames)
        }
        XCTAssertEqual(expected + Int64(queue.statistics.framesLost) - Int64(delivered.all.map(\.framesLostBefore).reduce(0, +)),
                       backlogFrames + Int64(queue.framesPerBuffer), "the whole timeline is accounted for")
        queue.dispose()
    }

    func testConfigurationIsValidated() throws {
        XCTAssertThrowsError(try CaptureQueue(source: RampSource(totalFrames: 1), configuration: .init(bufferCount: 1, bufferDuration: .milliseconds(100))) { _ in }) { error in
            XCTAssertEqual((error as? CaptureError)?.description, "the queue needs 2 to 64 buffers, not 1")
        }
        let refused: [(duration: Duration, message: String)] = [
            (.zero, "the buffer duration must be greater than 0 s, not 0.0 s"),
            (.milliseconds(-500), "the buffer duration must be greater than 0 s, not -0.5 s"),
            (.seconds(-1), "the buffer duration must be greater than 0 s, not -1.0 s"),
            (.nanoseconds(-1), "the buffer duration must be greater than 0 s, not -1e-09 s"),
        ]
        for row in refused {
            XCTAssertThrowsError(try CaptureQueue(source: RampSource(totalFrames: 1), configuration: .init(bufferCount: 3, bufferDuration: row.duration)) { _ in }) { error in
                XCTAssertEqual((error as? CaptureError)?.description, row.message, "\(row.duration)")
            }
        }
        let shortest = try CaptureQueue(source: RampSource(totalFrames: 1), configuration: .init(bufferCount: 3, bufferDuration: .nanoseconds(1))) { _ in }
        XCTAssertEqual(shortest.framesPerBuffer, 1, "a buffer holds at least one frame")
        shortest.dispose()
        XCTAssertEqual(CaptureQueue.Configuration().bufferDuration, .milliseconds(500))
        XCTAssertThrowsError(try ToneSource(settings: .init(frequency: 30_000, sampleRate: 48_000))) { error in
            XCTAssertTrue("\(error)".contains("below half the sample rate"))
        }
    }
}
