import CaptureCore
import Dispatch
import Foundation
import Synchronization

/// Live listening to one stream: the receiver offers the stream's audio as it arrives, and any
/// number of listeners each get their own Ogg Opus stream of it, starting at the live edge.
///
/// - Opus streams are remuxed without re-encoding. PCM streams are encoded to Opus by one encoder
///   per stream, created with the first listener and released with the last (more than two channels
///   are downmixed to stereo, rates Opus does not take are resampled to 48 kHz).
/// - `offer` never blocks and never fails: with nobody listening it costs one atomic load and
///   returns; otherwise it queues the buffer (a reference, not a copy) for the hub's own serial
///   executor, which splits or encodes, muxes and hands pages to each listener's bounded queue.
/// - Bounds (`ListenLimits`): a listener more than `listenerBacklog` behind is dropped alone;
///   when the executor itself is more than `queueBacklog` behind, offers are refused and all
///   listeners of the stream are dropped. Nothing here ever slows or alters the recording.
/// - Gaps in the stream are not marked: the listener hears the audio that arrived, back to back.
public final class ListenHub: Sendable {
    /// The stream's format as its Hello declared it.
    public let format: StreamFormat
    /// The hub's bounds.
    public let limits: ListenLimits

    private let counters = ListenCounters()
    private let queuedSamples = Atomic<Int>(0)
    private let behind = Atomic<Bool>(false)
    private let ended = Atomic<Bool>(false)
    private let nextListenerID = Atomic<Int>(1)
    private let queue: DispatchQueue
    private let pipeline: ListenPipeline
    /// 48 kHz samples per input frame (1 for Opus, whose frame counts are at 48 kHz).
    private let samplesPerFrame: Double

    /// Creates the hub of a stream with `format` and, for Opus, its `magicCookie` (the OpusHead).
    /// Throws when the stream cannot be listened to (an unknown codec, a cookie that is not an
    /// OpusHead, a PCM layout the listen encoder does not read).
    public init(format: StreamFormat, magicCookie: [UInt8], limits: ListenLimits = ListenLimits()) throws(ListenError) {
        let source: ListenSource
        if format.formatID == .opus {
            let head = try ListenOpusHead(magicCookie)
            source = .opus(head, OpusPacketSplitter(fallbackSamplesPerPacket: Int(format.framesPerPacket)))
            samplesPerFrame = 1
        } else {
            _ = try ListenPCMConverter(format: format)
            source = .pcm(format)
            samplesPerFrame = 48_000 / format.sampleRate
        }
        self.format = format
        self.limits = limits
        self.queue = DispatchQueue(label: "capture.listen")
        self.pipeline = ListenPipeline(source: source, limits: limits, counters: counters)
    }

    /// A hub let go without `finish()` still ends its listeners' audio.
    deinit { finish() }

    /// What the hub has done so far.
    public var statistics: ListenHubStatistics { counters.snapshot }

    /// Whether anybody listens now.
    public var hasListeners: Bool { counters.listeners.load(ordering: .relaxed) > 0 }

    /// Offers one AudioData's audio, exactly as the stream writer gets it: the payload (packets back
    /// to back for Opus, interleaved frames for PCM), the Opus packet sizes (empty for PCM) and the
    /// frames it decodes to. Returns at once, always.
    public func offer(payload: Data, packetSizes: [UInt32], frameCount: Int) {
        guard counters.listeners.load(ordering: .relaxed) > 0 else { return }
        let samples = Int(Double(frameCount) * samplesPerFrame)
        let queued = queuedSamples.add(samples, ordering: .relaxed).newValue
        guard queued <= limits.queueBacklogSamples else {
            queuedSamples.subtract(samples, ordering: .relaxed)
            behind.store(true, ordering: .relaxed)
            return
        }
        queue.async { [self] in
            queuedSamples.subtract(samples, ordering: .relaxed)
            if behind.exchange(false, ordering: .relaxed) {
                pipeline.dropAllBehind()
            } else {
                pipeline.process(payload: payload, packetSizes: packetSizes)
            }
        }
    }

    /// Starts a listener. Its first chunk (the Ogg headers and the pre-roll) is ready at once when
    /// the stream is Opus and audio has been arriving; otherwise with the next audio offered.
    public func listen() throws(ListenError) -> Listener {
        guard !ended.load(ordering: .relaxed) else { throw .streamEnded }
        let id = nextListenerID.add(1, ordering: .relaxed).oldValue
        let pipeline = pipeline
        let queue = queue
        let channel = ListenerChannel(bound: limits.listenerBacklog) {
            queue.async { pipeline.remove(id: id) }
        }
        counters.listeners.add(1, ordering: .relaxed)
        queue.async { pipeline.add(id: id, channel: channel) }
        return Listener(id: id, channel: channel)
    }

    /// Ends the stream for listening: PCM still in the encoder is flushed, every listener's audio
    /// ends after what it has queued (`streamEnded`), and `listen()` throws from now on.
    public func finish() {
        guard !ended.exchange(true, ordering: .relaxed) else { return }
        let pipeline = pipeline
        queue.async { pipeline.finish() }
    }

    /// Returns once the executor has done everything queued before the call (for tests).
    func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { continuation.resume() }
        }
    }

    /// Blocks the executor until `release` is signalled (for tests that need a stuck executor).
    func blockExecutor(until release: DispatchSemaphore) {
        queue.async { release.wait() }
    }
}
