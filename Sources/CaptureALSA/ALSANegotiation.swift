import CaptureCore

/// What was asked of an ALSA capture device and what it really gives, for logging and for
/// deciding whether to accept a substitute format.
public struct ALSANegotiation: Hashable, Sendable, CustomStringConvertible {
    /// The ALSA PCM name that was opened (for example `default` or `hw:1,0`).
    public var deviceName: String
    /// The format that was asked for.
    public var requested: StreamFormat
    /// The format the device delivers; this is the source's `format`.
    public var actual: StreamFormat
    /// The period size that was asked for, in frames.
    public var requestedPeriodFrames: Int
    /// The period size the device chose, in frames: a blocking read wakes up about once per period.
    public var periodFrames: Int
    /// The ring buffer size that was asked for (period × buffer count), in frames.
    public var requestedBufferFrames: Int
    /// The ring buffer size the device chose, in frames: how much audio can wait unread before an overrun.
    public var bufferFrames: Int
    /// The sample formats carried by capture-send that the device accepts (with the chosen access).
    public var supportedSampleFormats: [PCMSampleFormat]

    /// Creates a negotiation record.
    public init(
        deviceName: String, requested: StreamFormat, actual: StreamFormat,
        requestedPeriodFrames: Int, periodFrames: Int, requestedBufferFrames: Int, bufferFrames: Int,
        supportedSampleFormats: [PCMSampleFormat]
    ) {
        self.deviceName = deviceName
        self.requested = requested
        self.actual = actual
        self.requestedPeriodFrames = requestedPeriodFrames
        self.periodFrames = periodFrames
        self.requestedBufferFrames = requestedBufferFrames
        self.bufferFrames = bufferFrames
        self.supportedSampleFormats = supportedSampleFormats
    }

    /// How the delivered format differs from the requested one, one phrase per difference
    /// (empty when the device gives exactly what was asked).
    public var formatMismatches: [String] {
        var differences: [String] = []
        let requestedSample = requested.pcmSampleFormat.map(\.description) ?? "\(requested.bitsPerChannel)-bit"
        let actualSample = actual.pcmSampleFormat.map(\.description) ?? "\(actual.bitsPerChannel)-bit"
        if requestedSample != actualSample {
            differences.append("sample format \(actualSample) instead of \(requestedSample)")
        }
        if requested.sampleRate != actual.sampleRate {
            differences.append("\(Int(actual.sampleRate)) Hz instead of \(Int(requested.sampleRate)) Hz")
        }
        if requested.channelsPerFrame != actual.channelsPerFrame {
            differences.append("\(actual.channelsPerFrame) channels instead of \(requested.channelsPerFrame)")
        }
        return differences
    }

    /// Whether the device delivers exactly the requested format.
    public var formatMatchesRequest: Bool { formatMismatches.isEmpty }

    public var description: String {
        let formatPart = formatMatchesRequest
            ? "capturing \(actual)"
            : "asked for \(requested), capturing \(actual) (\(formatMismatches.joined(separator: ", ")))"
        return "ALSA device '\(deviceName)': \(formatPart); period \(periodFrames) frames (asked \(requestedPeriodFrames)), buffer \(bufferFrames) frames (asked \(requestedBufferFrames))"
    }
}
