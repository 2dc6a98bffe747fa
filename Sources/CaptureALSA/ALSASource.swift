import CALSA
import CaptureCore
#if canImport(Glibc)
import Glibc
#endif

/// An `AudioSource` that captures from an ALSA PCM device (`default`, `hw:1,0`, `plughw:CARD=USB`…)
/// with blocking interleaved reads.
///
/// The initializer opens the device and negotiates the format, the period and the ring buffer; the
/// device may not give what was asked (rate, sample format, channels), so `format` is what it really
/// delivers and `negotiation` records both for logging. With `strictFormat` any difference is an error.
///
/// Each `read` fills the whole capacity it is given (several `snd_pcm_readi` calls if need be), so a
/// queue buffer sized to one period is one device period. An overrun (xrun) is recovered at once and
/// reported as `.overrun(lostFrames:)` with an estimate of the frames lost (see `ALSAOverrunEstimate`);
/// if it strikes after part of a buffer was read, the part is returned first and the overrun on the
/// next read. A device that disappears throws `.deviceLost`; `reopen()` opens it again.
///
/// Like every source it is used from one thread at a time: the queue's capture thread while a queue
/// runs it, its owner otherwise (`reopen()`, reading `negotiation`).
///
/// Sendability (`@unchecked Sendable`): used by one thread at a time, as said above (handed from its owner to the queue's capture thread and back, never shared).
public final class ALSASource: AudioSource, @unchecked Sendable {
    /// The ALSA PCM name this source captures from.
    public let deviceName: String
    /// The format the device delivers (which may differ from the request unless `strictFormat`).
    public private(set) var format: StreamFormat
    /// What was asked of the device and what it gives, including period and buffer sizes.
    public private(set) var negotiation: ALSANegotiation
    /// A capture device produces audio whether or not it is read.
    public var isRealTime: Bool { true }
    /// Overruns and suspends recovered from since the source was opened.
    public private(set) var overrunCount = 0
    /// The estimated frames those overruns and suspends cost.
    public private(set) var framesLostToOverruns = 0

    private let request: ALSARequest
    private let strictFormat: Bool
    private var pcm: OpaquePointer?
    private let status: OpaquePointer?
    /// An overrun that struck after part of a buffer was read, reported by the next `read`.
    private var pendingLostFrames = 0
    /// Set by `stop()`; a read in this state is a lifecycle error, not a lost device.
    private var stoppedByCaller = false
    /// Monotonic time when the last successful read returned, for the gap estimate of `reopen()`.
    private var lastReadEndNanoseconds: Int64?

    /// Opens an ALSA capture device and negotiates its format.
    ///
    /// - Parameters:
    ///   - device: the ALSA PCM name, as `arecord -L` or `capture-send --list-devices` lists them.
    ///   - requested: the wanted format; must be interleaved linear PCM (s16, s24, s32 or f32).
    ///   - periodFrames: the wanted period: how many frames the device hands over per wake-up; use the
    ///     queue's frames per buffer so that one queue buffer is one period.
    ///   - bufferCount: how many periods the device's ring buffer holds (at least 2).
    ///   - strictFormat: when `true`, a device that cannot give exactly `requested` is an error
    ///     (`.unsupportedFormat`) rather than a substitute format.
    public init(
        device: String = "default", requested: StreamFormat, periodFrames: Int, bufferCount: Int, strictFormat: Bool = false
    ) throws(CaptureError) {
        guard let sample = requested.pcmSampleFormat else {
            throw .unsupportedFormat("ALSA capture delivers interleaved little-endian linear PCM; ask for s16, s24, s32 or f32 instead of \(requested)")
        }
        guard periodFrames >= 1 else {
            throw .openFailed("the ALSA period must be at least 1 frame (asked for \(periodFrames)); use a larger buffer duration")
        }
        guard bufferCount >= 2 else {
            throw .openFailed("the ALSA ring buffer needs at least 2 periods (asked for \(bufferCount)); use 2 or more buffers")
        }
        let request = ALSARequest(
            deviceName: device, format: requested, sample: sample, periodFrames: periodFrames, bufferCount: bufferCount)
        let opened = try Self.open(request, strictFormat: strictFormat)
        var statusStorage: OpaquePointer?
        if snd_pcm_status_malloc(&statusStorage) != 0 { statusStorage = nil }

        self.deviceName = device
        self.request = request
        self.strictFormat = strictFormat
        self.pcm = opened.pcm
        self.negotiation = opened.negotiation
        self.format = opened.negotiation.actual
        self.status = statusStorage
    }

    deinit {
        if let pcm { snd_pcm_close(pcm) }
        if let status { snd_pcm_status_free(status) }
    }

