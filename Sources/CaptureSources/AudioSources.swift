import CaptureALSA
import CaptureCore
import CaptureSndFile

/// Where a capture's audio comes from, as capture-send's options name it: a generated tone, an
/// audio file, or an ALSA device. `AudioSources.open` turns it into an `AudioSource`; capture-send
/// and the embedding examples share it.
public enum SourceSettings: Sendable {
    /// A sine tone, generated (`ToneSource`).
    case tone(ToneSource.Settings)
    /// An audio file read through libsndfile (`FileSource`): in real time when `paced`, else as
    /// fast as it is taken; `duration` stops it after that much audio (`nil`: the whole file).
    case file(path: String, paced: Bool, duration: Duration?)
    /// An ALSA capture device (`ALSASource`).
    case device(DeviceSettings)
}

/// An ALSA capture device and how to open it.
public struct DeviceSettings: Sendable, Equatable {
    /// The ALSA PCM name (`default`, `hw:1,0`, `pulse`).
    public var name: String
    /// The format asked for; the device may give another (`strictFormat` refuses that).
    public var requested: StreamFormat
    /// Frames per capture buffer (the ALSA period).
    public var periodFrames: Int
    /// Capture buffers (the ALSA periods in its ring).
    public var bufferCount: Int
    /// Refuse a device that does not give exactly `requested`.
    public var strictFormat: Bool
    /// Keep capturing across the device going away (an interface unplugged): retry until it is
    /// back, and record the outage as a gap.
    public var reopen: Bool
    /// Stop after this much audio; nil for no limit.
    public var duration: Duration?

    public init(
        name: String, requested: StreamFormat, periodFrames: Int, bufferCount: Int, strictFormat: Bool = false, reopen: Bool = false,
        duration: Duration? = nil
    ) {
        self.name = name
        self.requested = requested
        self.periodFrames = periodFrames
        self.bufferCount = bufferCount
        self.strictFormat = strictFormat
        self.reopen = reopen
        self.duration = duration
    }
}

/// What opening a source and capturing from it reports, for the log.
public enum SourceEvent: Sendable {
    /// The device opened: what was asked and given (`asRequested` false: another format than asked).
    case deviceOpened(ALSANegotiation, asRequested: Bool)
    /// A reopening device lost, retried or got back (`DeviceSettings.reopen`).
    case device(ReopeningSource.Event)
}

/// A source, opened.
public struct OpenedSource {
    /// Where the audio comes from.
    public let source: any AudioSource
    /// For a device that reopens: stops its retries (a stop signal must not wait for a device that
    /// is gone); nil otherwise.
    public let stopRetrying: (@Sendable () -> Void)?
}

/// The one place that turns `SourceSettings` into an `AudioSource`.
public enum AudioSources {
    /// Opens the source `settings` name; `events` hears what the device does.
    public static func open(
        _ settings: SourceSettings, events: @escaping @Sendable (SourceEvent) -> Void = { _ in }
    ) throws(CaptureError) -> OpenedSource {
        switch settings {
        case .tone(let tone):
            return OpenedSource(source: try ToneSource(settings: tone), stopRetrying: nil)
        case .file(let path, let paced, let duration):
            return OpenedSource(source: try FileSource(path: path, paced: paced, duration: duration), stopRetrying: nil)
        case .device(let device):
            let alsa = try ALSASource(
                device: device.name, requested: device.requested, periodFrames: device.periodFrames, bufferCount: device.bufferCount,
                strictFormat: device.strictFormat)
            events(.deviceOpened(alsa.negotiation, asRequested: alsa.format == device.requested))
            var source: any AudioSource = alsa
            var stopRetrying: (@Sendable () -> Void)?
            if device.reopen {
                let reopening = ReopeningSource(alsa) { events(.device($0)) }
                let retries = RetryStopper(reopening)
                stopRetrying = { retries.stop() }
                source = reopening
            }
            if let duration = device.duration {
                source = DurationLimitedSource(source, frames: Saturating.frames(seconds: duration.inSeconds, rate: alsa.format.sampleRate))
            }
            return OpenedSource(source: source, stopRetrying: stopRetrying)
        }
    }
}

/// A reopening device's `cancel()`, callable from a signal handler's thread.
///
/// Sendability (`@unchecked Sendable`): `ReopeningSource` is not `Sendable` (its reads belong to the
/// capture thread), but the one member used here, `cancel()`, stores an atomic flag.
private struct RetryStopper: @unchecked Sendable {
    private let source: ReopeningSource

    init(_ source: ReopeningSource) { self.source = source }

    func stop() { source.cancel() }
}
