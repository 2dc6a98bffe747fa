import CaptureCodecs
import CaptureCore
import CaptureLocalCopy
import CaptureLoudness
import CaptureWire
import Foundation

/// The sending side's audio path before the network: a capture queue over a source, whose callback
/// runs the encoder and appends packets (and gaps, for overruns) to the packet log.
///
/// Overruns: for PCM, frames lost before a buffer become a Gap of exactly those frames at their
/// position, and a loss at the very end a trailing Gap. For Opus the encoder fills the lost stretch
/// with encoded silence (`AudioEncoder.fillsLostFrames`): the packets alone cover the capture
/// timeline, and a filled gap (`PacketLog.appendFilledGap`), logged once the packets reach the
/// stretch, labels it at the same sample time. A loss at the very end leaves nothing to cover (the
/// stream ends after its last captured frame) and nothing to label.
///
/// Pauses: a pause of a real-time source (`CaptureStreamer.pause()`) is recorded as what it is, a
/// gap with reason `paused` covering the time it lasted, so the file keeps wall-clock positions and
/// every encoding of a capture the same timeline: a Gap for PCM (a hole that costs nothing), for
/// Opus encoded silence labelled by a filled gap. The queue reports a pause as it goes (empty
/// buffers, see `CaptureQueue`), so Opus encodes the pause's silence as it lasts; one Gap or filled
/// gap covers the whole pause, logged when capture resumes or ends.
///
/// The queue's callback runs on its delivery thread, never on the capture thread, so the encoder
/// may allocate and the log may take its lock there.
///
/// Sendability (`@unchecked Sendable`): `lock` guards the mutable figures (failure, ends, level meters, the latest loudness); the encoder and the loudness meter run on the queue's delivery thread only (and in `waitAndFinish` once it has ended); the queue and the log are thread-safe.
public final class CapturePipeline: @unchecked Sendable {
    /// The queue, for its lifecycle (pause/resume/stop) and statistics.
    public let queue: CaptureQueue
    /// Where the packets go.
    public let log: PacketLog
    /// The encoder's output format, as the handshake describes it.
    public let outputFormat: StreamFormat
    /// The encoder's magic cookie.
    public let magicCookie: [UInt8]
    /// The encoder's priming frames.
    public let primingFrames: Int

    private let encoder: any AudioEncoder
    /// The safety copy on the unit, given every captured buffer before it is encoded; nil without one.
    public let localCopy: LocalCopy?
    /// The encoder fills frames lost to capture overruns with encoded silence (Opus), instead of
    /// the pipeline logging Gaps for them (PCM).
    public var fillsLostFrames: Bool { encoder.fillsLostFrames }
    private let lock = NSLock()
    private var failure: EncoderError?
    /// Sample index just past the last captured buffer (input timeline).
    private var lastEnd: Int64 = 0
    /// Sample index just past the last encoded packet (output timeline).
    private var lastOutputEnd: Int64 = 0
    /// Frames lost in overruns that a delivered buffer reported (`framesLostBefore`).
    private var reportedLost: Int64 = 0
    /// The pause being recorded (input timeline): logged as one gap when capture resumes or ends.
    /// Delivery thread only.
    private var openPause: (start: Int64, frames: Int64)?
    /// Filled gaps (output timeline) waiting for the packets logged to reach their start, in order.
    /// Delivery thread only.
    private var pendingFilledGaps: [(sampleTime: Int64, length: Int64, reason: String)] = []
    /// The levels for the status display: everything captured since `takeLevels()`.
    private var levels: LevelMeter
    /// The levels of the audio captured since the last packets were logged, sent with the next
    /// ones (AudioData `levels`); folded into `levels` when taken.
    private var packetLevels: LevelMeter
    /// The EBU R128 loudness of everything captured, read with each AudioData's levels; nil when
    /// the capture is not linear PCM or not measured (`LoudnessMeasurement`). Used on the delivery
    /// thread only, like the encoder, so its milliseconds of work never hold `lock`.
    private let loudnessMeter: LoudnessMeter?
    /// The loudness read with the last packets logged, for the status display.
    private var latestLoudness: Loudness?

    /// When the pipeline measures the EBU R128 loudness of what it captures.
    ///
    /// Loudness costs about 3 ms of CPU per second of 48 kHz stereo (libebur128's K-weighting,
    /// its window sums and, most of all, its 4× oversampled true peak): nothing beside a live
    /// capture, but several times all the rest of the sender's work on a file sent faster than real
    /// time, where a level display has nothing to show anyway.
    public enum LoudnessMeasurement: Sendable {
        /// For a real-time source (a device, a paced tone or file); not for a file read as fast
        /// as it can be sent (`--no-pace`).
        case whenRealTime
        /// Whatever the source.
        case always
    }

