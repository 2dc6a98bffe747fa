import CaptureCore
import Foundation
import XCTest

/// A device that is lost after `loseAfter` frames, refuses `failedReopens` reopen attempts, then
/// comes back having missed `missedFrames` frames.
final class FlakyDevice: ReopenableSource {
    /// The loss it reports.
    static let unplugged = DeviceFailure(device: "test", activity: .using("capturing"), code: -19, reason: "capture device was unplugged")
    let format = StreamFormat.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16)
    let isRealTime = true
    private let loseAfter: Int64
    private var failedReopens: Int
    private let missedFrames: Int
    private let totalFrames: Int64
    private var position: Int64 = 0
    private var lost = false
    private(set) var reopenAttempts = 0

    init(loseAfter: Int64, failedReopens: Int, missedFrames: Int, totalFrames: Int64) {
        self.loseAfter = loseAfter
        self.failedReopens = failedReopens
        self.missedFrames = missedFrames
        self.totalFrames = totalFrames
    }

    func start() throws(CaptureError) {}
    func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        if lost { throw .deviceLost(DeviceFailure(device: "test", activity: .using("capturing"), code: -19, reason: "device is gone")) }
        if position == loseAfter, reopenAttempts == 0 {
            lost = true
            throw .deviceLost(Self.unplugged)
        }
        let limit = position < loseAfter ? loseAfter : totalFrames
        let count = Int(min(Int64(frameCapacity), limit - position))
        guard count > 0 else { return .endOfStream }
        for index in 0..<count {
            buffer.storeBytes(of: Int16(truncatingIfNeeded: position + Int64(index)).littleEndian, toByteOffset: index * 2, as: Int16.self)
        }
        position += Int64(count)
        return .frames(count)
    }
    func reopen() throws(CaptureError) -> Int {
        reopenAttempts += 1
        if failedReopens > 0 {
            failedReopens -= 1
            throw .openFailed("not back yet")
        }
        lost = false
        position += Int64(missedFrames)
        return missedFrames
    }
    func stop() {}
    func close() {}
}

final class ReopeningSourceTests: XCTestCase {
    func testALostDeviceIsReopenedAndTheOutageBecomesAGap() throws {
        let device = FlakyDevice(loseAfter: 1_600, failedReopens: 2, missedFrames: 2_400, totalFrames: 8_000)
        let events = EventLog()
        let source = ReopeningSource(device, initialDelay: 0.001, maximumDelay: 0.004) { events.append("\($0)") }
        let delivered = DeliveredBuffers()
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 64, bufferDuration: .milliseconds(100))) { delivered.append($0) }
        try queue.start()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)
        XCTAssertEqual(device.reopenAttempts, 3)
        let buffers = delivered.all
        XCTAssertEqual(buffers.map(\.framesLostBefore).reduce(0, +), 2_400, "the outage is one gap of the frames missed")
        let afterGap = try XCTUnwrap(buffers.first { $0.framesLostBefore > 0 })
        XCTAssertEqual(afterGap.sampleTime, 1_600 + 2_400, "the audio after the outage sits at its true position")
        let firstSample = Int16(bitPattern: UInt16(afterGap.bytes[0]) | UInt16(afterGap.bytes[1]) << 8)
        XCTAssertEqual(firstSample, Int16(truncatingIfNeeded: 4_000))
        XCTAssertEqual(queue.statistics.framesCaptured + queue.statistics.framesLost, 8_000)
        XCTAssertEqual(events.all.count, 4, "lost, two failed retries, reopened: \(events.all)")
        queue.dispose()
    }

    func testCancelEndsTheRetriesWithTheOriginalError() throws {
        let device = FlakyDevice(loseAfter: 800, failedReopens: .max, missedFrames: 0, totalFrames: 8_000)
        let source = ReopeningSource(device, initialDelay: 0.001, maximumDelay: 0.002)
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 4, bufferDuration: .milliseconds(100))) { _ in }
        try queue.start()
        XCTAssertTrue(waitUntil { device.reopenAttempts >= 3 })
        source.cancel()
        XCTAssertEqual(queue.waitForCompletion(), .failed(.deviceLost(FlakyDevice.unplugged)))
        XCTAssertEqual(queue.statistics.framesCaptured, 800, "what was captured before the loss was delivered")
        queue.dispose()
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [String] = []
    func append(_ event: String) { lock.withLock { events.append(event) } }
    var all: [String] { lock.withLock { events } }
}
