/// Wraps a source so that it ends after a given number of frames on its timeline (frames lost in
/// overruns count too, as they are part of the recording's time).
public final class DurationLimitedSource: AudioSource {
    private let inner: any AudioSource
    private let limit: Int64
    private var position: Int64 = 0

    /// Ends `source` after `frames` frames.
    public init(_ source: any AudioSource, frames: Int64) {
        inner = source
        limit = frames
    }

    public var format: StreamFormat { inner.format }
    public var channelLayout: ChannelLayout? { inner.channelLayout }
    public var isRealTime: Bool { inner.isRealTime }

    public func start() throws(CaptureError) { try inner.start() }

    public func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        let remaining = limit - position
        guard remaining > 0 else { return .endOfStream }
        let result = try inner.read(into: buffer, frameCapacity: Int(min(Int64(frameCapacity), remaining)))
        switch result {
        case .frames(let count): position += Int64(count)
        case .overrun(let lost): position += Int64(lost)
        case .endOfStream: break
        }
        return result
    }

    public func canReadWithoutWaiting(frames: Int) -> Bool {
        limit - position >= Int64(frames) && inner.canReadWithoutWaiting(frames: frames)
    }

    public func framesBeforeOverrun() -> Int? { inner.framesBeforeOverrun() }

    public func stop() { inner.stop() }
    public func close() { inner.close() }
}
