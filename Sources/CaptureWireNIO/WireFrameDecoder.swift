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

/// Turns received bytes into `WireMessage`s with the protocol's one `FrameDecoder`, run on the
/// receive buffer in place. At the receiver it checks the preamble first and fires
/// `WirePreambleReceived`. Errors are `WireError`s sent through the pipeline's `errorCaught`:
/// an oversized frame is refused from its length field, before its body is buffered. Only the
/// AudioData payload is copied, once, out of the receive buffer.
///
/// Use it as `ByteToMessageHandler(WireFrameDecoder(role: .receiver))`.
public struct WireFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = WireMessage

    private var decoder: FrameDecoder

    /// Which end of the connection this decoder reads for.
    public var role: WireRole { decoder.role }
    /// The largest accepted length field.
    public var maxFrameBytes: Int { decoder.maxFrameBytes }

    public init(role: WireRole, maxFrameBytes: Int = WireProtocol.defaultMaxFrameBytes) {
        decoder = FrameDecoder(role: role, maxFrameBytes: maxFrameBytes)
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        while true {
            let step = try buffer.withUnsafeReadableBytes { bytes in
                Result { () throws(WireError) -> FrameDecoder.Step in try decoder.step(bytes) }
            }.get()
            switch step {
            case .needMoreData:
                return .needMoreData
            case .preamble(let version, let consumed):
                buffer.moveReaderIndex(forwardBy: consumed)
                context.fireUserInboundEventTriggered(WirePreambleReceived(version: version))
            case .message(let message, let consumed):
                buffer.moveReaderIndex(forwardBy: consumed)
                context.fireChannelRead(wrapInboundOut(message))
                return .continue
            }
        }
    }

    public mutating func decodeLast(
        context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool
    ) throws -> DecodingState {
        if try decode(context: context, buffer: &buffer) == .continue { return .continue }
        guard seenEOF else { return .needMoreData }
        try buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(WireError) in try decoder.finish(remaining: bytes) }
        }.get()
        return .needMoreData
    }
}
