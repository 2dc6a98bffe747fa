import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureWire
import Foundation
import XCTest

/// A pause of a real-time capture is recorded as what it is, a gap with reason `paused` covering the
/// time it lasted, so the timeline keeps wall-clock positions in every encoding: for PCM a Gap, for
/// Opus (whose packets cannot skip time) encoded silence, encoded as the pause lasts, labelled by a
/// filled gap at the same sample time. Markers dropped meanwhile keep their place. Every entry is
/// checked against the receiver's own rules (`ReceiverStreamState`).
///
/// The source hands out one buffer each time the test allows it, so the test knows exactly which
/// buffers were captured before the pause and which after.
final class PipelinePauseTests: XCTestCase {
    /// A real-time source whose reads wait for the test's permission, and that says when it was stopped.
    private final class GatedSource: AudioSource, @unchecked Sendable {
        let format: StreamFormat
        let isRealTime = true
        let readAllowed = DispatchSemaphore(value: 0)
        let stopped = DispatchSemaphore(value: 0)
        private let condition = NSCondition()
        private var ending = false
        private var readsEntered = 0

        /// Waits until the capture thread has entered its `count`th read (and waits in it).
        func waitUntilReading(_ count: Int) -> Bool {
            let deadline = Date().addingTimeInterval(60)
            return condition.withLock {
                while readsEntered < count {
                    guard condition.wait(until: deadline) else { return false }
                }
                return true
            }
        }

        init(format: StreamFormat) { self.format = format }

        /// The next read ends the stream.
        func end() {
            condition.withLock { ending = true }
            readAllowed.signal()
        }

        func start() throws(CaptureError) {}

        func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
            condition.withLock {
                readsEntered += 1
                condition.broadcast()
            }
            readAllowed.wait()
            if condition.withLock({ ending }) { return .endOfStream }
            for index in 0..<(frameCapacity * Int(format.bytesPerFrame)) { buffer[index] = UInt8(truncatingIfNeeded: index) }
            return .frames(frameCapacity)
        }

