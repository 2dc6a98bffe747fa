import Dispatch
import Synchronization

/// Counters of a capture queue, readable at any time from any thread.
public struct CaptureStatistics: Equatable, Sendable {
    /// Frames read from the source into buffers that were handed on.
    public var framesCaptured: Int64
    /// Buffers handed to the callback.
    public var buffersDelivered: Int64
    /// Overrun episodes: times the source or the queue lost audio.
    public var overruns: Int64
    /// Frames lost in those overruns.
    public var framesLost: Int64

    public init(framesCaptured: Int64 = 0, buffersDelivered: Int64 = 0, overruns: Int64 = 0, framesLost: Int64 = 0) {
        self.framesCaptured = framesCaptured
        self.buffersDelivered = buffersDelivered
        self.overruns = overruns
        self.framesLost = framesLost
    }
}

/// A recording queue after Audio Queue Services: a pool of preallocated buffers that a source fills
/// on a capture thread and that a callback receives, one by one, on a delivery thread; each buffer
/// returns to the pool when the callback returns.
///
/// The capture thread never allocates and takes no lock: buffers travel between the two threads
/// through lock-free rings. A real-time source (a device) is never made to wait past its own room:
/// when no buffer is free, the queue waits for one only while the source says its ring buffer can
/// hold more than the next period (`AudioSource.framesBeforeOverrun`), then drains the source into
/// a scratch buffer and counts those frames as lost
/// (an overrun), which the next delivered buffer reports in `framesLostBefore` (a loss at the very end
/// of the stream has no buffer after it: `statistics` counts it). A source that is not
/// real time (a file read as fast as possible) waits for a free buffer instead.
///
/// Lifecycle, as `AudioQueueStart`/`Pause`/`Stop`/`Dispose`: `start()`, `pause()`, `resume()`,
/// `stop(immediate:)` (immediate drops queued buffers; otherwise they are delivered first), `dispose()`.
/// For a real-time source the timeline goes on through a pause, reported as it goes: about once per
/// buffer duration while paused, the callback gets an empty buffer (`packetCount` 0) whose
/// `framesPausedBefore` counts the pause since the last report, and the first buffer after
/// `resume()` reports the rest; each starts as many frames later as the pause lasted so far. (An
/// encoder that must cover the pause with encoded silence does that work as the pause goes, not all
/// at once when capture resumes.) A pause that a stop ends is reported up to the stop, by one more
/// empty buffer: the stream ends when it was stopped. An empty buffer waits for a free buffer of
/// the pool like any other; while none is free, the pause goes into the next report.
///
/// Sendability (`@unchecked Sendable`): the capture and delivery threads hand buffers to each other only through the two single-producer, single-consumer `IndexRing`s and the semaphores; flags and counters are `Atomic`s, the lifecycle state is in a `Mutex`, everything else is immutable after `init`.
public final class CaptureQueue: @unchecked Sendable {
    /// Buffer count and size.
    public struct Configuration: Sendable {
        /// Buffers in the pool (`kNumberBuffers`); at least 2.
        public var bufferCount: Int
        /// The audio each buffer holds (0.5 s by default): the capture's granularity, turned into
        /// frames by `BufferSizing.framesPerBuffer`; greater than zero.
        public var bufferDuration: Duration

        public init(bufferCount: Int = 3, bufferDuration: Duration = .milliseconds(500)) {
            self.bufferCount = bufferCount
            self.bufferDuration = bufferDuration
        }
    }

    /// How a queue's run ended.
    public enum Completion: Equatable, Sendable {
        /// The source had no more audio; everything captured was delivered.
        case endOfStream
        /// `stop(immediate:)` ended it.
        case stopped
        /// The source failed; everything captured before the failure was delivered.
        case failed(CaptureError)
    }

    /// What the capture thread is asked to do, stored as its raw value in `control`.
    private enum Control: Int {
        case run, pause, stop
    }

    /// Per-buffer facts the capture thread writes before publishing the buffer.
    private struct Slot {
        var startSample: Int64 = 0
        var hostTime: UInt64 = 0
        var frames: Int = 0
        var framesLostBefore: Int = 0
        var framesPausedBefore: Int = 0
    }

