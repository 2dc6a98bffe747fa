import CaptureCore

/// Everything that can go wrong on the wire, each with the protocol error code it is reported
/// with and a message that tells the user what to do. Every `WireError` is fatal to the connection:
/// the side that detects it sends `errorFrame` (where the peer can read it) and closes.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    // MARK: Preamble (receiver side)
    /// The first bytes are not the preamble and not a protocol we recognise.
    case badPreamble(received: [UInt8])
    /// A TLS ClientHello arrived on a plaintext port.
    case clientSpeaksTLS
    /// An HTTP request arrived (its method, e.g. "GET").
    case clientSpeaksHTTP(method: String)
    /// The connection closed before the whole preamble arrived.
    case truncatedPreamble(receivedBytes: Int)
    /// The peer speaks another protocol version (preamble byte or `Hello.protocol_version`).
    case unsupportedVersion(received: UInt32, supported: UInt32)

    // MARK: First frame (sender side)
    /// The receiver answered with a TLS record: it expects TLS.
    case receiverSpeaksTLS
    /// The receiver answered with an HTTP response: the address is a web server.
    case receiverSpeaksHTTP

    // MARK: Framing
    /// A length field of 0 (a frame always has its type byte).
    case zeroLengthFrame
    /// A length field above the accepted maximum.
    case frameTooLarge(length: UInt32, limit: Int)
    /// The first frame (the Hello, read before authentication) is above the Hello limit.
    case helloTooLarge(length: UInt32, limit: Int)
    /// A type byte that names no message.
    case unknownFrameType(UInt8)
    /// The connection closed in the middle of a frame.
    case truncatedFrame(receivedBytes: Int, expectedBytes: Int?)
    /// The body is not a valid protobuf encoding of its message.
    case undecodableBody(type: WireMessageType, byteCount: Int, reason: String)
    /// A message could not be encoded (an internal error).
    case encodingFailed(type: WireMessageType, reason: String)

    // MARK: Handshake
    /// A Hello without a stream format.
    case missingFormat
    /// A Hello whose stream format is invalid or unsupported.
    case badFormat(StreamFormatError)
    /// A message the protocol does not allow at this point.
    case unexpectedMessage(WireMessageType, expecting: String)
    /// A field that breaks a rule of its message (stream id length, name length, negative time...).
    case invalidField(message: WireMessageType, field: String, reason: String)

    // MARK: Audio
    /// An AudioData or Gap whose sequence is beyond the next expected one.
    case sequenceGap(expected: UInt64, received: UInt64)
    /// A message whose first sample time does not continue the stream's timeline.
    case sampleTimeMismatch(sequence: UInt64, expected: Int64, received: Int64)
    /// A VBR AudioData whose `packet_sizes` count differs from `packet_count`.
    case packetSizeCountMismatch(sequence: UInt64, packetCount: UInt32, sizeCount: Int)
    /// A VBR AudioData whose packet sizes do not add up to the payload size.
    case packetSizesSumMismatch(sequence: UInt64, sizesSum: UInt64, payloadBytes: Int)
    /// A constant bit rate (PCM) AudioData whose payload is not `packet_count` packets.
    case payloadSizeMismatch(sequence: UInt64, expectedBytes: UInt64, receivedBytes: Int)
    /// An AudioData whose `frame_count` is not `packet_count × frames_per_packet`.
    case frameCountMismatch(sequence: UInt64, expected: UInt64, received: UInt32)
    /// EndOfStream's `last_sequence` is not the last sequence received.
    case endOfStreamSequenceMismatch(lastReceived: UInt64, claimed: UInt64)
    /// EndOfStream's `end_sample_time` is not the end of the received audio.
    case endOfStreamSampleTimeMismatch(expected: Int64, claimed: Int64)

    // MARK: Sender side
    /// An Ack for a sequence that was never sent on this connection.
    case ackBeyondSent(acknowledged: UInt64, highestSent: UInt64)
    /// The receiver wants to resume before the oldest sequence the sender still holds: it holds the
    /// stream only up to `heldUntilSampleTime` (the sample index where its recording ends), and what
    /// lies between was acknowledged and then lost.
    case cannotResume(requested: UInt64, oldestHeld: UInt64, heldUntilSampleTime: Int64)
    /// The receiver wants to resume after the newest sequence the sender has.
    case resumeBeyondSent(requested: UInt64, nextUnsent: UInt64)
    /// An EndAccepted that does not name the EndOfStream this sender sent: the receiver did not read
    /// the stream's end (or confirms another stream), so nothing is confirmed.
    case endAcceptedMismatch(sent: StreamEnd, confirmed: StreamEnd)
    /// This side tried to send out of protocol order (a bug in the caller).
    case sendOutOfOrder(String)

    /// The protocol error code this error is reported with.
    public var code: Capture_V1_Error.Code {
        switch self {
        case .badPreamble, .clientSpeaksTLS, .clientSpeaksHTTP, .truncatedPreamble, .receiverSpeaksTLS,
            .receiverSpeaksHTTP, .zeroLengthFrame, .unknownFrameType, .truncatedFrame, .undecodableBody:
            return .malformedFrame
        case .frameTooLarge, .helloTooLarge: return .frameTooLarge
        case .unsupportedVersion: return .unsupportedVersion
        case .missingFormat, .badFormat: return .badFormat
        case .unexpectedMessage: return .unexpectedMessage
        case .sequenceGap, .cannotResume: return .sequenceGap
        case .invalidField, .sampleTimeMismatch, .packetSizeCountMismatch, .packetSizesSumMismatch,
            .payloadSizeMismatch, .frameCountMismatch, .endOfStreamSequenceMismatch,
            .endOfStreamSampleTimeMismatch, .ackBeyondSent, .resumeBeyondSent, .endAcceptedMismatch:
            return .invalidMessage
        case .encodingFailed, .sendOutOfOrder: return .internal
        }
    }

    /// Whether the peer could read an Error frame about this: false when it speaks another
    /// protocol (TLS, HTTP, garbage) and the connection should simply be closed.
    public var peerUnderstandsErrorFrame: Bool {
        switch self {
        case .badPreamble, .clientSpeaksTLS, .clientSpeaksHTTP, .receiverSpeaksTLS, .receiverSpeaksHTTP:
            return false
        default:
            return true
        }
    }

    /// The Error message to send to the peer before closing.
    public var errorFrame: Capture_V1_Error {
        var frame = Capture_V1_Error()
        frame.code = code
        frame.message = description
        frame.fatal = true
        if case .cannotResume(_, _, let heldUntil) = self { frame.heldUntilSampleTime = heldUntil }
        return frame
    }

    public var description: String { message(naming: LibrarySettingNames()) }

    /// How to trust a TLS receiver, as `naming` names the settings: "--tls (and --ca or --pin to trust its certificate)".
    public static func connectWithTLS(naming: any SettingNaming) -> String {
        "\(naming.name(of: .senderTLS)) (and \(naming.name(of: .certificateAuthority)) or \(naming.name(of: .certificatePin)) to trust its certificate)"
    }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .badPreamble(let received):
            return "the connection did not start with the capture stream preamble: received \(Self.hex(received))"
                + " (\(Self.printable(received))), expected \(Self.hex(WireProtocol.magic)) (\"CAPSTRM\") and a"
                + " version byte; connect with capture-send, or check that the port is capture-recv's"
        case .clientSpeaksTLS:
            return "the client speaks TLS; start capture-recv with \(naming.name(of: .receiverCertificate))/\(naming.name(of: .receiverKey))"
                + " or connect without \(naming.name(of: .senderTLS))"
        case .clientSpeaksHTTP(let method):
            return "the client sent an HTTP \(method) request; this port speaks the capture streaming protocol,"
                + " not HTTP: connect with capture-send"
        case .truncatedPreamble(let count):
            return "the connection closed after \(count) of the \(WireProtocol.preambleLength) preamble bytes;"
                + " the peer is not capture-send or gave up"
        case .unsupportedVersion(let received, let supported):
            return "the peer speaks protocol version \(received) but this side supports version \(supported);"
                + " install matching versions of capture-send and capture-recv"
        case .receiverSpeaksTLS:
            return "the receiver speaks TLS; connect with \(Self.connectWithTLS(naming: naming))"
        case .receiverSpeaksHTTP:
            return "the receiver answered with HTTP: the address is a web server, not capture-recv; check host and port"
        case .zeroLengthFrame:
            return "malformed frame: length 0 (a frame has at least its type byte); the peer's framing is broken"
        case .frameTooLarge(let length, let limit):
            return "frame of \(length) bytes exceeds the limit of \(limit) bytes; send smaller AudioData"
                + " (the receiver announces its limit in HelloAccepted.max_frame_bytes)"
        case .helloTooLarge(let length, let limit):
            return "a first frame (Hello) of \(length) bytes exceeds the limit of \(limit) bytes before authentication"
                + " (a magic cookie of at most 64 KiB and short names fit)"
        case .unknownFrameType(let type):
            return "malformed frame: unknown frame type \(type) (known types are 1 to 9);"
                + " the peer speaks another protocol revision or its framing is broken"
        case .truncatedFrame(let received, let expected):
            let of = expected.map { " of \($0)" } ?? ""
            return "the connection closed in the middle of a frame (\(received)\(of) bytes received)"
        case .undecodableBody(let type, let count, let reason):
            return "malformed frame: the \(count)-byte body of a \(type) frame is not a valid \(type) message (\(reason))"
        case .encodingFailed(let type, let reason):
            return "internal error: could not encode a \(type) message (\(reason))"
        case .missingFormat:
            return "the Hello carries no stream format; the sender must describe its audio"
        case .badFormat(let error):
            return "the stream format is not accepted: \(error)"
        case .unexpectedMessage(let type, let expecting):
            return "unexpected \(type) message: expecting \(expecting)"
        case .invalidField(let message, let field, let reason):
            return "invalid \(message).\(field): \(reason)"
        case .sequenceGap(let expected, let received):
            return "sequence \(received) arrived but \(expected) was expected next; the sender must resend from \(expected)"
        case .sampleTimeMismatch(let sequence, let expected, let received):
            return "sequence \(sequence) starts at sample \(received) but the stream is at sample \(expected);"
                + " sample times must continue without holes (report lost audio with a Gap)"
        case .packetSizeCountMismatch(let sequence, let packetCount, let sizeCount):
            return "sequence \(sequence) has \(packetCount) packets but \(sizeCount) packet sizes; a VBR AudioData"
                + " needs exactly one size per packet"
        case .packetSizesSumMismatch(let sequence, let sum, let payload):
            return "sequence \(sequence): the packet sizes add up to \(sum) bytes but the payload has \(payload) bytes"
        case .payloadSizeMismatch(let sequence, let expected, let received):
            return "sequence \(sequence): the payload has \(received) bytes but its packets need \(expected) bytes"
        case .frameCountMismatch(let sequence, let expected, let received):
            return "sequence \(sequence): frame_count is \(received) but its packets hold \(expected) frames"
        case .endOfStreamSequenceMismatch(let lastReceived, let claimed):
            return "EndOfStream names last sequence \(claimed) but the last sequence received is \(lastReceived)"
        case .endOfStreamSampleTimeMismatch(let expected, let claimed):
            return "EndOfStream names end sample \(claimed) but the received audio ends at sample \(expected)"
        case .ackBeyondSent(let acknowledged, let highestSent):
            return "the receiver acknowledged sequence \(acknowledged) but only \(highestSent) was sent on this connection"
        case .cannotResume(let requested, let oldestHeld, let heldUntil):
            return "the receiver asks to resume at sequence \(requested) (its recording ends at sample \(heldUntil)) but the"
                + " sender holds nothing before \(oldestHeld): audio the receiver acknowledged is lost; the sender"
                + " delivers the rest as a new stream (new stream id) and names the lost seconds"
        case .resumeBeyondSent(let requested, let nextUnsent):
            return "the receiver asks to resume at sequence \(requested) but the sender has produced only up to"
                + " \(nextUnsent - 1); is another sender using the same stream id?"
        case .endAcceptedMismatch(let sent, let confirmed):
            return "the receiver confirmed a stream ending at sequence \(confirmed.position.lastSequence), sample \(confirmed.position.endSampleTime),"
                + " but this stream ends at sequence \(sent.position.lastSequence), sample \(sent.position.endSampleTime); the confirmation does not count"
                + " and the sender keeps the audio"
        case .sendOutOfOrder(let what):
            return "internal error: \(what)"
        }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: " ")
    }

    private static func printable(_ bytes: [UInt8]) -> String {
        "\"" + String(bytes.map { $0 >= 0x20 && $0 < 0x7F ? Character(UnicodeScalar($0)) : "." }) + "\""
    }
}
