import NIOCore
import NIOHTTP1

/// Answers `GET /metrics` (and `HEAD`) with the exposition text, 404 for any other path and 405 for
/// other methods on `/metrics`. One response per request; keep-alive is honoured.
final class MetricsHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The content type of the Prometheus text format.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let render: @Sendable () -> String
    private var request: HTTPRequestHead?

    init(render: @escaping @Sendable () -> String) {
        self.render = render
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break
        case .end:
            guard let head = request else { return }
            request = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? head.uri
        let status: HTTPResponseStatus
        let body: String
        var headers = HTTPHeaders()
        if path != "/metrics" {
            status = .notFound
            body = "not found: metrics are at /metrics\n"
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        } else if head.method != .GET && head.method != .HEAD {
            status = .methodNotAllowed
            body = "use GET /metrics\n"
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Allow", value: "GET, HEAD")
        } else {
            status = .ok
            body = render()
            headers.add(name: "Content-Type", value: Self.contentType)
        }
        let bytes = context.channel.allocator.buffer(string: body)
        headers.add(name: "Content-Length", value: "\(bytes.readableBytes)")
        let keepAlive = head.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
        }
        let done = context.writeAndFlushPromise()
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            let channel = context.channel
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

extension ChannelHandlerContext {
    fileprivate func writeAndFlushPromise() -> EventLoopPromise<Void> { eventLoop.makePromise() }
}
