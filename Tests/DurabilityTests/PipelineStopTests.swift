import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// What the stream records when capture is stopped at once (`stop(immediate: true)`, as when the
/// receiver refuses the stream or delivery is abandoned) while a captured buffer is still queued.
final class PipelineStopTests: XCTestCase {
    /// A source that hands out two buffers at once, then nothing (polling) until the queue stops it.
    private final class TwoBufferSource: AudioSource, @unchecked Sendable {
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
        let isRealTime = false
        private let lock = NSLock()
        private var reads = 0
        private var stopped = false

        var readCount: Int { lock.withLock { reads } }
        var wasStopped: Bool { lock.withLock { stopped } }

        func start() throws(CaptureError) {}

        func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
            let count = lock.withLock { () -> Int in
                reads += 1
                return reads
            }
            if count <= 2 {
                for index in 0..<(frameCapacity * 4) { buffer[index] = UInt8(truncatingIfNeeded: index) }
                return .frames(frameCapacity)
            }
            usleep(5_000)
            return .frames(0)
        }

        func stop() { lock.withLock { stopped = true } }
        func close() {}
    }

    func testBuffersDroppedByAnImmediateStopAreNotRecordedAsAnOverrunGap() throws {
        let source = TwoBufferSource()
        let log = PacketLog(producerIsRealTime: true)
        let pipeline = try CapturePipeline(
            source: source, encoder: try PCMEncoder(inputFormat: source.format),
            configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(500)), log: log)
        // The first buffer's packets reach the log; the delivery thread is held there while the
        // second buffer waits in the queue.
        let holdDelivery = DispatchSemaphore(value: 0)
        let firstAppended = DispatchSemaphore(value: 0)
        let holding = log.addListener {
            firstAppended.signal()
            holdDelivery.wait()
        }
        try pipeline.start()
        XCTAssertEqual(firstAppended.wait(timeout: .now() + 30), .success)
        let deadline = Date().addingTimeInterval(30)
        while source.readCount < 3, Date() < deadline { usleep(1_000) }
        XCTAssertGreaterThanOrEqual(source.readCount, 3, "the second buffer was captured and queued")
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            pipeline.queue.stop(immediate: true)
            stopped.signal()
        }
        // The capture thread stops the source only after the stop request (which drops the queue).
        while !source.wasStopped, Date() < deadline { usleep(1_000) }
        XCTAssertTrue(source.wasStopped)
        log.removeListener(holding)
        holdDelivery.signal()
        XCTAssertEqual(stopped.wait(timeout: .now() + 30), .success)
        _ = pipeline.waitAndFinish()

        let entries = try log.entries(from: 1, maxCount: 100)
        XCTAssertEqual(entries.count, 1, "the delivered buffer only: \(entries)")
        guard case .audio(let packets)? = entries.first?.content else { return XCTFail("audio first") }
        XCTAssertEqual(packets.frameCount, 24_000)
        XCTAssertEqual(log.streamEnd?.position.endSampleTime, 24_000, "the stream ends after the last buffer delivered")
        XCTAssertEqual(pipeline.queue.statistics.overruns, 0)
        pipeline.queue.dispose()
    }
}