    /// Creates the pipeline; nothing runs until `start()`.
    public init(
        source: any AudioSource, encoder: any AudioEncoder, configuration: CaptureQueue.Configuration, log: PacketLog,
        loudness: LoudnessMeasurement = .whenRealTime, localCopy: LocalCopy? = nil
    ) throws(CaptureError) {
        self.encoder = encoder
        self.localCopy = localCopy
        self.log = log
        outputFormat = encoder.outputFormat
        magicCookie = encoder.magicCookie
        primingFrames = encoder.primingFrames
        levels = LevelMeter(format: source.format)
        packetLevels = LevelMeter(format: source.format)
        switch loudness {
        case .always: loudnessMeter = LoudnessMeter(format: source.format)
        case .whenRealTime: loudnessMeter = source.isRealTime ? LoudnessMeter(format: source.format) : nil
        }
        let box = CallbackBox()
        queue = try CaptureQueue(source: source, configuration: configuration) { buffer in box.pipeline?.handle(buffer) }
        box.pipeline = self
    }

    /// Breaks the reference cycle between the queue's callback and the pipeline.
    ///
    /// Sendability (`@unchecked Sendable`): `pipeline` is set before the queue starts and only read afterwards; loading a weak reference is thread-safe.
    private final class CallbackBox: @unchecked Sendable {
        weak var pipeline: CapturePipeline?
    }

    /// Starts capture.
    public func start() throws(CaptureError) { try queue.start() }

    /// The levels of the audio seen so far since the last call, and resets them.
    public func takeLevels() -> LevelMeter.Reading { lock.withLock { levels.take() } }

    /// The loudness read with the last packets logged (momentary and short-term as of their last
    /// captured frame); nil before any, or when the capture is not linear PCM.
    public var loudness: Loudness? { lock.withLock { latestLoudness } }

    /// The levels and loudness of the audio captured since the last packets were logged, for the
    /// packets logged now; the status display's meter gets them too.
    private func takePacketLevels() -> AudioLevels? {
        let loudness = loudnessMeter?.take()
        let reading = lock.withLock {
            let reading = packetLevels.take()
            levels.add(reading)
            if let loudness { latestLoudness = loudness }
            return reading
        }
        return AudioLevels(reading, loudness: loudness)
    }

    private func handle(_ buffer: CapturedBuffer) {
        localCopy?.take(buffer)
        let start = buffer.startTime.sampleTime
        let lost = Int64(buffer.framesLostBefore)
        let paused = Int64(buffer.framesPausedBefore)
        guard buffer.packetCount > 0 else {
            // A paused queue's report: frames lost before the pause, then the pause so far. An
            // encoder that fills them covers the pause with silence now, as it lasts.
            if lost > 0 {
                closePause()
                recordLoss(at: start - paused - lost, frames: lost)
            }
            if paused > 0 { extendPause(from: start - paused, frames: paused) }
            if encoder.fillsLostFrames { encode(buffer) }
            lock.withLock { lastEnd = max(lastEnd, start) }
            return
        }
        // After a resume: the pause came before any frames lost since (an overrun right after).
        if paused > 0 { extendPause(from: start - lost - paused, frames: paused) }
        closePause()
        if lost > 0 { recordLoss(at: start - lost, frames: lost) }
        // Measured before encoding, so PCM and Opus carry the same levels. An encoder that
        // accumulates whole frames (Opus) may log nothing for this buffer: its levels then go with
        // the next packets.
        lock.withLock { packetLevels.measure(buffer) }
        loudnessMeter?.measure(buffer)
        encode(buffer)
    }

    /// Encodes `buffer` and logs the packets it completes, then the filled gaps they now reach.
    private func encode(_ buffer: CapturedBuffer) {
        guard lock.withLock({ failure == nil }) else { return }
        do {
            if let packets = try encoder.encode(buffer) {
                lock.withLock { lastOutputEnd = packets.firstSampleTime + Int64(packets.frameCount) }
                log.append(packets, levels: takePacketLevels())
            }
            lock.withLock { lastEnd = buffer.startTime.sampleTime + Int64(buffer.packetCount) }
        } catch {
            lock.withLock { failure = error }
            Thread.detachNewThread { [queue] in queue.stop(immediate: true) }
        }
        logFilledGaps()
    }

