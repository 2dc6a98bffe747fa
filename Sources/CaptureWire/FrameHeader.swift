/// A frame's header: the length field (type byte + body) and the type.
public struct FrameHeader: Equatable, Sendable {
    /// The length field: bytes after it, the type byte included.
    public var length: UInt32
    /// The message type.
    public var type: WireMessageType

    /// Bytes of the protobuf body.
    public var bodyLength: Int { Int(length) - 1 }
    /// Bytes of the whole frame, header included.
    public var frameLength: Int { 4 + Int(length) }

    /// What the start of a frame amounts to so far.
    public enum Check: Equatable, Sendable {
        /// Not enough bytes for the header; read more.
        case needMoreBytes
        /// A valid header; the body may still be incomplete.
        case header(FrameHeader)
    }

    /// Checks the bytes at the start of a frame, as soon as they arrive: the length as soon as its
    /// 4 bytes are there (so an oversized frame is refused before its body is buffered), the type as
    /// soon as its byte is there. `isFirstFrameFromReceiver` lets a sender recognise a receiver that
    /// answers with TLS or HTTP instead of frames.
    public static func check(
        _ bytes: UnsafeRawBufferPointer, maxFrameBytes: Int, isFirstFrameFromReceiver: Bool = false, isHello: Bool = false
    ) throws(WireError) -> Check {
        guard bytes.count >= 4 else { return .needMoreBytes }
        let length = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
        guard length > 0 else { throw .zeroLengthFrame }
        guard Int(length) <= maxFrameBytes else {
            if isFirstFrameFromReceiver {
                if (bytes[0] == 0x15 || bytes[0] == 0x16) && bytes[1] == 0x03 { throw .receiverSpeaksTLS }
                if bytes.starts(with: "HTTP".utf8) { throw .receiverSpeaksHTTP }
            }
            if isHello { throw .helloTooLarge(length: length, limit: maxFrameBytes) }
            throw .frameTooLarge(length: length, limit: maxFrameBytes)
        }
        guard bytes.count >= 5 else { return .needMoreBytes }
        guard let type = WireMessageType(rawValue: bytes[4]) else { throw .unknownFrameType(bytes[4]) }
        return .header(FrameHeader(length: length, type: type))
    }
}
