/// Holds a source that is not a device to the pace of real time, as a device would deliver: a read
/// of frames up to position P returns no sooner than P / sampleRate seconds after `start()`.
public struct RealTimePacer: Sendable {
    private let sampleRate: Double
    private var startHostTime: UInt64 = 0
    private var framesSinceStart: Int64 = 0

    /// Creates a pacer for audio at `sampleRate` frames per second.
    public init(sampleRate: Double) { self.sampleRate = sampleRate }

    /// Starts (or, after a pause, restarts) the clock at the current position.
    public mutating func start() {
        startHostTime = MonotonicClock.nanoseconds()
        framesSinceStart = 0
    }

    /// Waits until `frames` more frames would have been captured by a device, then counts them.
    public mutating func waitForFrames(_ frames: Int) {
        framesSinceStart += Int64(frames)
        let due = startHostTime + UInt64(Double(framesSinceStart) / sampleRate * 1e9)
        MonotonicClock.sleep(until: due)
    }
}