    /// Prepares the device if it was stopped and starts capturing.
    public func start() throws(CaptureError) {
        guard let pcm else { throw closedError() }
        if snd_pcm_state(pcm) != SND_PCM_STATE_PREPARED {
            let prepared = snd_pcm_prepare(pcm)
            if prepared < 0 { throw ALSAErrorText.deviceLost(device: deviceName, code: prepared, during: "preparing to start") }
        }
        let started = snd_pcm_start(pcm)
        if started < 0 { throw ALSAErrorText.deviceLost(device: deviceName, code: started, during: "starting") }
        stoppedByCaller = false
        pendingLostFrames = 0
    }

    /// Reads exactly `frameCapacity` frames unless an overrun interrupts (see the type's notes).
    /// Blocks until the device has them. Does not allocate.
    public func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        guard let pcm else { throw closedError() }
        guard !stoppedByCaller else {
            throw .invalidState("ALSA capture device '\(deviceName)' was read while stopped; call start() first")
        }
        if pendingLostFrames > 0 {
            let lost = pendingLostFrames
            pendingLostFrames = 0
            return .overrun(lostFrames: lost)
        }
        let bytesPerFrame = Int(format.bytesPerFrame)
        let capacity = min(frameCapacity, buffer.count / bytesPerFrame)
        guard let base = buffer.baseAddress, capacity > 0 else { return .frames(0) }

