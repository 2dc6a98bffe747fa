import CaptureCore
import CaptureErrorText
import CaptureSecurity
import CaptureWireNIO
import Logging
import NIOCore
import NIOSSL

/// How the receiver sets up each accepted connection, on the connection's event loop: its socket
/// options, then, if the receiver has room for it, its pipeline (TLS, timeouts, framing, metrics
/// and the `ReceiverSessionHandler`), registered with the stream registry for the shutdown.
///
/// A connection it cannot set up is logged and closed here: a failure must never reach the
/// listening channel, whose async sequence of connections would end with it.
struct ConnectionSetup: Sendable {
    private let configuration: ReceiverConfiguration
    private let registry: StreamRegistry
    private let storage: PooledStreamStorage
    private let rateLimiter: AuthRateLimiter
    private let tls: ReceiverTLSConfiguration.Prepared?
    private let directory: StreamDirectory
    private let logger: Logger
    /// Connections at once at most: the streams and those in their handshake.
    private let connectionLimit: Int
    /// Refusals for want of room, logged as one line per interval.
    private let overflow = RepeatedEventSummary()

    init(
        configuration: ReceiverConfiguration, registry: StreamRegistry, storage: PooledStreamStorage, rateLimiter: AuthRateLimiter,
        tls: ReceiverTLSConfiguration.Prepared?, directory: StreamDirectory, logger: Logger
    ) {
        self.configuration = configuration
        self.registry = registry
        self.storage = storage
        self.rateLimiter = rateLimiter
        self.tls = tls
        self.directory = directory
        self.logger = logger
        connectionLimit = configuration.maximumStreams + StreamCapacity.handshakeAllowance
    }

    /// Sets up `channel` or closes it; called on its event loop.
    func setUp(_ channel: Channel) {
        do {
            try configure(channel)
        } catch {
            logger.error("cannot set up a connection; it was closed", metadata: ["reason": "\(SystemErrorText.describe(error))"])
            channel.close(promise: nil)
        }
    }

    private func configure(_ channel: Channel) throws {
        let options = channel.pipeline.syncOperations
        // Set here rather than as the bootstrap's child options, so that a failure closes this
        // connection only.
        try channel.syncOptions?.setOption(.tcpOption(.tcp_nodelay), value: 1)
        // One read per readiness: NIO keeps as many receive buffers per connection as it may read
        // in a row (each up to 64 KiB), and keeps them while the connection idles. At 10,000
        // connections that was 24 KiB each, half the receiver's memory (issue 28).
        try channel.syncOptions?.setOption(.maxMessagesPerRead, value: 1)
        let report = tls?.clientVerifier != nil ? TLSVerificationReport() : nil
        let session = ReceiverSessionHandler(
            configuration: configuration, registry: registry, storage: storage, logger: logger, rateLimiter: rateLimiter,
            tlsReport: report, usesTLS: tls != nil, directory: directory, listening: configuration.listening
        )
        let loopBound = NIOLoopBound(session, eventLoop: channel.eventLoop)
        let eventLoop = channel.eventLoop
        let added = registry.addConnection(ObjectIdentifier(session), maximumConnections: connectionLimit) {
            eventLoop.execute { loopBound.value.shutDown() }
        }
        guard added else {
            // Full: the connection goes before it reads a byte or opens a file. A flood of them is
            // logged as one line per interval.
            if let count = overflow.record() {
                logger.warning("refusing connections: the receiver already has its limit of \(connectionLimit) connections (\(configuration.settingNames.name(of: .maximumStreams)) \(configuration.maximumStreams) and \(StreamCapacity.handshakeAllowance) in their handshake); raise \(configuration.settingNames.name(of: .maximumStreams)) if the open-file limit allows", metadata: ["refused": "\(count)"])
            }
            channel.close(promise: nil)
            return
        }
        do {
            try addHandlers(to: options, session: session, report: report)
        } catch {
            // The session never joined the pipeline, so it cannot take itself out of the registry.
            registry.removeConnection(ObjectIdentifier(session))
            throw error
        }
    }

    /// TLS (when configured), the timeouts, the framing, the metrics taps, and the session.
    private func addHandlers(
        to options: ChannelPipeline.SynchronousOperations, session: ReceiverSessionHandler, report: TLSVerificationReport?
    ) throws {
        if let tls {
            let handler: NIOSSLServerHandler
            if let verifier = tls.clientVerifier, let report {
                handler = NIOSSLServerHandler(context: tls.context, customVerificationCallback: verifier.callback(report: report))
            } else {
                handler = NIOSSLServerHandler(context: tls.context)
            }
            try options.addHandlers([PlaintextOnTLSPortDetector(logger: logger, settingNames: configuration.settingNames), handler])
        }
        var handlers: [any ChannelHandler] = [
            IdleStateHandler(readTimeout: TimeAmount(configuration.idleTimeout), writeTimeout: TimeAmount(configuration.heartbeatInterval)),
        ]
        if let metrics = configuration.metrics { handlers.append(ReceivedBytesCounter(metrics: metrics)) }
        handlers.append(ByteToMessageHandler(WireFrameDecoder(role: .receiver, maxFrameBytes: configuration.maximumFrameBytes)))
        handlers.append(MessageToByteHandler(WireFrameEncoder()))
        if let metrics = configuration.metrics { handlers.append(ReceiverMetricsTap(metrics: metrics)) }
        handlers.append(session)
        try options.addHandlers(handlers)
    }
}
