import Foundation

/// A marker the person recording dropped in a stream (`capture-send`'s `m` key or SIGUSR1, the
/// protocol's Marker), as the `marker` event of the directory's feed reports it.
public struct StreamMarker: Sendable, Equatable, Codable {
    /// The stream's id.
    public var id: UUID
    /// Seconds from the stream's sample 0 to the marker.
    public var atSeconds: Double
    /// The marker's label (empty when it has none).
    public var label: String

    public init(id: UUID, atSeconds: Double, label: String) {
        self.id = id
        self.atSeconds = atSeconds
        self.label = label
    }

    enum CodingKeys: String, CodingKey {
        case id
        case atSeconds = "at_seconds"
        case label
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(atSeconds, forKey: .atSeconds)
        try container.encode(label, forKey: .label)
    }
}
