import CaptureWire
import NIOCore

/// Writes `WireMessage`s as frames. A sender's encoder writes the preamble in front of its first
/// frame (`sendsPreamble: true`). An AudioData payload is copied once, from the message straight
/// into the outgoing buffer; the bytes are the same as `WireMessage.encode()`.
///
/// Use it as `MessageToByteHandler(WireFrameEncoder(sendsPreamble: true))`.
public final class WireFrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = WireMessage

    private var preamblePending: Bool

    /// An encoder; with `sendsPreamble`, the first write starts with the connection preamble.
    public init(sendsPreamble: Bool = false) {
        self.preamblePending = sendsPreamble
    }

    public func encode(data message: WireMessage, out: inout ByteBuffer) throws {
        let body = try Result { () throws(WireError) in try message.bodyParts() }.get()
        let length = try Result { () throws(WireError) in
            try WireFrameEncoder.frameLength(of: body, type: message.type)
        }.get()
        out.reserveCapacity(out.writerIndex + WireProtocol.preambleLength + WireProtocol.frameHeaderLength + body.byteCount)
        if preamblePending {
            WireFrameEncoder.writePreamble(to: &out)
            preamblePending = false
        }
        out.writeInteger(length, endianness: .big, as: UInt32.self)
        out.writeInteger(message.type.rawValue)
        out.writeBytes(body.head)
        body.payload.withUnsafeBytes { bytes in _ = out.writeBytes(bytes) }
        out.writeBytes(body.tail)
    }

    /// Writes the connection preamble (for callers that write bytes below this encoder).
    public static func writePreamble(to buffer: inout ByteBuffer, version: UInt8 = WireProtocol.version) {
        buffer.writeBytes(WirePreamble.bytes(version: version))
    }

    private static func frameLength(of body: WireBodyParts, type: WireMessageType) throws(WireError) -> UInt32 {
        guard let length = UInt32(exactly: body.byteCount + 1) else {
            throw .encodingFailed(type: type, reason: "the body of \(body.byteCount) bytes does not fit a frame")
        }
        return length
    }
}