        var filled = 0
        var idleWakeUps = 0
        while filled < capacity {
            let result = snd_pcm_readi(pcm, base + filled * bytesPerFrame, snd_pcm_uframes_t(capacity - filled))
            if result > 0 {
                filled += result
                idleWakeUps = 0
                continue
            }
            switch result == 0 ? .retry : ALSAReadFailure(code: result) {
            case .retry:
                // A blocking read should not come back empty; wait for the device rather than spin,
                // and give up if it never delivers.
                idleWakeUps += 1
                if idleWakeUps > Self.maximumIdleWakeUps {
                    throw .deviceSilent(device: deviceName)
                }
                if result == 0 || result == -Int(EAGAIN) { _ = snd_pcm_wait(pcm, Self.waitMilliseconds) }
            case .overrun, .suspended:
                let lost = try recover(pcm, code: result)
                overrunCount += 1
                framesLostToOverruns += lost
                if filled > 0 {
                    pendingLostFrames = lost
                    lastReadEndNanoseconds = ALSAClock.now(CLOCK_MONOTONIC)
                    return .frames(filled)
                }
                return .overrun(lostFrames: lost)
            case .lost:
                throw ALSAErrorText.deviceLost(device: deviceName, code: Int32(truncatingIfNeeded: result), during: "capturing")
            }
        }
        lastReadEndNanoseconds = ALSAClock.now(CLOCK_MONOTONIC)
        return .frames(filled)
    }

    /// Whether the device's ring buffer already holds `frames` frames (`snd_pcm_avail_update`, which
    /// reads the driver's position without a system call on most devices), so that the next read
    /// returns at once. False on any error: the read will report it.
    public func canReadWithoutWaiting(frames: Int) -> Bool {
        guard let held = unreadFrames() else { return false }
        return held >= frames
    }

    /// The free space of the device's ring buffer: its size less what it holds unread. Nil on any
    /// error: the read will report it.
    public func framesBeforeOverrun() -> Int? {
        guard let held = unreadFrames() else { return nil }
        return max(negotiation.bufferFrames - held, 0)
    }

    /// Frames the device holds unread (`snd_pcm_avail_update`), or nil while stopped, with an
    /// overrun still to report, or on error.
    private func unreadFrames() -> Int? {
        guard let pcm, !stoppedByCaller, pendingLostFrames == 0 else { return nil }
        let held = snd_pcm_avail_update(pcm)
        return held >= 0 ? Int(held) : nil
    }

    /// Stops capturing and drops what the device holds unread (`snd_pcm_drop`); `start()` resumes.
    public func stop() {
        guard let pcm else { return }
        _ = snd_pcm_drop(pcm)
        stoppedByCaller = true
        pendingLostFrames = 0
    }

    /// Closes the device. `reopen()` may open it again.
    public func close() {
        guard let pcm else { return }
        snd_pcm_close(pcm)
        self.pcm = nil
    }

    /// Closes the device if it is still open and opens the same device again with the same request,
    /// typically after a read threw `.deviceLost`. The backoff between attempts is the caller's
    /// choice; this makes one attempt and throws `.openFailed` if the device is not back yet.
    ///
    /// The device must come back with the same format, since the stream goes on; otherwise this
    /// throws `.unsupportedFormat`. After it returns, `start()` (or a queue) starts capturing.
    ///
    /// - Returns: the estimated frames lost since the last successful read (monotonic time elapsed
    ///   times the sample rate; 0 if nothing was read yet). The caller records them as a gap; the
    ///   next `read` does not report them again.
    @discardableResult
    public func reopen() throws(CaptureError) -> Int {
        close()
        let opened = try Self.open(request, strictFormat: strictFormat)
        guard opened.negotiation.actual == format else {
            snd_pcm_close(opened.pcm)
            throw .unsupportedFormat("ALSA capture device '\(deviceName)' came back offering \(opened.negotiation.actual), but the stream is \(format); a stream cannot change format, so start a new one")
        }
        pcm = opened.pcm
        negotiation = opened.negotiation
        stoppedByCaller = false
        pendingLostFrames = 0
        guard let lastReadEnd = lastReadEndNanoseconds else { return 0 }
        let elapsedSeconds = Double(ALSAClock.now(CLOCK_MONOTONIC) - lastReadEnd) / 1e9
        lastReadEndNanoseconds = nil
        return max(Int((elapsedSeconds * format.sampleRate).rounded()), 0)
    }

    // MARK: - Private

    /// How long one wait for a device that returned nothing lasts, and how many such waits in a row
    /// mean the device is not delivering.
    private static let waitMilliseconds: Int32 = 100
    private static let maximumIdleWakeUps = 100

    private static func open(_ request: ALSARequest, strictFormat: Bool) throws(CaptureError) -> (pcm: OpaquePointer, negotiation: ALSANegotiation) {
        var handle: OpaquePointer?
        // Open without blocking so that a busy device fails at once instead of waiting for its
        // owner, then switch to blocking reads.
        let opened = snd_pcm_open(&handle, request.deviceName, SND_PCM_STREAM_CAPTURE, SND_PCM_NONBLOCK)
        guard opened == 0, let pcm = handle else {
            throw ALSAErrorText.openFailed(device: request.deviceName, code: opened)
        }
        let blocking = snd_pcm_nonblock(pcm, 0)
        guard blocking == 0 else {
            snd_pcm_close(pcm)
            throw ALSAErrorText.setupFailed(device: request.deviceName, step: "switching to blocking reads", code: blocking)
        }
        let negotiation: ALSANegotiation
        do {
            negotiation = try ALSAHardwareSetup.configure(pcm, request: request)
        } catch {
            snd_pcm_close(pcm)
            throw error
        }
        if strictFormat && !negotiation.formatMatchesRequest {
            snd_pcm_close(pcm)
            let offered = negotiation.supportedSampleFormats.map(\.description).joined(separator: ", ")
            throw .unsupportedFormat("ALSA capture device '\(request.deviceName)' cannot capture \(negotiation.requested) exactly (strict format): it offers \(negotiation.actual) (\(negotiation.formatMismatches.joined(separator: ", ")); sample formats it accepts: \(offered)). Ask for \(negotiation.actual), or allow a substitute format.")
        }
        return (pcm, negotiation)
    }

    /// Recovers from an overrun or a suspend and estimates the frames it cost.
    private func recover(_ pcm: OpaquePointer, code: Int) throws(CaptureError) -> Int {
        // Measure before recovering: the recovery resets the status.
        var framesInBuffer: Int?
        var stallStartNanoseconds: Int64?
        if let status, snd_pcm_status(pcm, status) == 0 {
            framesInBuffer = Int(snd_pcm_status_get_avail(status))
            var trigger = timespec()
            snd_pcm_status_get_trigger_htstamp(status, &trigger)
            let triggerNanoseconds = ALSAClock.nanoseconds(trigger)
            if triggerNanoseconds > 0 { stallStartNanoseconds = triggerNanoseconds }
        }
        let recovered = snd_pcm_recover(pcm, Int32(truncatingIfNeeded: code), 1)
        guard recovered >= 0 else {
            let during = code == -Int(ESTRPIPE) ? "resuming after a system suspend" : "recovering from an overrun"
            throw ALSAErrorText.deviceLost(device: deviceName, code: recovered, during: during)
        }
        // Restart now so the stall ends here (a read would start it too, start threshold 1).
        _ = snd_pcm_start(pcm)
        let stalledSeconds = stallStartNanoseconds.map { Double(ALSAClock.now(CLOCK_MONOTONIC) - $0) / 1e9 }
        return ALSAOverrunEstimate.lostFrames(
            framesInBuffer: framesInBuffer, bufferFrames: negotiation.bufferFrames,
            stalledSeconds: stalledSeconds, sampleRate: format.sampleRate
        )
    }

    private func closedError() -> CaptureError {
        .invalidState("ALSA capture device '\(deviceName)' is closed; reopen() it first")
    }
}
