import CaptureCodecs
import CaptureCore
import CaptureLocalCopy
import CaptureLoudness
import CaptureWire
import Foundation
import Synchronization

/// The sending side's audio path before the network: one capture queue over a source, whose
/// callback hands every captured buffer to the local copy (when there is one) and to one
/// `EncodingStage` per encoding (an encoder and the packet log it fills): the capture runs once,
/// whatever number of encodings it feeds, and they all keep its sample timeline (see
/// `EncodingStage` for overruns and pauses).
///
/// Levels and loudness are measured once per buffer, before encoding, so every encoding carries the
/// same levels with its packets, and the status display reads them from here.
///
/// The queue's callback runs on its delivery thread, never on the capture thread, so the encoders
/// may allocate and the logs may take their locks there.
///
/// Sendability (`@unchecked Sendable`): the status levels and the latest loudness are in a `Mutex`;
/// the meters (`bufferLevels`, `loudnessMeter`) and the stages' encoding state are used on the
/// queue's delivery thread only (and in `waitAndFinish` once it has ended), an ownership the
/// compiler cannot see; the queue, the logs and the local copy are thread-safe.
public final class CapturePipeline: @unchecked Sendable {
    /// The queue, for its lifecycle (pause/resume/stop) and statistics.
    public let queue: CaptureQueue
    /// The encodings, in the order given.
    public let stages: [EncodingStage]
    /// The safety copy on the unit, given every captured buffer before it is encoded; nil without one.
    public let localCopy: LocalCopy?

    /// The first encoding's log.
    public var log: PacketLog { stages[0].log }
    /// The first encoding's output format, as the handshake describes it.
    public var outputFormat: StreamFormat { stages[0].outputFormat }
    /// The first encoding's magic cookie.
    public var magicCookie: [UInt8] { stages[0].magicCookie }
    /// The first encoding's priming frames.
    public var primingFrames: Int { stages[0].primingFrames }
    /// Whether the first encoding fills lost frames with encoded silence (Opus) rather than logging
    /// Gaps (PCM).
    public var fillsLostFrames: Bool { stages[0].fillsLostFrames }

    /// What the status display reads while the delivery thread measures.
    private struct State {
        /// The levels for the status display: everything captured since `takeLevels()`.
        var levels: LevelMeter
        /// The loudness read after the last buffer, for the status display.
        var latestLoudness: Loudness?
    }

    private let state: Mutex<State>
    /// Measures each buffer once for every stage. Delivery thread only.
    private var bufferLevels: LevelMeter
    /// The EBU R128 loudness of everything captured, read after each buffer; nil when the capture is
    /// not linear PCM or not measured (`LoudnessMeasurement`). Delivery thread only, so its
    /// milliseconds of work never hold `state`'s lock.
    private let loudnessMeter: LoudnessMeter?

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

    /// Creates the pipeline for one or more encodings, each an encoder and the log it fills
    /// (at least one); nothing runs until `start()`.
    public init(
        source: any AudioSource, encodings: [(encoder: any AudioEncoder, log: PacketLog)], configuration: CaptureQueue.Configuration,
        loudness: LoudnessMeasurement = .whenRealTime, localCopy: LocalCopy? = nil
    ) throws(CaptureError) {
        guard !encodings.isEmpty else { throw .invalidState("a capture pipeline needs at least one encoding") }
        stages = encodings.map { EncodingStage(encoder: $0.encoder, log: $0.log, inputFormat: source.format) }
        self.localCopy = localCopy
        state = Mutex(State(levels: LevelMeter(format: source.format)))
        bufferLevels = LevelMeter(format: source.format)
        switch loudness {
        case .always: loudnessMeter = LoudnessMeter(format: source.format)
        case .whenRealTime: loudnessMeter = source.isRealTime ? LoudnessMeter(format: source.format) : nil
        }
        let box = CallbackBox()
        queue = try CaptureQueue(source: source, configuration: configuration) { buffer in box.pipeline?.handle(buffer) }
        box.pipeline = self
    }

    /// Creates the pipeline for one encoding: `encoder` filling `log`.
    public convenience init(
        source: any AudioSource, encoder: any AudioEncoder, configuration: CaptureQueue.Configuration, log: PacketLog,
        loudness: LoudnessMeasurement = .whenRealTime, localCopy: LocalCopy? = nil
    ) throws(CaptureError) {
        try self.init(source: source, encodings: [(encoder, log)], configuration: configuration, loudness: loudness, localCopy: localCopy)
    }

    /// Breaks the reference cycle between the queue's callback and the pipeline.
    ///
    /// Sendability (`@unchecked Sendable`): `pipeline` is set in `init`, before `start()` starts the
    /// queue's delivery thread (which orders the write before every read there), and only read
    /// afterwards; loading a weak reference is thread-safe.
    private final class CallbackBox: @unchecked Sendable {
        weak var pipeline: CapturePipeline?
    }

    /// Starts capture.
    public func start() throws(CaptureError) { try queue.start() }

    /// The levels of the audio seen so far since the last call, and resets them.
    public func takeLevels() -> LevelMeter.Reading { state.withLock { $0.levels.take() } }

    /// The loudness as of the last buffer captured (momentary and short-term); nil before any, or
    /// when the capture is not linear PCM or not measured.
    public var loudness: Loudness? { state.withLock { $0.latestLoudness } }

    private func handle(_ buffer: CapturedBuffer) {
        localCopy?.take(buffer)
        var reading: LevelMeter.Reading?
        var loudness: Loudness?
        if buffer.packetCount > 0 {
            bufferLevels.measure(buffer)
            let measured = bufferLevels.take()
            loudnessMeter?.measure(buffer)
            loudness = loudnessMeter?.take()
            state.withLock { state in
                state.levels.add(measured)
                if let loudness { state.latestLoudness = loudness }
            }
            reading = measured
        }
        var failed = false
        for stage in stages where !stage.hasFailed {
            if !stage.handle(buffer, levels: reading, loudness: loudness) { failed = true }
        }
        // An encoder failed: capture stops (the other encodings end where they are).
        // Asked, not waited for: this is the queue's own delivery thread, which the stop waits for.
        if failed { queue.requestStop(immediate: true) }
    }

    /// Waits until capture ends (source finished, stopped or failed), then ends every encoding's
    /// stream in its log (flushing its encoder). Returns how capture ended, or the first encoding's
    /// failure. A capture failure is worded in each stream's end as `settingNames` names settings.
    public func waitAndFinish(
        reasonIfStopped: String = "interrupted", settingNames: any SettingNaming = LibrarySettingNames()
    ) -> Result<CaptureQueue.Completion, SenderError> {
        let completion = queue.waitForCompletion()
        let statistics = queue.statistics
        var firstFailure: SenderError?
        for stage in stages {
            if case .failure(let error) = stage.finish(completion, statistics: statistics, reasonIfStopped: reasonIfStopped, settingNames: settingNames), firstFailure == nil {
                firstFailure = error
            }
        }
        if let firstFailure { return .failure(firstFailure) }
        if case .failed(let error) = completion {
            return .failure(.captureFailed(error))
        }
        return .success(completion)
    }
}