    /// The format the source really delivers.
    public let format: StreamFormat
    /// Bytes per buffer as derived from the configuration (`DeriveBufferSize`).
    public let bufferByteSize: Int
    /// Whole frames per buffer.
    public let framesPerBuffer: Int
    /// Buffers in the pool.
    public let bufferCount: Int

    private let source: any AudioSource
    private let callback: @Sendable (CapturedBuffer) -> Void
    private let isRealTime: Bool
    private let bytesPerFrame: Int

    private let memory: UnsafeMutableRawPointer
    private let scratch: UnsafeMutableRawPointer
    private let slots: UnsafeMutablePointer<Slot>
    private let freeBuffers: IndexRing
    private let filledBuffers: IndexRing
    private let bufferFilled = DispatchSemaphore(value: 0)
    private let bufferFreed = DispatchSemaphore(value: 0)
    private let resumed = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    private let control = Atomic<Int>(Control.run.rawValue)
    private let captureEnded = Atomic<Bool>(false)
    private let dropQueued = Atomic<Bool>(false)
    private let framesCaptured = Atomic<Int64>(0)
    private let buffersDelivered = Atomic<Int64>(0)
    private let overrunCount = Atomic<Int64>(0)
    private let framesLost = Atomic<Int64>(0)
    private let stoppedOnRequest = Atomic<Bool>(false)
    /// How often a paused real-time queue reports the pause (an empty buffer): once per buffer
    /// duration, at least every 10 ms.
    private var pauseReportNanoseconds: Double { max(Double(framesPerBuffer) / format.sampleRate, 0.01) * 1e9 }
    /// Filled buffers queued at which the delivery thread is woken even while the source is still
    /// catching up (see `AudioSource.canReadWithoutWaiting`): all but one buffer.
    private let deliveryBatch: Int

    /// Lifecycle state; never touched by the capture thread except once, as it ends.
    private struct Lifecycle {
        var started = false
        var paused = false
        var ended = false
        var disposed = false
        var completionResult: Completion?
        var failure: CaptureError?
    }

    private let lifecycle = Mutex(Lifecycle())

    /// Creates the queue and allocates its buffers; nothing runs until `start()`.
    ///
    /// - Parameters:
    ///   - source: an opened source; the queue owns it from now on and closes it in `dispose()`.
    ///   - configuration: buffer count and seconds per buffer.
    ///   - callback: receives each filled buffer on the delivery thread. It must not call `stop`,
    ///     `pause` or `dispose` and wait for their effect (they are safe to call, but the queue cannot
    ///     drain while its callback waits).
    public init(
        source: any AudioSource, configuration: Configuration = .init(),
        callback: @escaping @Sendable (CapturedBuffer) -> Void
    ) throws(CaptureError) {
        let format = source.format
        do { try format.validate() } catch { throw .unsupportedFormat(error.description) }
        guard format.isLinearPCM, format.bytesPerFrame > 0 else {
            throw .unsupportedFormat("a capture source must deliver interleaved linear PCM, not \(format)")
        }
        guard configuration.bufferCount >= 2, configuration.bufferCount <= 64 else {
            throw .invalidState("the queue needs 2 to 64 buffers, not \(configuration.bufferCount)")
        }
        guard configuration.bufferDuration > .zero else {
            throw .invalidState("the buffer duration must be greater than 0 s, not \(configuration.bufferDuration.inSeconds) s")
        }
        self.format = format
        self.source = source
        self.callback = callback
        self.isRealTime = source.isRealTime
        self.bytesPerFrame = Int(format.bytesPerFrame)
        self.bufferCount = configuration.bufferCount
        self.deliveryBatch = max(1, configuration.bufferCount - 1)
        self.framesPerBuffer = BufferSizing.framesPerBuffer(format: format, duration: configuration.bufferDuration)
        self.bufferByteSize = framesPerBuffer * bytesPerFrame

        memory = UnsafeMutableRawPointer.allocate(byteCount: bufferByteSize * bufferCount, alignment: 16)
        memory.initializeMemory(as: UInt8.self, repeating: 0, count: bufferByteSize * bufferCount)
        scratch = UnsafeMutableRawPointer.allocate(byteCount: bufferByteSize, alignment: 16)
        slots = UnsafeMutablePointer<Slot>.allocate(capacity: bufferCount)
        slots.initialize(repeating: Slot(), count: bufferCount)
        freeBuffers = IndexRing(capacity: bufferCount)
        filledBuffers = IndexRing(capacity: bufferCount)
        for index in 0..<bufferCount { freeBuffers.push(index) }
    }

