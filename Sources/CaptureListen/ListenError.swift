import CaptureCore

/// Why a stream cannot be listened to.
public enum ListenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stream's format or codec configuration cannot be played; the text says what is wrong.
    case unsupportedStream(String)
    /// The stream has ended: there is nothing live to listen to.
    case streamEnded

    public var description: String {
        switch self {
        case .unsupportedStream(let why):
            return "this stream cannot be listened to: \(why)"
        case .streamEnded:
            return "this stream has ended: there is no live audio to listen to"
        }
    }
}

/// Why a listener's audio ended.
public enum ListenEndReason: Equatable, Sendable, CustomStringConvertible {
    /// The stream ended (the sender finished or disconnected for good, or the receiver shut down).
    case streamEnded
    /// The listener read more slowly than the stream plays and fell further behind than the bound
    /// allows; it was dropped so that it holds no more memory and slows no one.
    case tooSlow(bound: Duration)
    /// The receiver could not prepare this stream's audio for listening as fast as it arrived (its
    /// queue passed the bound); every listener of the stream was dropped. The recording is unaffected.
    case receiverBehind(bound: Duration)
    /// The listener cancelled (the HTTP client went away).
    case cancelled
    /// Encoding the stream for listening failed; the text says why. The recording is unaffected.
    case failed(String)

    public var description: String {
        switch self {
        case .streamEnded:
            return "the stream ended"
        case .tooSlow(let bound):
            return "the listener fell more than \(bound.secondsText) s behind the live stream and was dropped: connect again to listen from the live edge"
        case .receiverBehind(let bound):
            return "the receiver fell more than \(bound.secondsText) s behind preparing this stream for listening and dropped its listeners (the recording is unaffected): connect again, or listen to fewer streams at once"
        case .cancelled:
            return "the listener stopped listening"
        case .failed(let why):
            return "the stream could not be encoded for listening (the recording is unaffected): \(why)"
        }
    }
}

/// The bounds of a listen hub: how far a listener or the hub's own queue may fall behind before
/// listeners are dropped, and how the pre-roll and the listen encoder are set up.
public struct ListenLimits: Equatable, Sendable {
    /// Audio a listener may have waiting unread before it is dropped (default 2 s).
    public var listenerBacklog: Duration
    /// Offered audio the hub's executor may have waiting before all the stream's listeners are
    /// dropped and offers are refused until it catches up (default 2 s).
    public var queueBacklog: Duration
    /// Samples at 48 kHz of recent packets a joining listener gets first, covered by its pre-skip
    /// (default 3840: 80 ms, RFC 7845 §4.2).
    public var preRollSamples: Int
    /// Bit rate of the Opus encoder for PCM streams, in bits per second, per channel listened to
    /// (mono or stereo; default 64 000, so 128 kbit/s stereo).
    public var encoderBitratePerChannel: Int

    /// Creates limits; every default is the one stated on its property.
    public init(
        listenerBacklog: Duration = .seconds(2), queueBacklog: Duration = .seconds(2),
        preRollSamples: Int = 3_840, encoderBitratePerChannel: Int = 64_000
    ) {
        self.listenerBacklog = listenerBacklog
        self.queueBacklog = queueBacklog
        self.preRollSamples = preRollSamples
        self.encoderBitratePerChannel = encoderBitratePerChannel
    }

    var listenerBacklogSamples: Int { Self.samples(in: listenerBacklog) }
    var queueBacklogSamples: Int { Self.samples(in: queueBacklog) }

    /// `duration` at 48 kHz, the rate every listener hears, rounded toward zero and clamped to
    /// `Int`'s range (whatever an embedding program sets).
    static func samples(in duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(clamping: Int128(seconds) * 48_000 + Int128(attoseconds / 20_833_333_333_333))
    }
}

/// What a listen hub has done, for the receiver's metrics and for tests.
public struct ListenHubStatistics: Equatable, Sendable {
    /// Listeners attached now.
    public var listeners: Int
    /// Opus encoders running now for this stream (0 or 1; always 0 for an Opus stream).
    public var activeEncoders: Int
    /// Opus encoders created over the hub's life.
    public var encodersCreated: Int
    /// Audio buffers the hub's executor took in (offers made while nobody listened are not counted:
    /// they return at once).
    public var buffersProcessed: Int
    /// Listeners dropped for falling behind, over the hub's life.
    public var listenersDropped: Int
}
