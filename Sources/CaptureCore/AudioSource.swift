/// What one read from an `AudioSource` produced.
public enum SourceReadResult: Equatable, Sendable {
    /// This many whole frames were written to the start of the buffer.
    case frames(Int)
    /// The source lost this many frames (a device overrun); nothing was written. The queue records a
    /// gap of that length at the current sample position so the timeline stays honest.
    case overrun(lostFrames: Int)
    /// The source has no more audio (end of a file, a tone's duration reached, a device gone).
    case endOfStream
}

/// A producer of captured audio that a `CaptureQueue` reads from its capture thread: a device
/// (ALSA), a tone generator or a file.
///
/// A source is opened by its initializer and describes in `format` what it really delivers, which
/// may differ from what was asked for (a device picks its nearest rate or sample format).
/// All methods but `close()` are called from the queue's capture thread only.
public protocol AudioSource: AnyObject {
    /// The format the source really delivers: interleaved linear PCM.
    var format: StreamFormat { get }

    /// Whether the source produces audio in real time whether or not it is read, as a device does.
    /// The queue never makes a real-time source wait for a free buffer; it counts an overrun instead.
    /// A source that is not real time (a file read with `--no-pace`) is made to wait.
    var isRealTime: Bool { get }

    /// What each channel carries, when the source knows (a WAV file's channel mask); nil otherwise.
    var channelLayout: ChannelLayout? { get }

    /// Starts (or restarts after `stop()`) delivering audio.
    func start() throws(CaptureError)

    /// Reads up to `frameCapacity` frames into `buffer` (which holds at least
    /// `frameCapacity * format.bytesPerFrame` bytes), waiting as a device read does.
    /// Must not allocate.
    func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult

    /// Whether a read of `frames` frames would return at once because the audio is already there
    /// (a device's ring buffer holds it). While that is so the queue is catching up, and it hands
    /// several filled buffers on with one wake-up of its delivery thread instead of one each; when a
    /// read would wait, every filled buffer is handed on before it. `false` when unknown.
    func canReadWithoutWaiting(frames: Int) -> Bool

    /// How many more frames the source can hold unread before it overruns (a device: the free space
    /// of its ring buffer), or `nil` when unknown. With no free buffer, the queue waits for one while
    /// this leaves room, instead of draining audio that the device still holds safely into a scratch
    /// buffer and counting it lost.
    func framesBeforeOverrun() -> Int?

    /// Stops delivering audio (for a pause or a stop); `start()` may follow.
    func stop()

    /// Releases the source's resources. Called once, after the capture thread has ended.
    func close()
}

extension AudioSource {
    /// Unknown: every filled buffer is handed on at once.
    public func canReadWithoutWaiting(frames: Int) -> Bool { false }

    /// Unknown: with no free buffer, a real-time source is drained at once.
    public func framesBeforeOverrun() -> Int? { nil }
}

/// Why capture could not start or go on. Each message says what to do.
public enum CaptureError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The requested format cannot be produced.
    case unsupportedFormat(String)
    /// The device or file could not be opened.
    case openFailed(String)
    /// Reading failed in a way the source could not recover from.
    case readFailed(String)
    /// The device went away or was suspended and could not be recovered.
    case deviceLost(String)
    /// The queue was used against its lifecycle (for example started after dispose).
    case invalidState(String)

    public var description: String {
        switch self {
        case .unsupportedFormat(let message), .openFailed(let message), .readFailed(let message),
             .deviceLost(let message), .invalidState(let message):
            return message
        }
    }
}

extension AudioSource {
    /// Most sources do not know their channels' speaker positions.
    public var channelLayout: ChannelLayout? { nil }
}