    deinit {
        memory.deallocate()
        scratch.deallocate()
        slots.deinitialize(count: bufferCount)
        slots.deallocate()
    }

    /// The counters so far.
    public var statistics: CaptureStatistics {
        CaptureStatistics(
            framesCaptured: framesCaptured.load(ordering: .relaxed),
            buffersDelivered: buffersDelivered.load(ordering: .relaxed),
            overruns: overrunCount.load(ordering: .relaxed),
            framesLost: framesLost.load(ordering: .relaxed)
        )
    }

    /// Whether the queue has been started and has not ended or been paused.
    public var isRunning: Bool {
        lifecycle.withLock { $0.started && !$0.paused && !$0.ended }
    }

    /// Starts capture: the source starts and buffers begin to reach the callback.
    public func start() throws(CaptureError) {
        try lifecycle.withLock { (state: inout Lifecycle) throws(CaptureError) in
            guard !state.disposed else { throw CaptureError.invalidState("the capture queue was disposed; create a new one") }
            guard !state.ended else { throw CaptureError.invalidState("the capture queue has stopped; create a new one to capture again") }
            if state.started {
                if state.paused {
                    state.paused = false
                    control.store(Control.run.rawValue, ordering: .releasing)
                    resumed.signal()
                }
                return
            }
            try source.start()
            state.started = true
            control.store(Control.run.rawValue, ordering: .releasing)
            try DetachedThread.start(name: "capture-delivery") { [self] in deliveryLoop() }
            try DetachedThread.start(name: "capture") { [self] in captureLoop() }
        }
    }

    /// Pauses capture: the source stops, buffers already filled are still delivered.
    public func pause() {
        lifecycle.withLock { state in
            guard state.started, !state.paused, !state.ended else { return }
            state.paused = true
            control.store(Control.pause.rawValue, ordering: .releasing)
            bufferFreed.signal()  // a capture thread waiting for a buffer sees the pause at once
        }
    }

    /// Resumes after `pause()`; the same as `start()`.
    public func resume() throws(CaptureError) {
        try start()
    }

    /// Stops capture and waits until the queue has finished.
    ///
    /// - Parameter immediate: `true` drops buffers that were filled but not yet delivered;
    ///   `false` delivers them first (the document's asynchronous stop, made synchronous here).
    public func stop(immediate: Bool) {
        if requestStop(immediate: immediate) { _ = waitForCompletion() }
    }

    /// Asks the queue to stop, as `stop(immediate:)` does, without waiting for it: for async code,
    /// which must not block; `waitForCompletion()` (on a thread of its own) sees the end. Returns
    /// whether the queue was running.
    @discardableResult
    public func requestStop(immediate: Bool) -> Bool {
        lifecycle.withLock { state in
            guard state.started, !state.ended else { return false }
            if immediate { dropQueued.store(true, ordering: .releasing) }
            let wasPaused = state.paused
            state.paused = false
            control.store(Control.stop.rawValue, ordering: .releasing)
            if wasPaused { resumed.signal() }
            bufferFreed.signal()
            return true
        }
    }

    /// Blocks until the queue has ended (source finished, failed or stopped) and returns how.
    /// Returns at once with `.stopped` when the queue was never started.
    @discardableResult
    public func waitForCompletion() -> Completion {
        let needsWait: Bool = lifecycle.withLock { $0.started && $0.completionResult == nil }
        if needsWait {
            finished.wait()
            finished.signal()  // let any other waiter through too
        }
        return lifecycle.withLock { $0.completionResult ?? .stopped }
    }

