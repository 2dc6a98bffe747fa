import Foundation

/// One thing that happened to a stream, as its timeline in the console shows it
/// (`GET /api/streams/{id}/timeline`): a connection, a reconnect, a gap, a pause, a marker from the
/// field, an alarm raised or cleared, the end.
public struct StreamTimelineEntry: Sendable, Equatable, Codable {
    /// What happened.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// The stream's first connection was accepted.
        case opened
        /// The stream continues on a new connection.
        case resumed
        /// The connection was lost; the file waits for the sender to resume it.
        case reconnecting
        /// The stream ended, or its resume window passed.
        case finished
        /// Audio the sender could not capture (overrun, device lost...).
        case gap
        /// The crew paused capture (a gap with reason `paused`).
        case pause
        /// A marker from the field.
        case marker
        /// An alarm was raised.
        case alarmRaised = "alarm-raised"
        /// An alarm was cleared.
        case alarmCleared = "alarm-cleared"
    }

    /// When the receiver saw it.
    public var at: Date
    public var kind: Kind
    /// Where in the stream's own timeline, seconds from its sample 0 (gaps, pauses, markers); nil
    /// for what has no sample time (connections, alarms).
    public var streamSeconds: Double?
    /// What the desk reads: the peer, the gap's length and reason, the marker's label, the alarm.
    public var detail: String

    public init(at: Date, kind: Kind, streamSeconds: Double? = nil, detail: String) {
        self.at = at
        self.kind = kind
        self.streamSeconds = streamSeconds
        self.detail = detail
    }

    enum CodingKeys: String, CodingKey {
        case at, kind
        case streamSeconds = "stream_seconds"
        case detail
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        at = try APITime.decode(try container.decode(String.self, forKey: .at), forKey: .at, in: container)
        kind = try container.decode(Kind.self, forKey: .kind)
        streamSeconds = try container.decodeIfPresent(Double.self, forKey: .streamSeconds)
        detail = try container.decode(String.self, forKey: .detail)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(APITime.text(at), forKey: .at)
        try container.encode(kind, forKey: .kind)
        try container.encode(streamSeconds, forKey: .streamSeconds)
        try container.encode(detail, forKey: .detail)
    }
}

/// A stream's timeline as the API serves it: its entries, oldest first, and how many older ones
/// were let go (a stream keeps its latest `StreamTimeline.limit`).
public struct StreamTimelineSnapshot: Sendable, Equatable, Codable {
    /// The stream's id.
    public var id: UUID
    /// Entries dropped from the front to keep the limit.
    public var dropped: Int
    public var entries: [StreamTimelineEntry]

    public init(id: UUID, dropped: Int, entries: [StreamTimelineEntry]) {
        self.id = id
        self.dropped = dropped
        self.entries = entries
    }

    enum CodingKeys: String, CodingKey { case id, dropped, entries }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(dropped, forKey: .dropped)
        try container.encode(entries, forKey: .entries)
    }
}

/// A stream's latest timeline entries, bounded: a unit that reconnects every few seconds for a day
/// keeps the last `limit` of them, and says how many it let go.
struct StreamTimeline: Sendable {
    /// The most entries kept per stream.
    static let limit = 500

    private(set) var entries: [StreamTimelineEntry] = []
    private(set) var dropped = 0

    mutating func append(_ entry: StreamTimelineEntry) {
        entries.append(entry)
        if entries.count > Self.limit {
            // Drop a batch at once, so appending stays cheap on average.
            let excess = entries.count - Self.limit + Self.limit / 10
            entries.removeFirst(excess)
            dropped += excess
        }
    }
}
