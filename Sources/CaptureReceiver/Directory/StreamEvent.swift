import Foundation

/// Something that happened to a stream, as the directory's event feed (Server-Sent Events) reports
/// it. `name` is the SSE event name; `encodedPayload()` the JSON of its data line.
public enum StreamEvent: Sendable, Equatable {
    /// A new stream's first connection was accepted; its row as it starts.
    case opened(StreamSnapshot)
    /// A stream continues its file on a new connection.
    case resumed(StreamSnapshot)
    /// The sender could not capture some audio; the receiver recorded a gap.
    case gap(StreamGap)
    /// A stream's connection ended: its row says whether it is `reconnecting` (its file waits for
    /// a resume) or `finished`. A reconnecting stream whose resume window passes is closed again,
    /// as finished.
    case closed(StreamSnapshot)
    /// The latest levels of a stream, at most about ten times a second per stream.
    case levels(StreamLevelsUpdate)
    /// An alarm raised or cleared on a stream.
    case alarm(StreamAlarmEvent)
    /// The person recording dropped a marker; the receiver recorded it.
    case marker(StreamMarker)

    /// The Server-Sent Events event name: opened, resumed, gap, closed, levels, alarm or marker.
    public var name: String {
        switch self {
        case .opened: return "opened"
        case .resumed: return "resumed"
        case .gap: return "gap"
        case .closed: return "closed"
        case .levels: return "levels"
        case .alarm: return "alarm"
        case .marker: return "marker"
        }
    }

    /// The stream the event is about.
    public var streamID: UUID {
        switch self {
        case .opened(let row), .resumed(let row), .closed(let row): return row.id
        case .gap(let gap): return gap.id
        case .levels(let update): return update.id
        case .alarm(let alarm): return alarm.id
        case .marker(let marker): return marker.id
        }
    }

    /// The event's data as JSON: the stream's row for opened, resumed and closed; the gap, the
    /// levels, the alarm or the marker otherwise (docs/HTTP-API.md, "Streams").
    public func encodedPayload(encoder: JSONEncoder = StreamEvent.encoder) throws -> Data {
        switch self {
        case .opened(let row), .resumed(let row), .closed(let row): return try encoder.encode(row)
        case .gap(let gap): return try encoder.encode(gap)
        case .levels(let update): return try encoder.encode(update)
        case .alarm(let alarm): return try encoder.encode(alarm)
        case .marker(let marker): return try encoder.encode(marker)
        }
    }

    /// A compact encoder with sorted keys and unescaped slashes (the API's JSON).
    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// A gap the receiver recorded in a stream.
public struct StreamGap: Sendable, Equatable, Codable {
    /// The stream's id.
    public var id: UUID
    /// Seconds from the stream's sample 0 to where the gap begins.
    public var atSeconds: Double
    /// Seconds of audio missing.
    public var seconds: Double
    /// Why, as the sender said ("overrun", "device-lost", ...).
    public var reason: String
    /// The stream's gaps so far, this one included.
    public var gapCount: Int

    public init(id: UUID, atSeconds: Double, seconds: Double, reason: String, gapCount: Int) {
        self.id = id
        self.atSeconds = atSeconds
        self.seconds = seconds
        self.reason = reason
        self.gapCount = gapCount
    }

    enum CodingKeys: String, CodingKey {
        case id
        case atSeconds = "at_seconds"
        case seconds, reason
        case gapCount = "gap_count"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(atSeconds, forKey: .atSeconds)
        try container.encode(seconds, forKey: .seconds)
        try container.encode(reason, forKey: .reason)
        try container.encode(gapCount, forKey: .gapCount)
    }
}

/// A stream's latest levels, for the console's meters.
public struct StreamLevelsUpdate: Sendable, Equatable, Codable {
    /// The stream's id.
    public var id: UUID
    /// The levels of the latest audio that carried them.
    public var levels: StreamLevels

    public init(id: UUID, levels: StreamLevels) {
        self.id = id
        self.levels = levels
    }

    enum CodingKeys: String, CodingKey {
        case id
        case peakDBFS = "peak_dbfs"
        case rmsDBFS = "rms_dbfs"
        case momentaryLUFS = "momentary_lufs"
        case shortTermLUFS = "short_term_lufs"
        case truePeakDBTP = "true_peak_dbtp"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UUID.self, forKey: .id)
        levels = StreamLevels(
            peakDBFS: try container.decode([Double].self, forKey: .peakDBFS), rmsDBFS: try container.decode([Double].self, forKey: .rmsDBFS),
            momentaryLUFS: try container.decodeIfPresent(Double.self, forKey: .momentaryLUFS),
            shortTermLUFS: try container.decodeIfPresent(Double.self, forKey: .shortTermLUFS),
            truePeakDBTP: try container.decodeIfPresent([Double].self, forKey: .truePeakDBTP))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(levels.peakDBFS, forKey: .peakDBFS)
        try container.encode(levels.rmsDBFS, forKey: .rmsDBFS)
        // Only what the sender measured: an older sender's levels keep their two keys.
        try container.encodeIfPresent(levels.momentaryLUFS, forKey: .momentaryLUFS)
        try container.encodeIfPresent(levels.shortTermLUFS, forKey: .shortTermLUFS)
        try container.encodeIfPresent(levels.truePeakDBTP, forKey: .truePeakDBTP)
    }
}

/// An alarm raised or cleared on a stream, as the event feed (`alarm` events) and the directory's
/// alarm observer (the receiver's log and metrics) get it.
public struct StreamAlarmEvent: Sendable, Equatable, Codable {
    /// The stream's id.
    public var id: UUID
    /// The stream's name.
    public var name: String
    /// What the alarm is about.
    public var kind: StreamAlarmKind
    /// Raised or cleared.
    public var change: StreamAlarmTransition.Change
    /// When its condition began (raised) or ended (cleared).
    public var since: Date
    /// The condition and its figures, in words.
    public var detail: String
    /// Every alarm raised on the stream after this change.
    public var raised: [StreamAlarmKind]

    public init(id: UUID, name: String, transition: StreamAlarmTransition, raised: [StreamAlarmKind]) {
        self.id = id
        self.name = name
        kind = transition.kind
        change = transition.change
        since = transition.since
        detail = transition.detail
        self.raised = raised
    }

    enum CodingKeys: String, CodingKey {
        case id, name, kind, change, since, detail, raised
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UUID.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        kind = try container.decode(StreamAlarmKind.self, forKey: .kind)
        change = try container.decode(StreamAlarmTransition.Change.self, forKey: .change)
        since = try APITime.decode(container.decode(String.self, forKey: .since), forKey: CodingKeys.since, in: container)
        detail = try container.decode(String.self, forKey: .detail)
        raised = try container.decode([StreamAlarmKind].self, forKey: .raised)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(kind, forKey: .kind)
        try container.encode(change, forKey: .change)
        try container.encode(APITime.text(since), forKey: .since)
        try container.encode(detail, forKey: .detail)
        try container.encode(raised, forKey: .raised)
    }
}