    /// Stops the queue at once if it runs, closes the source and releases the queue's resources.
    public func dispose() {
        stop(immediate: true)
        let shouldClose: Bool = lifecycle.withLock { state in
            guard !state.disposed else { return false }
            state.disposed = true
            state.ended = true
            return true
        }
        if shouldClose { source.close() }
    }

    // MARK: - Capture thread (no allocation, no lock)

    private func captureLoop() {
        var nextSample: Int64 = 0
        var pendingLost = 0
        var pendingPaused = 0
        var heldSlot: Int?
        var inOverrun = false
        var sourceRunning = true
        var endedWith: CaptureError?
        // Filled buffers pushed without waking the delivery thread (the source was catching up).
        var deliveryOwed = false

        loop: while true {
            switch Control(rawValue: control.load(ordering: .acquiring)) ?? .stop {
            case .stop:
                stoppedOnRequest.store(true, ordering: .releasing)
                break loop
            case .pause:
                wakeDelivery(&deliveryOwed)
                if sourceRunning { source.stop(); sourceRunning = false }
                guard isRealTime else {
                    resumed.wait()
                    continue loop
                }
                // A real-time source's timeline goes on: count the pause as it lasts, and report it
                // in an empty buffer once per buffer duration (and once more at a stop).
                let pausedAt = MonotonicClock.nanoseconds()
                var counted = 0
                while true {
                    let woken = resumed.wait(timeout: .now() + .nanoseconds(Int(pauseReportNanoseconds))) == .success
                    let elapsed = Double(MonotonicClock.nanoseconds() &- pausedAt) / 1e9
                    let frames = Int((elapsed * format.sampleRate).rounded()) - counted
                    counted += frames
                    pendingPaused += frames
                    nextSample += Int64(frames)
                    let now = Control(rawValue: control.load(ordering: .acquiring)) ?? .stop
                    if woken, now == .run { break }
                    if now == .stop || !woken {
                        reportPause(startSample: nextSample, lost: &pendingLost, paused: &pendingPaused, heldSlot: &heldSlot)
                    }
                    if now == .stop { break }
                }
                continue loop
            case .run:
                if !sourceRunning {
                    do { try source.start() } catch { endedWith = error; break loop }
                    sourceRunning = true
                }
            }

            if heldSlot == nil { heldSlot = freeBuffers.pop() }
            guard let slot = heldSlot else {
                wakeDelivery(&deliveryOwed)
                if !isRealTime {
                    bufferFreed.wait()
                    continue loop
                }
                // A device whose ring buffer still has room beyond the next period keeps the audio
                // safe there: wait for a free buffer for half of that spare room, then look again.
                if let timeout = waitBeforeDraining() {
                    _ = bufferFreed.wait(timeout: timeout)
                    continue loop
                }
                // No free buffer: keep the device drained and count what is lost.
                let result: SourceReadResult
                do {
                    result = try source.read(into: UnsafeMutableRawBufferPointer(start: scratch, count: bufferByteSize), frameCapacity: framesPerBuffer)
                } catch { endedWith = error; break loop }
                switch result {
                case .frames(let count), .overrun(let count):
                    guard count > 0 else { continue loop }
                    if !inOverrun { overrunCount.add(1, ordering: .relaxed); inOverrun = true }
                    pendingLost += count
                    nextSample += Int64(count)
                    framesLost.add(Int64(count), ordering: .relaxed)
                case .endOfStream:
                    break loop
                }
                continue loop
            }

            let destination = UnsafeMutableRawBufferPointer(start: memory + slot * bufferByteSize, count: bufferByteSize)
            let result: SourceReadResult
            do {
                result = try source.read(into: destination, frameCapacity: framesPerBuffer)
            } catch { endedWith = error; break loop }
            switch result {
            case .frames(let count):
                guard count > 0 else { continue loop }
                slots[slot] = Slot(
                    startSample: nextSample, hostTime: MonotonicClock.nanoseconds(),
                    frames: count, framesLostBefore: pendingLost, framesPausedBefore: pendingPaused
                )
                nextSample += Int64(count)
                pendingLost = 0
                pendingPaused = 0
                inOverrun = false
                heldSlot = nil
                framesCaptured.add(Int64(count), ordering: .relaxed)
                filledBuffers.push(slot)
                deliveryOwed = true
                // While the source is catching up, hand buffers on in batches; never let one wait
                // behind a read that blocks.
                if filledBuffers.count >= deliveryBatch || !source.canReadWithoutWaiting(frames: framesPerBuffer) {
                    wakeDelivery(&deliveryOwed)
                }
            case .overrun(let lost):
                wakeDelivery(&deliveryOwed)
                overrunCount.add(1, ordering: .relaxed)
                framesLost.add(Int64(lost), ordering: .relaxed)
                pendingLost += lost
                nextSample += Int64(lost)
            case .endOfStream:
                break loop
            }
        }

        if sourceRunning { source.stop() }
        if let endedWith { recordFailure(endedWith) }
        captureEnded.store(true, ordering: .releasing)
        bufferFilled.signal()
    }

