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
        }
    }
}
