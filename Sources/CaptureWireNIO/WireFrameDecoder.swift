import CaptureWire
import NIOCore

/// The user inbound event `WireFrameDecoder` fires at the receiver once the preamble was read and
/// accepted, before the first message.
public struct WirePreambleReceived: Sendable, Equatable {
    /// The preamble's protocol version.
    public let version: UInt8

    public init(version: UInt8) {
        self.version = version
    }
}

/// Turns received bytes into `WireMessage`s. At the receiver it checks the preamble first and fires
/// `WirePreambleReceived`. Errors are `WireError`s sent through the pipeline's `errorCaught`:
/// an oversized frame is refused from its length field, before its body is buffered. Only the
/// AudioData payload is copied, once, out of the receive buffer.
///
/// Use it as `ByteToMessageHandler(WireFrameDecoder(role: .receiver))`.
public struct WireFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = WireMessage

    /// Which end of the connection this decoder reads for.
    public let role: WireRole
    /// The largest accepted length field.
    public let maxFrameBytes: Int

    private var awaitingPreamble: Bool
    private var framesDecoded = 0

    public init(role: WireRole, maxFrameBytes: Int = WireProtocol.defaultMaxFrameBytes) {
        self.role = role
        self.maxFrameBytes = maxFrameBytes
        self.awaitingPreamble = role == .receiver
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if awaitingPreamble {
            let check = buffer.withUnsafeReadableBytes { bytes in
                Result { () throws(WireError) in try WirePreamble.check(bytes) }
            }
            guard case .accepted(let version) = try check.get() else { return .needMoreData }
            buffer.moveReaderIndex(forwardBy: WireProtocol.preambleLength)
            awaitingPreamble = false
            context.fireUserInboundEventTriggered(WirePreambleReceived(version: version))
        }
        let limit = maxFrameBytes
        let firstFromReceiver = role == .sender && framesDecoded == 0
        let decoded = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(WireError) -> (WireMessage, Int)? in
                let check = try FrameHeader.check(bytes, maxFrameBytes: limit, isFirstFrameFromReceiver: firstFromReceiver)
                guard case .header(let header) = check, bytes.count >= header.frameLength else { return nil }
                let body = UnsafeRawBufferPointer(rebasing: bytes[WireProtocol.frameHeaderLength..<header.frameLength])
                return (try WireMessage.decode(type: header.type, body: body), header.frameLength)
            }
        }
        guard let (message, consumed) = try decoded.get() else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: consumed)
        framesDecoded += 1
        context.fireChannelRead(wrapInboundOut(message))
        return .continue
    }

    public mutating func decodeLast(
        context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool
    ) throws -> DecodingState {
        if try decode(context: context, buffer: &buffer) == .continue { return .continue }
        guard seenEOF else { return .needMoreData }
        if awaitingPreamble {
            throw WireError.truncatedPreamble(receivedBytes: buffer.readableBytes)
        }
        if buffer.readableBytes > 0 {
            let expected: Int? = buffer.withUnsafeReadableBytes { bytes in
                guard case .header(let header)? = try? FrameHeader.check(bytes, maxFrameBytes: Int.max) else { return nil }
                return header.frameLength
            }
            throw WireError.truncatedFrame(receivedBytes: buffer.readableBytes, expectedBytes: expected)
        }
        return .needMoreData
    }
}
