import CaptureErrorText
import Logging
import NIOCore

/// Sits on the listening channel and logs every error there: a connection that could not be
/// accepted or set up (a socket option the process may not set, no file descriptors left) would
/// otherwise be closed without a word, and the sender would only see a reset.
final class AcceptFailureLogger: ChannelInboundHandler, Sendable {
    typealias InboundIn = Channel

    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.error("cannot accept or set up a connection; it was closed", metadata: [
            "reason": "\(SystemErrorText.describe(error))",
        ])
        context.fireErrorCaught(error)
    }
}
