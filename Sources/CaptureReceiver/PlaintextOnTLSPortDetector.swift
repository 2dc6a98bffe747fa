import CaptureCore
import CaptureWire
import CaptureWireNIO
import Logging
import NIOCore

/// Sits before the TLS handler on a TLS port and looks at the first bytes a client sends. A TLS
/// ClientHello (record type 0x16) passes on and the detector removes itself. A capture-send without
/// `--tls` (the preamble "CAPSTRM") gets a plaintext Error frame telling it to use `--tls`, anything
/// else a close; both are logged with the peer's address and nothing more happens on the connection.
/// A connection closed before its first byte (a port probe, a container health check) is no failed
/// handshake: the handlers behind are told so before the TLS handler reports its end.
final class PlaintextOnTLSPortDetector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let logger: Logger
    private var decided = false

    /// How the refusal names the settings the sender needs.
    private let settingNames: any SettingNaming

    init(logger: Logger, settingNames: any SettingNaming) {
        self.logger = logger
        self.settingNames = settingNames
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !decided {
            decided = true
            context.fireUserInboundEventTriggered(ConnectionClosedBeforeAnyByte())
        }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !decided else { return context.fireChannelRead(data) }
        let buffer = unwrapInboundIn(data)
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return }
        decided = true
        if first == 0x16 {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        // The connection is refused here: the handlers behind must not report its end as an error.
        context.fireUserInboundEventTriggered(ConnectionRefusedBeforeTLS())
        var logger = self.logger
        logger[metadataKey: "peer"] = "\(context.remoteAddress?.userText ?? "unknown peer")"
        let head = buffer.getBytes(at: buffer.readerIndex, length: min(buffer.readableBytes, WireProtocol.magic.count)) ?? []
        if Array(WireProtocol.magic.prefix(head.count)) == head {
            logger.warning(
                "refused: plaintext client on a TLS port; the sender must connect with \(settingNames.name(of: .senderTLS))", metadata: ["code": "AUTHENTICATION_FAILED"])
            let message = "this receiver requires TLS: connect with \(WireError.connectWithTLS(naming: settingNames))"
            var frame = context.channel.allocator.buffer(capacity: 128)
            do {
                try WireFrameEncoder().encode(data: .error(.with { $0.code = .authenticationFailed; $0.message = message; $0.fatal = true }), out: &frame)
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in channel.close(promise: nil) }
            } catch {
                context.close(promise: nil)
            }
        } else {
            logger.warning("refused: the client does not speak TLS on this TLS port", metadata: ["first-byte": "\(first)"])
            context.close(promise: nil)
        }
    }
}

/// Tells the handlers behind the TLS handler that the connection was refused and logged before TLS.
struct ConnectionRefusedBeforeTLS {}

/// Tells the handlers behind the TLS handler that the client closed the connection without sending a
/// byte: a port probe or health check, not a TLS client.
struct ConnectionClosedBeforeAnyByte {}
