import CaptureErrorText
import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP server that serves Prometheus text at `GET /metrics` (404 elsewhere), for
/// `capture-recv --metrics HOST:PORT`. It renders on every scrape, so figures are always current.
public final class MetricsEndpoint: Sendable {
    /// The address the endpoint listens on (with the real port when port 0 was asked for).
    public let localAddress: SocketAddress
    private let channel: any Channel

    private init(channel: any Channel) throws(MetricsEndpointError) {
        guard let address = channel.localAddress else {
            throw .cannotListen(host: "?", port: 0, reason: "the socket has no local address")
        }
        self.channel = channel
        localAddress = address
    }

    /// The port listened on.
    public var port: Int { localAddress.port ?? 0 }

    /// Starts serving `metrics` on `host:port` (port 0 picks a free port).
    public static func start(
        host: String, port: Int, metrics: ReceiverMetrics,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws(MetricsEndpointError) -> MetricsEndpoint {
        try start(host: host, port: port, group: group, render: { metrics.exposition() })
    }

    /// Starts serving what `render` returns on `host:port` (port 0 picks a free port). Blocks until
    /// the socket listens; call it outside an event loop.
    public static func start(
        host: String, port: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        render: @escaping @Sendable () -> String
    ) throws(MetricsEndpointError) -> MetricsEndpoint {
        do {
            let channel = try bootstrap(group: group, render: render).bind(host: host, port: port).wait()
            return try MetricsEndpoint(channel: channel)
        } catch let error as MetricsEndpointError {
            throw error
        } catch {
            throw .cannotListen(host: host, port: port, reason: ListenErrorText.reason(error, host: host, port: port))
        }
    }

    /// The async form of `start(host:port:group:render:)`.
    public static func bind(
        host: String, port: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        render: @escaping @Sendable () -> String
    ) async throws(MetricsEndpointError) -> MetricsEndpoint {
        do {
            let channel = try await bootstrap(group: group, render: render).bind(host: host, port: port).get()
            return try MetricsEndpoint(channel: channel)
        } catch let error as MetricsEndpointError {
            throw error
        } catch {
            throw .cannotListen(host: host, port: port, reason: ListenErrorText.reason(error, host: host, port: port))
        }
    }

    private static func bootstrap(group: any EventLoopGroup, render: @escaping @Sendable () -> String) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(render: render))
                }
            }
            .childChannelOption(.socketOption(.so_reuseaddr), value: 1)
    }

    /// Stops listening (blocking). Scrapes under way finish on their own connections.
    public func stop() {
        try? channel.close().wait()
    }

    /// Stops listening.
    public func shutdown() async {
        try? await channel.close().get()
    }
}
