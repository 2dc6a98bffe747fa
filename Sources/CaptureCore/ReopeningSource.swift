import Synchronization

/// A source that can be opened again after it was lost (a device that was unplugged or suspended).
public protocol ReopenableSource: AudioSource {
    /// Opens the same device again with the same format. Returns the estimated frames lost since the
    /// last successful read; throws when the device is not back yet or comes back different.
    func reopen() throws(CaptureError) -> Int
}

/// Keeps a stream going across device loss: when a read reports `.deviceLost`, it retries
/// `reopen()` with exponential backoff and, once the device is back, reports the time it was gone as
/// an overrun so the queue records a gap of that length at the right sample position.
///
/// Backoff starts at `initialDelay` and doubles up to `maximumDelay`; it retries until the device
/// returns, a reopen fails in a way that cannot get better (the device came back with another
/// format), or `cancel()` is called.
public final class ReopeningSource: AudioSource {
    /// What happened, for the caller's log (called on the capture thread; events are rare).
    public enum Event: Sendable {
        case lost(CaptureError)
        case retryFailed(attempt: Int, CaptureError)
        case reopened(lostFrames: Int)
    }

    private let inner: any ReopenableSource
    private let initialDelay: Double
    private let maximumDelay: Double
    private let onEvent: @Sendable (Event) -> Void
    private let cancelled = Atomic<Bool>(false)

    public init(
        _ source: any ReopenableSource, initialDelay: Double = 0.25, maximumDelay: Double = 2,
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        inner = source
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.onEvent = onEvent
    }

    public var format: StreamFormat { inner.format }
    public var channelLayout: ChannelLayout? { inner.channelLayout }
    public var isRealTime: Bool { inner.isRealTime }

    /// Stops retrying (from any thread); a read waiting to retry then ends the stream.
    public func cancel() { cancelled.store(true, ordering: .releasing) }

    public func start() throws(CaptureError) { try inner.start() }

    public func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        do {
            return try inner.read(into: buffer, frameCapacity: frameCapacity)
        } catch .deviceLost(let failure) {
            onEvent(.lost(.deviceLost(failure)))
            return try recover(after: .deviceLost(failure))
        }
    }

    private func recover(after loss: CaptureError) throws(CaptureError) -> SourceReadResult {
        var delay = initialDelay
        var attempt = 0
        while !cancelled.load(ordering: .acquiring) {
            MonotonicClock.sleep(until: MonotonicClock.nanoseconds() + UInt64(delay * 1e9))
            attempt += 1
            do {
                let lost = try inner.reopen()
                try inner.start()
                onEvent(.reopened(lostFrames: lost))
                return .overrun(lostFrames: lost)
            } catch .unsupportedFormat(let message) {
                throw .unsupportedFormat(message)
            } catch {
                onEvent(.retryFailed(attempt: attempt, error))
            }
            delay = min(delay * 2, maximumDelay)
        }
        throw loss
    }

    public func canReadWithoutWaiting(frames: Int) -> Bool { inner.canReadWithoutWaiting(frames: frames) }

    public func framesBeforeOverrun() -> Int? { inner.framesBeforeOverrun() }

    public func stop() { inner.stop() }
    public func close() { inner.close() }
}
