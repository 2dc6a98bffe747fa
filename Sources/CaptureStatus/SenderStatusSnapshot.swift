import CaptureCore

/// What the sender's status line shows at one moment, read from the running pipeline: the capture
/// levels (as a `PeakHoldMeter` shows them), the link, whether acknowledgements are overdue, how much
/// audio was captured and acknowledged, the spool backlog, the bit rate and the capture overruns.
public struct SenderStatusSnapshot: Sendable, Equatable {
    /// The state of the connection to the receiver.
    public enum LinkState: String, Sendable, Equatable, CaseIterable {
        /// Connecting for the first time (TCP, TLS or handshake under way).
        case connecting
        /// Handshake done; audio flows and acknowledgements come back.
        case streaming
        /// The link broke; audio goes to the spool while the sender reconnects.
        case reconnecting
        /// The stream ended (end of stream sent and acknowledged, or the sender is stopping).
        case finished
        /// A backup receiver stayed unreachable past `--also-give-up` and was dropped.
        case gaveUp = "gave-up"
    }

    /// A backup receiver's link, shown after the main one.
    public struct BackupLink: Sendable, Equatable {
        /// The receiver, as HOST:PORT.
        public var receiver: String
        /// Its link's state.
        public var link: LinkState
        /// Seconds of captured audio it has not acknowledged.
        public var secondsBehind: Double

        public init(receiver: String, link: LinkState, secondsBehind: Double) {
            self.receiver = receiver
            self.link = link
            self.secondsBehind = secondsBehind
        }
    }

    /// Per-channel peak and RMS of the most recent audio (see `PeakHoldMeter`); `nil` when the
    /// format cannot be metered (no PCM).
    public var levels: LevelMeter.Reading?
    /// The short-term loudness (EBU R128, last 3 s) of the most recent audio in LUFS, −infinity for
    /// silence; `nil` when the format cannot be measured (no PCM) or nothing was measured yet.
    public var shortTermLUFS: Double?
    /// The held peak of each channel in dBFS, drawn as a marker in the terminal's bars; empty for
    /// no markers.
    public var heldPeaksDBFS: [Double]
    /// The (main) receiver's connection state.
    public var link: LinkState
    /// The backup receivers' links (`--also`), in the order given; empty without backups.
    public var backups: [BackupLink]
    /// While streaming, the seconds the receiver has not acknowledged audio waiting for it, once
    /// that is overdue (see `AcknowledgementWatch`); `nil` when acknowledgements come as they should.
    public var secondsWithoutAcknowledgement: Double?
    /// Whether the connection is (or will be) protected by TLS.
    public var usesTLS: Bool
    /// Seconds of audio captured since the stream began.
    public var secondsCaptured: Double
    /// Seconds of audio the receiver has acknowledged as durably written.
    public var secondsAcknowledged: Double
    /// Bytes waiting in the spool (captured, not yet acknowledged).
    public var backlogBytes: Int
    /// Seconds of audio waiting in the spool.
    public var backlogSeconds: Double
    /// Encoded bits per second sent over the last measurement window.
    public var bitsPerSecond: Double
    /// Capture overruns (xruns) since the stream began.
    public var overruns: Int
    /// Each encoding's stream when the capture is sent in several (`--also HOST:PORT,codec=...`);
    /// empty with one.
    public var encodings: [EncodingProgress] = []

    /// How one encoding's stream stands.
    public struct EncodingProgress: Sendable, Equatable {
        /// The encoding's label (`opus-64k-20ms`).
        public var label: String
        /// Seconds every receiver of the encoding acknowledged.
        public var secondsAcknowledged: Double
        /// Seconds of it waiting in the spool.
        public var backlogSeconds: Double

        public init(label: String, secondsAcknowledged: Double, backlogSeconds: Double) {
            self.label = label
            self.secondsAcknowledged = secondsAcknowledged
            self.backlogSeconds = backlogSeconds
        }
    }

    /// The safety copy on the unit (`--record`): seconds written, or why it stopped; nil without one.
    public var localCopy: LocalCopyState?

    /// How the safety copy on the unit stands.
    public enum LocalCopyState: Sendable, Equatable {
        /// Writing: this many seconds of the capture are in the file.
        case writing(seconds: Double)
        /// Stopped before the capture ended, after this many seconds (the stream goes on).
        case stopped(seconds: Double)
    }

    public init(
        levels: LevelMeter.Reading? = nil, shortTermLUFS: Double? = nil, heldPeaksDBFS: [Double] = [], link: LinkState = .connecting,
        secondsWithoutAcknowledgement: Double? = nil, usesTLS: Bool = false,
        secondsCaptured: Double = 0, secondsAcknowledged: Double = 0, backlogBytes: Int = 0,
        backlogSeconds: Double = 0, bitsPerSecond: Double = 0, overruns: Int = 0, backups: [BackupLink] = [],
        encodings: [EncodingProgress] = [], localCopy: LocalCopyState? = nil
    ) {
        self.backups = backups
        self.encodings = encodings
        self.localCopy = localCopy
        self.levels = levels
        self.shortTermLUFS = shortTermLUFS
        self.heldPeaksDBFS = heldPeaksDBFS
        self.link = link
        self.secondsWithoutAcknowledgement = secondsWithoutAcknowledgement
        self.usesTLS = usesTLS
        self.secondsCaptured = secondsCaptured
        self.secondsAcknowledged = secondsAcknowledged
        self.backlogBytes = backlogBytes
        self.backlogSeconds = backlogSeconds
        self.bitsPerSecond = bitsPerSecond
        self.overruns = overruns
    }

    /// The link as shown: `connecting`, `streaming`, `reconnecting` or `finished`, with `+TLS` when
    /// the link uses TLS; `no ack for N s` (whole seconds) instead while acknowledgements are overdue.
    public var linkDescription: String { linkDescription(showingTLS: true) }

    /// The link as shown, with or without the `+TLS` mark.
    public func linkDescription(showingTLS: Bool) -> String {
        if let waited = secondsWithoutAcknowledgement {
            return "no ack for \(Self.wholeSeconds(waited)) s"
        }
        return usesTLS && showingTLS ? "\(link.rawValue)+TLS" : link.rawValue
    }

    /// Each backup's link as shown: `backup reconnecting 12.3s` (seconds of audio it has not
    /// acknowledged), numbered `backup1`, `backup2`... when there are several.
    public func backupDescriptions(decimals: Int) -> [String] {
        backups.enumerated().map { index, backup in
            let name = backups.count > 1 ? "backup\(index + 1)" : "backup"
            return "\(name) \(backup.link.rawValue) \(StatusFormatting.fixed(backup.secondsBehind, decimals: decimals))s"
        }
    }

    /// The local copy as shown: `rec 12.3s`, or `REC STOPPED 12.3s` once it stopped; nil without one.
    public func localCopyDescription(decimals: Int) -> String? {
        switch localCopy {
        case .writing(let seconds)?: return "rec \(StatusFormatting.fixed(seconds, decimals: decimals))s"
        case .stopped(let seconds)?: return "REC STOPPED \(StatusFormatting.fixed(seconds, decimals: decimals))s"
        case nil: return nil
        }
    }

    /// Whole seconds, rounded down (0 for anything not a positive number).
    static func wholeSeconds(_ seconds: Double) -> Int {
        seconds.isFinite && seconds > 0 ? Int(seconds.rounded(.down)) : 0
    }
}
