/// The type byte of a frame.
public enum WireMessageType: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    case hello = 1
    case helloAccepted = 2
    case audioData = 3
    case gap = 4
    case ack = 5
    case heartbeat = 6
    case endOfStream = 7
    case endAccepted = 8
    case error = 9
    /// A marker (a point the person recording marked). Sent only to a receiver whose
    /// HelloAccepted lists it in `accepted_frame_types` (PROTOCOL.md §6.10).
    case marker = 10
    /// A filled gap (audio not captured that the packets carry as encoded silence). Sent only to a
    /// receiver whose HelloAccepted lists it in `accepted_frame_types` (PROTOCOL.md §6.11).
    case filledGap = 11

    /// The message's name as PROTOCOL.md spells it.
    public var description: String {
        switch self {
        case .hello: return "Hello"
        case .helloAccepted: return "HelloAccepted"
        case .audioData: return "AudioData"
        case .gap: return "Gap"
        case .ack: return "Ack"
        case .heartbeat: return "Heartbeat"
        case .endOfStream: return "EndOfStream"
        case .endAccepted: return "EndAccepted"
        case .error: return "Error"
        case .marker: return "Marker"
        case .filledGap: return "FilledGap"
        }
    }
}
