import CaptureWire
import Foundation

/// Where a stream the receiver has seen stands.
public enum StreamState: String, Sendable, Codable, Equatable {
    /// Its sender is connected and streaming.
    case live
    /// Its connection was lost; the file waits for the sender to resume it within the resume window.
    case reconnecting
    /// It ended, or its resume window passed: the file is closed.
    case finished
}

/// The latest levels a stream's sender measured, in dBFS per channel (−120 stands for silence), and
/// its EBU R128 loudness when the sender measures it (senders before it, and compressed capture,
/// send none).
public struct StreamLevels: Sendable, Equatable, Codable {
    /// Each channel's sample peak in dBFS, 0 at full scale.
    public var peakDBFS: [Double]
    /// Each channel's RMS in dBFS.
    public var rmsDBFS: [Double]
    /// The momentary loudness (last 400 ms) in LUFS, −120 for silence; nil when not measured.
    public var momentaryLUFS: Double?
    /// The short-term loudness (last 3 s) in LUFS, −120 for silence; nil when not measured.
    public var shortTermLUFS: Double?
    /// Each channel's true peak in dBTP over the latest audio; nil when not measured.
    public var truePeakDBTP: [Double]?

    public init(peakDBFS: [Double], rmsDBFS: [Double], momentaryLUFS: Double? = nil, shortTermLUFS: Double? = nil, truePeakDBTP: [Double]? = nil) {
        self.peakDBFS = peakDBFS
        self.rmsDBFS = rmsDBFS
        self.momentaryLUFS = momentaryLUFS
        self.shortTermLUFS = shortTermLUFS
        self.truePeakDBTP = truePeakDBTP
    }

    /// The levels an AudioData carried.
    public init(_ levels: AudioLevels) {
        self.init(
            peakDBFS: levels.peakDBFS, rmsDBFS: levels.rmsDBFS, momentaryLUFS: levels.momentaryLUFS, shortTermLUFS: levels.shortTermLUFS,
            truePeakDBTP: levels.truePeakDBTP.isEmpty ? nil : levels.truePeakDBTP
        )
    }

    enum CodingKeys: String, CodingKey {
        case peakDBFS = "peak_dbfs"
        case rmsDBFS = "rms_dbfs"
        case momentaryLUFS = "momentary_lufs"
        case shortTermLUFS = "short_term_lufs"
        case truePeakDBTP = "true_peak_dbtp"
    }
}

/// One row of the receiver's stream directory, as `GET /api/streams` serves it. Its JSON field
/// names are stable (docs/HTTP-API.md, "Streams"); times are ISO 8601 UTC strings with
/// milliseconds, durations seconds.
public struct StreamSnapshot: Sendable, Equatable, Codable {
    /// The stream's id (the Hello's UUID, lowercase).
    public var id: UUID
    /// The sender's name for the stream.
    public var name: String
    /// The sender's address (host and port) on its latest connection.
    public var peer: String
    /// The audio format, e.g. "s16 48000 Hz 2 ch" or "opus 48000 Hz 2 ch, 960 frames/packet".
    public var format: String
    /// Live, reconnecting or finished.
    public var state: StreamState
    /// UTC wall-clock time of the stream's sample 0.
    public var started: Date
    /// Seconds of audio durably on disk (written and synced), from sample 0.
    public var secondsOnDisk: Double
    /// Seconds of audio the receiver has acknowledged to the sender, from sample 0.
    public var secondsAcknowledged: Double
    /// When audio last arrived; nil before the first AudioData.
    public var lastAudioReceived: Date?
    /// Gaps (audio the sender could not capture) this receiver recorded in the stream.
    public var gapCount: Int
    /// Seconds those gaps cover.
    public var gapSeconds: Double
    /// The file being written, relative to the receiver's output folder (`--out`).
    public var file: String
    /// The levels of the latest audio that carried them; nil when the sender sends none (an older
    /// sender) or none arrived yet.
    public var levels: StreamLevels?
    /// The alarms raised on the stream now (`StreamAlarmMachine`), in `StreamAlarmKind` order;
    /// empty when none, or when alarms are off.
    public var alarms: [StreamAlarmKind]
    /// The capture this stream is one encoding of, when its sender feeds several from one capture
    /// (their rows share it); nil otherwise.
    public var captureID: UUID?
    /// That encoding's label (`opus-64k-20ms`); nil when the stream names no capture.
    public var encoding: String?