        func stop() { stopped.signal() }
        func close() {}
    }

    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
    private static let framesPerBuffer = 4_800

    /// Waits until the log holds `count` entries.
    private func waitForEntries(_ log: PacketLog, _ count: UInt64, file: StaticString = #filePath, line: UInt = #line) {
        let arrived = DispatchSemaphore(value: 0)
        let token = log.addListener { if log.lastSequence >= count { arrived.signal() } }
        defer { log.removeListener(token) }
        if log.lastSequence >= count { return }
        XCTAssertEqual(arrived.wait(timeout: .now() + 60), .success, "the log never held \(count) entries", file: file, line: line)
    }

    /// Runs: 3 buffers, a pause, a marker while paused, `whilePaused`, then resume, 2 buffers and the
    /// end (or, with `stopWhilePaused`, a stop while paused).
    private func run(
        encoder: any AudioEncoder, stopWhilePaused: Bool = false, whilePaused: (PacketLog) -> Void = { _ in }
    ) throws -> (entries: [LoggedPacket], end: StreamEnd, pausedAtMost: Double, pipeline: CapturePipeline) {
        let source = GatedSource(format: format)
        let log = PacketLog(producerIsRealTime: true)
        let pipeline = try CapturePipeline(
            source: source, encoder: encoder, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(100)), log: log)
        defer { pipeline.queue.dispose() }
        try pipeline.start()
        source.readAllowed.signal()
        source.readAllowed.signal()
        waitForEntries(log, 2)
        XCTAssertTrue(source.waitUntilReading(3), "the capture thread never started its third read")
        let pauseCalled = MonotonicClock.nanoseconds()
        pipeline.queue.pause()
        // The capture thread waits in its third read: it sees the pause once that read returns.
        source.readAllowed.signal()
        XCTAssertEqual(source.stopped.wait(timeout: .now() + 60), .success, "the source was never stopped for the pause")
        // Capture is paused now, and the encoder has had the third buffer once it is logged.
        waitForEntries(log, 3)
        let before = log.lastSequence
        XCTAssertEqual(log.appendMarker(label: "while paused"), before + 1)
        // The pause under test lasts a little: its length is what is checked, not a wait for something.
        Thread.sleep(forTimeInterval: 0.05)
        whilePaused(log)
        if stopWhilePaused {
            pipeline.queue.stop(immediate: false)
            let pausedAtMost = Double(MonotonicClock.nanoseconds() - pauseCalled) / 1e9
            _ = try pipeline.waitAndFinish().get()
            return (try log.entries(from: 1, maxCount: 10_000), try XCTUnwrap(log.streamEnd), pausedAtMost, pipeline)
        }
        try pipeline.queue.resume()
        source.readAllowed.signal()
        source.readAllowed.signal()
        // Both buffers after the pause are captured before the source is told to end.
        let deadline = Date().addingTimeInterval(60)
        while pipeline.queue.statistics.framesCaptured < 5 * Int64(Self.framesPerBuffer), Date() < deadline { usleep(1_000) }
        XCTAssertEqual(pipeline.queue.statistics.framesCaptured, 5 * Int64(Self.framesPerBuffer), "the two buffers after the pause were never captured")
        let pausedAtMost = Double(MonotonicClock.nanoseconds() - pauseCalled) / 1e9
        source.end()
        _ = try pipeline.waitAndFinish().get()
        return (try log.entries(from: 1, maxCount: 10_000), try XCTUnwrap(log.streamEnd), pausedAtMost, pipeline)
    }

    func testAPCMPauseIsAGapOfThePausedTimeAndTheReceiverAcceptsIt() throws {
        let run = try run(encoder: try PCMEncoder(inputFormat: format))
        let frames = Int64(Self.framesPerBuffer)
        guard run.entries.count == 7 else {
            return XCTFail("expected 3 buffers, a marker, a pause gap and 2 buffers: \(run.entries.map { "\($0.firstSampleTime)..<\($0.endSampleTime)" })")
        }
        XCTAssertEqual(run.entries[3].content, .marker(sampleTime: 3 * frames, label: "while paused"), "the marker stands where capture paused")
        guard case .gap(let start, let length, let reason) = run.entries[4].content else { return XCTFail("no gap after the pause at \(run.entries[4].firstSampleTime)") }
        XCTAssertEqual(reason, "paused")
        XCTAssertEqual(start, 3 * frames, "the pause begins where the audio before it ends")
        XCTAssertGreaterThanOrEqual(length, 48_000 * 50 / 1_000, "the pause lasted at least the 50 ms the test held it")
        XCTAssertLessThanOrEqual(Double(length) / 48_000, run.pausedAtMost, "no longer than from pause() to the audio after it")
        guard case .audio(let after) = run.entries[5].content else { return XCTFail("no audio after the gap, at \(run.entries[5].firstSampleTime)") }
        XCTAssertEqual(after.firstSampleTime, start + length, "the audio after the pause starts where the gap ends")
        XCTAssertEqual(run.end.position.endSampleTime, start + length + 2 * frames)
        try assertReceiverAccepts(run.entries, end: run.end, pipeline: run.pipeline)
    }

    func testAnOpusPauseIsSilenceEncodedAsItLastsAndLabelledAtTheSameSampleTime() throws {
        let frames = Int64(Self.framesPerBuffer)
        // While paused, the log grows: the pause's silence is encoded as it lasts (0.3 s of it here).
        let run = try run(encoder: try OpusEncoder(inputFormat: format)) { log in
            self.waitUntil(log, "the pause's silence is logged while paused") { ($0.last?.endSampleTime ?? 0) >= 3 * frames + 14_400 }
        }
        XCTAssertFalse(run.entries.contains { if case .gap = $0.content { return true } else { return false } }, "Opus packets cannot skip time")
        var position: Int64?
        for entry in run.entries {
            if let position { XCTAssertEqual(entry.firstSampleTime, position, "the timeline has no hole") }
            position = entry.endSampleTime
        }
        XCTAssertTrue(run.entries.contains { $0.content == .marker(sampleTime: $0.firstSampleTime, label: "while paused") })
        let filled = run.entries.compactMap { entry -> (position: Int64, start: Int64, length: Int64, reason: String)? in
            if case .filledGap(let position, let start, let length, let reason) = entry.content { return (position, start, length, reason) }
            return nil
        }
        guard filled.count == 1, let pause = filled.first else { return XCTFail("one filled gap for the pause: \(filled)") }
        XCTAssertEqual(pause.reason, "paused")
        XCTAssertEqual(pause.start, 3 * frames, "where PCM's gap stands: where the audio before the pause ends")
        XCTAssertGreaterThanOrEqual(pause.position, pause.start, "logged once the packets reach it")
        XCTAssertGreaterThanOrEqual(pause.length, 14_400, "the pause lasted at least the 0.3 s of silence seen while paused")
        XCTAssertLessThanOrEqual(Double(pause.length) / 48_000, run.pausedAtMost)
        let audioFrames = run.entries.reduce(Int64(0)) { total, entry in
            if case .audio(let packets) = entry.content { return total + Int64(packets.frameCount) }
            return total
        }
        XCTAssertEqual(
            audioFrames - Int64(run.pipeline.primingFrames) - Int64(run.end.remainderFrames), 5 * frames + pause.length,
            "the decoded stream is the capture with the pause in it: wall-clock positions, as PCM")
        try assertReceiverAccepts(run.entries, end: run.end, pipeline: run.pipeline)
    }

    func testAPCMPauseThatAStopEndsIsATrailingGapUpToTheStop() throws {
        let frames = Int64(Self.framesPerBuffer)
        let run = try run(encoder: try PCMEncoder(inputFormat: format), stopWhilePaused: true)
        guard case .gap(let start, let length, let reason)? = run.entries.last?.content else {
            return XCTFail("the stream ends with the pause's gap: \(run.entries.map(\.content))")
        }
        XCTAssertEqual(reason, "paused")
        XCTAssertEqual(start, 3 * frames)
        XCTAssertGreaterThanOrEqual(length, 2_400, "at least the 50 ms the test held the pause")
        XCTAssertLessThanOrEqual(Double(length) / 48_000, run.pausedAtMost)
        XCTAssertEqual(run.end.position.endSampleTime, start + length, "the stream ends when it was stopped")
        try assertReceiverAccepts(run.entries, end: run.end, pipeline: run.pipeline)
    }

    func testAnOpusPauseThatAStopEndsIsSilenceUpToTheStop() throws {
        let frames = Int64(Self.framesPerBuffer)
        let run = try run(encoder: try OpusEncoder(inputFormat: format), stopWhilePaused: true)
        let filled = run.entries.compactMap { entry -> (start: Int64, length: Int64, reason: String)? in
            if case .filledGap(_, let start, let length, let reason) = entry.content { return (start, length, reason) }
            return nil
        }
        guard filled.count == 1, let (start, length, reason) = filled.first else { return XCTFail("one filled gap for the pause: \(filled)") }
        XCTAssertEqual(reason, "paused")
        XCTAssertEqual(start, 3 * frames)
        XCTAssertGreaterThanOrEqual(length, 2_400)
        let audioFrames = run.entries.reduce(Int64(0)) { total, entry in
            if case .audio(let packets) = entry.content { return total + Int64(packets.frameCount) }
            return total
        }
        XCTAssertEqual(audioFrames - Int64(run.pipeline.primingFrames) - Int64(run.end.remainderFrames), start + length)
        try assertReceiverAccepts(run.entries, end: run.end, pipeline: run.pipeline)
    }

    /// Waits until the log's entries satisfy `condition`.
    private func waitUntil(_ log: PacketLog, _ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: @escaping @Sendable ([LoggedPacket]) -> Bool) {
        let met = DispatchSemaphore(value: 0)
        let check: @Sendable () -> Bool = { (try? log.entries(from: 1, maxCount: 10_000)).map(condition) ?? false }
        let token = log.addListener { if check() { met.signal() } }
        defer { log.removeListener(token) }
        if check() { return }
        XCTAssertEqual(met.wait(timeout: .now() + 60), .success, "never: \(what)", file: file, line: line)
    }

    private func assertReceiverAccepts(_ entries: [LoggedPacket], end: StreamEnd, pipeline: CapturePipeline) throws {
        var receiver = ReceiverStreamState()
        try receiver.receivePreamble(version: WireProtocol.version)
        _ = try receiver.receive(.hello(.with {
            $0.protocolVersion = UInt32(WireProtocol.version)
            $0.streamID = UUID().wireBytes
            $0.streamName = "pause-test"
            $0.format = Capture_V1_StreamFormat(pipeline.outputFormat)
            $0.magicCookie = Data(pipeline.magicCookie)
            $0.primingFrames = UInt32(pipeline.primingFrames)
        }))
        try receiver.accept(resumingAt: StreamPosition(nextSequence: WireProtocol.firstSequence, nextSampleTime: 0))
        for entry in entries {
            XCTAssertNoThrow(try receiver.receive(entry.wireMessage), "sequence \(entry.sequence) at \(entry.firstSampleTime)")
        }
        XCTAssertNoThrow(try receiver.receive(.endOfStream(.with {
            $0.lastSequence = entries.last?.sequence ?? 0
            $0.endSampleTime = end.position.endSampleTime
            $0.remainderFrames = UInt32(end.remainderFrames)
        })))
    }
}
