import CaptureCore
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import CaptureSecurity

/// Where and how a stream is sent.
public struct SenderConfiguration: Sendable {
    /// The receiver's host name or address.
    public var host: String
    /// The receiver's port.
    public var port: Int
    /// The stream's name (the receiver sanitizes it into the file name).
    public var streamName: String
    /// The stream's identity, the same across reconnects.
    public var streamID: UUID
    /// Unacknowledged bytes in flight at most.
    public var windowBytes: Int
    /// Time allowed to establish the TCP connection.
    public var connectTimeout: TimeAmount
    /// Silence from the receiver after which the connection is considered dead.
    public var idleTimeout: TimeAmount
    /// Heartbeat interval on an otherwise idle connection.
    public var heartbeatInterval: TimeAmount
    /// Written into the handshake, and from there into the file's `info` chunk.
    public var application: String
    /// This machine's name, for the file's `info` chunk.
    public var sourceHost: String
    /// Shared secret for receivers that require one (empty for none).
    public var authToken: String
    /// TLS settings; nil for a plaintext connection.
    public var tls: SenderTLSConfiguration? = nil

    public init(
        host: String, port: Int, streamName: String, streamID: UUID = UUID(), windowBytes: Int = 4 << 20,
        connectTimeout: TimeAmount = .seconds(10), idleTimeout: TimeAmount = .seconds(20),
        heartbeatInterval: TimeAmount = .seconds(5), application: String = "capture-send",
        sourceHost: String = ProcessInfo.processInfo.hostName, authToken: String = ""
    ) {
        self.host = host
        self.port = port
        self.streamName = streamName
        self.streamID = streamID
        self.windowBytes = windowBytes
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.heartbeatInterval = heartbeatInterval
        self.application = application
        self.sourceHost = sourceHost
        self.authToken = authToken
    }
}

/// The stream's description for the handshake: format, codec configuration, start time.
public struct StreamDescription: Sendable {
    public var format: StreamFormat
    public var magicCookie: [UInt8]
    public var primingFrames: Int
    /// UTC wall-clock time of sample 0.
    public var startTime: Date

    public init(format: StreamFormat, magicCookie: [UInt8], primingFrames: Int, startTime: Date) {
        self.format = format
        self.magicCookie = magicCookie
        self.primingFrames = primingFrames
        self.startTime = startTime
    }
}

/// Sends one stream's packet log to a receiver over TCP and waits until the receiver confirms the
/// end of the stream.
public final class StreamSender: Sendable {
    private let configuration: SenderConfiguration
    private let description: StreamDescription
    private let log: PacketLog
    private let logger: Logger
    private let group: MultiThreadedEventLoopGroup

    public init(configuration: SenderConfiguration, description: StreamDescription, log: PacketLog, logger: Logger) {
        self.configuration = configuration
        self.description = description
        self.log = log
        self.logger = logger
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    /// Connects, streams, and blocks until the receiver confirmed the end of the stream or the
    /// stream failed.
    public func run() -> Result<StreamSummary, SenderError> {
        defer {
            log.removeListeners()
            try? group.syncShutdownGracefully()
        }
        let hello = makeHello()
        let done = group.next().makePromise(of: StreamSummary.self)
        let configuration = self.configuration
        let log = self.log
        let logger = self.logger
        let tlsContext: NIOSSLContext?
        do throws(SenderError) {
            tlsContext = try configuration.tls?.makeContext()
        } catch {
            return .failure(error)
        }
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: 1 << 20))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    var security: SenderSessionHandler.Security?
                    if let tls = configuration.tls, let tlsContext {
                        let report = TLSVerificationReport()
                        try channel.pipeline.syncOperations.addHandler(
                            try tls.makeHandler(context: tlsContext, host: configuration.host, report: report)
                        )
                        security = .init(report: report, host: configuration.host, handshakeTimeout: tls.handshakeTimeout)
                    }
                    try channel.pipeline.syncOperations.addHandlers([
                        IdleStateHandler(readTimeout: configuration.idleTimeout, writeTimeout: configuration.heartbeatInterval),
                        ByteToMessageHandler(WireFrameDecoder(role: .sender)),
                        MessageToByteHandler(WireFrameEncoder(sendsPreamble: true)),
                        SenderSessionHandler(
                            hello: hello, log: log, windowBytes: configuration.windowBytes, done: done, logger: logger, security: security
                        ),
                    ])
                }
            }
        let channel: Channel
        do {
            channel = try bootstrap.connect(host: configuration.host, port: configuration.port).wait()
        } catch {
            done.fail(SenderError.connectFailed(host: configuration.host, port: configuration.port, reason: Self.explain(error)))
            return .failure(.connectFailed(host: configuration.host, port: configuration.port, reason: Self.explain(error)))
        }
        logger.info("connected", metadata: ["receiver": "\(configuration.host):\(configuration.port)"])
        let result: Result<StreamSummary, SenderError>
        do {
            result = .success(try done.futureResult.wait())
        } catch let error as SenderError {
            result = .failure(error)
        } catch {
            result = .failure(.connectionLost("\(error)"))
        }
        try? channel.close().wait()
        return result
    }

    private func makeHello() -> Capture_V1_Hello {
        .with {
            $0.protocolVersion = UInt32(WireProtocol.version)
            $0.streamID = withUnsafeBytes(of: configuration.streamID.uuid) { Data($0) }
            $0.streamName = configuration.streamName
            $0.authToken = configuration.authToken
            $0.format = Capture_V1_StreamFormat(description.format)
            $0.magicCookie = Data(description.magicCookie)
            $0.startTimeUnixNs = Int64(description.startTime.timeIntervalSince1970 * 1e9)
            $0.startSampleTime = 0
            $0.resumeFromSequence = log.oldestKeptSequence
            $0.sourceHost = configuration.sourceHost
            $0.application = configuration.application
            $0.primingFrames = UInt32(description.primingFrames)
        }
    }

    /// A short human reason for a connection error ("connection refused", "timed out"...).
    static func explain(_ error: Error) -> String {
        if let connection = error as? NIOConnectionError {
            if let first = connection.connectionErrors.first { return explain(first.error) }
            if let dns = connection.dnsAError ?? connection.dnsAAAAError { return "cannot resolve \(connection.host): \(dns)" }
            return "no address found for \(connection.host)"
        }
        if let io = error as? IOError {
            switch io.errnoCode {
            case ECONNREFUSED: return "connection refused"
            case ETIMEDOUT: return "connection timed out"
            case EHOSTUNREACH: return "host unreachable"
            case ENETUNREACH: return "network unreachable"
            default: return "\(io)"
            }
        }
        if error is ChannelError, case ChannelError.connectTimeout = error { return "connection timed out" }
        return "\(error)"
    }
}
