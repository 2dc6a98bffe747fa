#if canImport(Glibc)
import Glibc
#endif

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

/// Why capture could not start or go on. Each message says what to do, naming the settings to
/// change as a `SettingNaming` spells them (`message(naming:)`; `description`: the library's words).
public enum CaptureError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The requested format cannot be produced.
    case unsupportedFormat(String)
    /// The file could not be opened, or the source was asked for something it cannot do.
    case openFailed(String)
    /// A capture device could not be opened (`failure.activity` `.opening`) or set up (`.settingUp`).
    case deviceUnavailable(DeviceFailure)
    /// Reading failed in a way the source could not recover from.
    case readFailed(String)
    /// The capture device `device` delivers no audio: its reads keep coming back empty.
    case deviceSilent(device: String)
    /// The device went away or was suspended and could not be recovered (`failure.activity` `.using`).
    case deviceLost(DeviceFailure)
    /// The queue was used against its lifecycle (for example started after dispose).
    case invalidState(String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .unsupportedFormat(let message), .openFailed(let message), .readFailed(let message), .invalidState(let message):
            return message
        case .deviceUnavailable(let failure), .deviceLost(let failure):
            return failure.message(naming: naming)
        case .deviceSilent(let device):
            return "ALSA capture device '\(device)' delivers no audio; check that it is running, or use `\(naming.name(of: .toneSource))` to test without it"
        }
    }
}

/// What went wrong with an ALSA capture device, as data: the device, what was being done with it,
/// and libasound's error. `CaptureError` carries it; `message(naming:)` words it.
public struct DeviceFailure: Sendable, Equatable {
    /// What was being done with the device when it failed.
    public enum Activity: Sendable, Equatable {
        /// Opening it.
        case opening
        /// Setting it up once open: `step` says which step ("setting 2 channels").
        case settingUp(step: String)
        /// Using it: `what` was happening ("capturing", "starting", "recovering from an overrun").
        case using(String)
    }

    /// The device's ALSA PCM name ("default", "hw:CARD=USB,DEV=0").
    public var device: String
    /// What was being done.
    public var activity: Activity
    /// libasound's error code (a negative errno).
    public var code: Int32
    /// libasound's words for `code` (`snd_strerror`).
    public var reason: String

    /// `device` failed while `activity`, with libasound's `code` and its words for it, `reason`.
    public init(device: String, activity: Activity, code: Int32, reason: String) {
        self.device = device
        self.activity = activity
        self.code = code
        self.reason = reason
    }

    /// The failure's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch activity {
        case .opening:
            var reason = reason
            if code == -EBUSY {
                reason += " (another program is capturing from it)"
            } else if code == -ENOENT || code == -ENODEV {
                reason += " (no such capture device; there may be no sound card)"
            }
            return "cannot open ALSA capture device '\(device)': \(reason). \(Self.noDeviceAdvice(naming))"
        case .settingUp(let step):
            return "cannot set up ALSA capture device '\(device)' (\(step)): \(reason). Try another device, for example a `plughw:` one. \(Self.noDeviceAdvice(naming))"
        case .using(let what):
            return "ALSA capture device '\(device)' was lost while \(what): \(reason). Check that it is still connected; with `\(naming.name(of: .reopenDevice))` capture-send reopens it and records the gap."
        }
    }

    /// What the user can do when no capture device is usable.
    private static func noDeviceAdvice(_ naming: any SettingNaming) -> String {
        "Run `\(naming.name(of: .deviceList))` to see the capture devices, or use `\(naming.name(of: .toneSource))` to send a test tone without a sound card."
    }
}

extension AudioSource {
    /// Most sources do not know their channels' speaker positions.
    public var channelLayout: ChannelLayout? { nil }
}
