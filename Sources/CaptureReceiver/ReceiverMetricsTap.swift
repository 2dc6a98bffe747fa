import CaptureMetrics
import CaptureWire
import NIOCore

/// Counts what a connection does for the receiver's metrics by watching the protocol messages that
/// pass between the frame codec and the session handler: streams opened and finished, audio packets
/// received, acknowledgements sent, refusals and errors by reason. It changes nothing it sees.
final class ReceiverMetricsTap: ChannelDuplexHandler {
    typealias InboundIn = WireMessage
    typealias InboundOut = WireMessage
    typealias OutboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private let metrics: ReceiverMetrics
    private var streamOpen = false
    private var streamName = ""

    init(metrics: ReceiverMetrics) {
        self.metrics = metrics
    }

    func channelActive(context: ChannelHandlerContext) {
        metrics.connectionOpened()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if streamOpen { metrics.streamClosed(stream: streamName) }
        streamOpen = false
        metrics.connectionClosed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .hello(let hello): streamName = hello.streamName
        case .audioData(let audio): metrics.packetsReceived(Int(audio.packetCount))
        default: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .helloAccepted:
            streamOpen = true
            metrics.streamOpened()
        case .ack:
            metrics.ackSent()
        case .endAccepted:
            metrics.fileFinalized()
            if streamOpen { metrics.streamClosed(stream: streamName) }
            streamOpen = false
        case .error(let error):
            let reason = "\(error.code)"
            if streamOpen { metrics.error(reason: reason) } else { metrics.refused(reason: reason) }
        default:
            break
        }
        context.write(data, promise: promise)
    }
}

/// Counts the bytes a connection receives (after TLS, before framing).
final class ReceivedBytesCounter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let metrics: ReceiverMetrics

    init(metrics: ReceiverMetrics) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        metrics.bytesReceived(unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }
}