    enum CodingKeys: String, CodingKey {
        case id, name, peer, format, state, started, alarms, encoding
        case captureID = "capture_id"
        case secondsOnDisk = "seconds_on_disk"
        case secondsAcknowledged = "seconds_acknowledged"
        case lastAudioReceived = "last_audio_received"
        case gapCount = "gap_count"
        case gapSeconds = "gap_seconds"
        case file, levels
    }

    public init(
        id: UUID, name: String, peer: String, format: String, state: StreamState, started: Date, secondsOnDisk: Double = 0,
        secondsAcknowledged: Double = 0, lastAudioReceived: Date? = nil, gapCount: Int = 0, gapSeconds: Double = 0, file: String,
        levels: StreamLevels? = nil, alarms: [StreamAlarmKind] = [], captureID: UUID? = nil, encoding: String? = nil
    ) {
        self.captureID = captureID
        self.encoding = encoding
        self.id = id
        self.name = name
        self.peer = peer
        self.format = format
        self.state = state
        self.started = started
        self.secondsOnDisk = secondsOnDisk
        self.secondsAcknowledged = secondsAcknowledged
        self.lastAudioReceived = lastAudioReceived
        self.gapCount = gapCount
        self.gapSeconds = gapSeconds
        self.file = file
        self.levels = levels
        self.alarms = alarms
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UUID.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        peer = try container.decode(String.self, forKey: .peer)
        format = try container.decode(String.self, forKey: .format)
        state = try container.decode(StreamState.self, forKey: .state)
        started = try APITime.decode(container.decode(String.self, forKey: .started), forKey: CodingKeys.started, in: container)
        secondsOnDisk = try container.decode(Double.self, forKey: .secondsOnDisk)
        secondsAcknowledged = try container.decode(Double.self, forKey: .secondsAcknowledged)
        lastAudioReceived = try container.decodeIfPresent(String.self, forKey: .lastAudioReceived).map {
            try APITime.decode($0, forKey: CodingKeys.lastAudioReceived, in: container)
        }
        gapCount = try container.decode(Int.self, forKey: .gapCount)
        gapSeconds = try container.decode(Double.self, forKey: .gapSeconds)
        file = try container.decode(String.self, forKey: .file)
        levels = try container.decodeIfPresent(StreamLevels.self, forKey: .levels)
        alarms = try container.decodeIfPresent([StreamAlarmKind].self, forKey: .alarms) ?? []
        captureID = try container.decodeIfPresent(UUID.self, forKey: .captureID)
        encoding = try container.decodeIfPresent(String.self, forKey: .encoding)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(peer, forKey: .peer)
        try container.encode(format, forKey: .format)
        try container.encode(state, forKey: .state)
        try container.encode(APITime.text(started), forKey: .started)
        try container.encode(secondsOnDisk, forKey: .secondsOnDisk)
        try container.encode(secondsAcknowledged, forKey: .secondsAcknowledged)
        try container.encode(lastAudioReceived.map(APITime.text), forKey: .lastAudioReceived)
        try container.encode(gapCount, forKey: .gapCount)
        try container.encode(gapSeconds, forKey: .gapSeconds)
        try container.encode(file, forKey: .file)
        try container.encode(levels, forKey: .levels)
        try container.encode(alarms, forKey: .alarms)
        try container.encode(captureID?.uuidString.lowercased(), forKey: .captureID)
        try container.encode(encoding, forKey: .encoding)
    }
}

/// Times in the API: ISO 8601, UTC, with milliseconds ("2026-01-01T00:00:00.000Z").
enum APITime {
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func text(_ date: Date) -> String { date.formatted(style) }

    static func decode<Key: CodingKey>(_ text: String, forKey key: Key, in container: KeyedDecodingContainer<Key>) throws -> Date {
        guard let date = try? style.parse(text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not an ISO 8601 time: \(text)")
        }
        return date
    }
}