    /// Publishes an empty buffer at `startSample` reporting the frames lost and paused since the last
    /// buffer (see the pause in the type's comment) and wakes the delivery thread, when a buffer of
    /// the pool is free; otherwise leaves them for the next report.
    private func reportPause(startSample: Int64, lost: inout Int, paused: inout Int, heldSlot: inout Int?) {
        guard paused > 0 || lost > 0, let slot = heldSlot ?? freeBuffers.pop() else { return }
        slots[slot] = Slot(
            startSample: startSample, hostTime: MonotonicClock.nanoseconds(), frames: 0,
            framesLostBefore: lost, framesPausedBefore: paused)
        lost = 0
        paused = 0
        heldSlot = nil
        filledBuffers.push(slot)
        bufferFilled.signal()
    }

    /// How long the capture thread may wait for a free buffer before it must drain the source: half
    /// the time the source's spare room (beyond one period) lasts, or nil when that is under an
    /// eighth of a buffer or unknown. While the consumer stays stalled, halving at every look ends
    /// the waiting after a few looks, with about a period of room still free for the read that
    /// drains (less if the thread is scheduled late).
    private func waitBeforeDraining() -> DispatchTime? {
        guard let room = source.framesBeforeOverrun() else { return nil }
        let spare = room - framesPerBuffer
        guard spare >= max(framesPerBuffer / 8, 1) else { return nil }
        let nanoseconds = Double(spare) / 2 / format.sampleRate * 1e9
        return .now() + .nanoseconds(Int(nanoseconds))
    }

    /// Wakes the delivery thread if buffers were pushed since it was last woken.
    private func wakeDelivery(_ owed: inout Bool) {
        if owed {
            owed = false
            bufferFilled.signal()
        }
    }

    private func recordFailure(_ error: CaptureError) {
        // Runs once, as the capture thread ends; the lock is never held by I/O.
        lifecycle.withLock { $0.failure = error }
    }

    // MARK: - Delivery thread

    private func deliveryLoop() {
        while true {
            bufferFilled.wait()
            let endedBeforeDrain = captureEnded.load(ordering: .acquiring)
            drainFilledBuffers()
            if endedBeforeDrain {
                drainFilledBuffers()
                break
            }
        }
        let endedByStop = stoppedOnRequest.load(ordering: .acquiring)
        lifecycle.withLock { state in
            state.ended = true
            if let failure = state.failure {
                state.completionResult = .failed(failure)
            } else if endedByStop {
                state.completionResult = .stopped
            } else {
                state.completionResult = .endOfStream
            }
        }
        finished.signal()
    }

    private func drainFilledBuffers() {
        while let slot = filledBuffers.pop() {
            if !dropQueued.load(ordering: .acquiring) {
                let info = slots[slot]
                let buffer = CapturedBuffer(
                    bytes: UnsafeRawBufferPointer(start: memory + slot * bufferByteSize, count: info.frames * bytesPerFrame),
                    startTime: CaptureTimestamp(sampleTime: info.startSample, hostTime: info.hostTime),
                    packetCount: info.frames,
                    framesLostBefore: info.framesLostBefore,
                    framesPausedBefore: info.framesPausedBefore
                )
                callback(buffer)
                if info.frames > 0 { buffersDelivered.add(1, ordering: .relaxed) }
            }
            freeBuffers.push(slot)
            bufferFreed.signal()
        }
    }
}
