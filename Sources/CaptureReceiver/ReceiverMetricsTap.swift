import CaptureWire
import NIOCore

/// Counts what a connection does for the receiver's metrics by watching the protocol messages that
/// pass between the frame codec and the session handler: streams opened and finished, audio packets
/// received, acknowledgements sent and their latency, refusals and errors by reason. It changes
/// nothing it sees.
///
/// Ack latency is sampled, so an audio message costs no clock read: the first audio message of the
/// connection, and then the first to arrive after each sample's Ack, has its arrival noted, and the
/// first Ack whose durable sequence covers it records the time between. Acks are cumulative, so the
/// sample is the longest wait among the messages that arrived after the previous sample's Ack and
/// that this Ack covers; messages that arrived before that Ack without being covered by it are not
/// sampled.
final class ReceiverMetricsTap: ChannelDuplexHandler {
    typealias InboundIn = WireMessage
    typealias InboundOut = WireMessage
    typealias OutboundIn = WireMessage
    typealias OutboundOut = WireMessage

    private let metrics: any ReceiverMetricsRecorder
    private var streamOpen = false
    private var streamName = ""
    /// The audio message whose Ack is awaited for the latency sample, and when it arrived.
    private var sampled: (sequence: UInt64, arrived: ContinuousClock.Instant)?

    init(metrics: any ReceiverMetricsRecorder) {
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
        case .audioData(let audio):
            metrics.packetsReceived(Int(audio.packetCount))
            if sampled == nil { sampled = (audio.sequence, .now) }
        default: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .helloAccepted:
            streamOpen = true
            metrics.streamOpened()
        case .ack(let ack):
            metrics.ackSent()
            if let sample = sampled, ack.durableSequence >= sample.sequence {
                metrics.ackLatency(.now - sample.arrived)
                sampled = nil
            }
        case .endAccepted:
            metrics.fileFinalized()
            sampled = nil
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

    private let metrics: any ReceiverMetricsRecorder

    init(metrics: any ReceiverMetricsRecorder) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        metrics.bytesReceived(unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }
}
