import CaptureWire

/// How one simulated stream ended and what it measured.
struct StreamResult: Sendable {
    let index: Int
    let name: String
    /// Nil when the stream completed (EndAccepted); otherwise why it failed.
    var failure: String?
    /// The protocol name of the error that failed the stream (or "CONNECT", "TLS", "TIMEOUT", ...).
    var failureCode: String?
    /// Error frames received from the receiver, by protocol name (including ones that were retried).
    var receivedErrors: [String: Int] = [:]
    /// AudioData messages written, counting resends.
    var messagesSent = 0
    /// AudioData messages written again after a reconnect.
    var messagesResent = 0
    /// Connections after the first.
    var reconnects = 0
    /// Link drops capture-load made on purpose (--disconnect-probability).
    var injectedDisconnects = 0
    /// Microseconds from an AudioData's write to the first Ack that covers it.
    var ackLatenciesMicroseconds: [UInt32] = []
}

/// The names PROTOCOL.md §10 gives error codes.
enum ErrorCodeName {
    static func of(_ code: Capture_V1_Error.Code) -> String {
        let names = [
            "UNSPECIFIED", "MALFORMED_FRAME", "FRAME_TOO_LARGE", "UNSUPPORTED_VERSION", "BAD_FORMAT",
            "UNEXPECTED_MESSAGE", "AUTHENTICATION_FAILED", "TOO_MANY_STREAMS", "TIMEOUT", "SEQUENCE_GAP",
            "STORAGE_FAILED", "SHUTTING_DOWN", "STREAM_BUSY", "INTERNAL", "INVALID_MESSAGE", "RATE_LIMITED", "NOT_STREAM_OWNER",
        ]
        let raw = code.rawValue
        return raw >= 0 && raw < names.count ? names[raw] : "CODE_\(raw)"
    }
}