    /// Frames lost in an overrun at `start` (input timeline): a Gap for PCM, a filled gap for an
    /// encoder that covers them with silence.
    private func recordLoss(at start: Int64, frames: Int64) {
        lock.withLock { reportedLost += frames }
        if encoder.fillsLostFrames {
            queueFilledGap(from: start, frames: frames, reason: "overrun")
        } else {
            log.appendGap(sampleTime: start, length: frames, reason: "overrun")
        }
    }

    /// Adds `frames` of pause from `start` (input timeline) to the pause being recorded, or opens one.
    private func extendPause(from start: Int64, frames: Int64) {
        if let pause = openPause, pause.start + pause.frames == start {
            openPause = (pause.start, pause.frames + frames)
        } else {
            closePause()
            openPause = (start, frames)
        }
    }

    /// Logs the pause being recorded, if any, as one gap with reason `paused`.
    private func closePause() {
        guard let pause = openPause else { return }
        openPause = nil
        if encoder.fillsLostFrames {
            queueFilledGap(from: pause.start, frames: pause.frames, reason: "paused")
        } else {
            log.appendGap(sampleTime: pause.start, length: pause.frames, reason: "paused")
        }
    }

    /// A stretch of `frames` from `start` (input timeline) that the encoder covers with silence,
    /// labelled by a filled gap on the output timeline once the packets reach it.
    private func queueFilledGap(from start: Int64, frames: Int64, reason: String) {
        let first = encoder.outputSampleTime(ofInput: start)
        let length = encoder.outputSampleTime(ofInput: start + frames) - first
        guard length > 0 else { return }
        pendingFilledGaps.append((first, length, reason))
        logFilledGaps()
    }

    /// Logs the waiting filled gaps whose start the packets logged have reached, in order.
    private func logFilledGaps() {
        let reached = lock.withLock { lastOutputEnd }
        while let next = pendingFilledGaps.first, next.sampleTime <= reached {
            pendingFilledGaps.removeFirst()
            log.appendFilledGap(sampleTime: next.sampleTime, length: next.length, reason: next.reason)
        }
    }

    /// Waits until capture ends (source finished, stopped or failed), flushes the encoder and records
    /// the end of the stream in the log. Returns how capture ended.
    public func waitAndFinish(reasonIfStopped: String = "interrupted") -> Result<CaptureQueue.Completion, SenderError> {
        let completion = queue.waitForCompletion()
        if let failure = lock.withLock({ failure }) {
            log.finish(StreamEnd(endSampleTime: lock.withLock { lastEnd }, remainderFrames: 0, reason: "encoder-failed"))
            return .failure(.encoderFailed(failure.description))
        }
        // A pause that the stop ended is recorded up to the stop (the queue reported it).
        closePause()
        var remainder = 0
        do {
            let tail = try encoder.finish()
            if let packets = tail.packets {
                lock.withLock { lastOutputEnd = packets.firstSampleTime + Int64(packets.frameCount) }
                log.append(packets, levels: takePacketLevels())
            }
            // The tail covers every stretch the encoder filled; what the packets never reach (a
            // loss at the very end) was not filled and is not labelled.
            logFilledGaps()
            pendingFilledGaps.removeAll()
            remainder = tail.remainderFrames
        } catch {
            log.finish(StreamEnd(endSampleTime: lock.withLock { lastEnd }, remainderFrames: 0, reason: "encoder-failed"))
            return .failure(.encoderFailed(error.description))
        }
        // Frames lost in an overrun at the very end (no buffer followed them) become a trailing
        // gap. Buffers an immediate stop dropped were captured, not lost in an overrun: they are
        // not a gap (the stream ends after the last buffer delivered).
        let statistics = queue.statistics
        let (capturedEnd, trailingLost) = lock.withLock { (lastEnd, max(0, statistics.framesLost - reportedLost)) }
        let timelineEnd = capturedEnd + trailingLost
        if !encoder.fillsLostFrames, trailingLost > 0 {
            log.appendGap(sampleTime: capturedEnd, length: trailingLost, reason: "overrun")
        }
        let reason: String
        switch completion {
        case .endOfStream: reason = "end-of-source"
        case .stopped: reason = reasonIfStopped
        case .failed(let error): reason = "capture-failed: \(error.description)"
        }
        let endSampleTime = outputFormat.isLinearPCM ? max(timelineEnd, capturedEnd) : lock.withLock { lastOutputEnd }
        log.finish(StreamEnd(endSampleTime: endSampleTime, remainderFrames: remainder, reason: reason))
        if case .failed(let error) = completion {
            return .failure(.captureFailed(error.description))
        }
        return .success(completion)
    }
}
