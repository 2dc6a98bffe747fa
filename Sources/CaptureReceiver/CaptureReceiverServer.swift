import CaptureErrorText
import CAF
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Dispatch
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import CaptureSecurity

/// Why the receiver could not start.
public enum ReceiverStartError: Error, Equatable, Sendable, CustomStringConvertible {
    case outputDirectory(String)
    case bindFailed(host: String, port: Int, reason: String)
    /// The TLS certificate, key or client CA cannot be used.
    case tls(String)
    /// The commit log cannot be opened or replayed.
    case commitLog(String)

    public var description: String {
        switch self {
        case .outputDirectory(let message): return message
        case .tls(let message), .commitLog(let message): return message
        case .bindFailed(let host, let port, let reason):
            return "cannot listen on \(host):\(port): \(reason); choose another address with --listen HOST:PORT"
        }
    }
}

/// The receiving server: accepts many senders at once over TCP, one `ReceiverSessionHandler` per
/// connection, and writes one CAF file per stream under the output folder.
public final class CaptureReceiverServer: Sendable {
    /// The address the server listens on (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    private let channel: Channel
    private let group: MultiThreadedEventLoopGroup
    private let registry: StreamRegistry
    private let writerPool: WriterPool
    private let outputDirectory: String
    private let handOff: FinishedFileHandOff?
    private let alarmHook: AlarmHook?
    private let logger: Logger
    /// The streams this receiver has seen, with their state and levels, for the console and API.
    public let directory: StreamDirectory

    private init(
        channel: Channel, group: MultiThreadedEventLoopGroup, registry: StreamRegistry, writerPool: WriterPool, directory: StreamDirectory,
        outputDirectory: String, handOff: FinishedFileHandOff?, alarmHook: AlarmHook?, logger: Logger
    ) throws {
        self.outputDirectory = outputDirectory
        self.handOff = handOff
        self.alarmHook = alarmHook
        self.channel = channel
        self.directory = directory
        self.group = group
        self.registry = registry
        self.writerPool = writerPool
        self.logger = logger
        guard let address = channel.localAddress else { throw ReceiverStartError.bindFailed(host: "?", port: 0, reason: "no local address") }
        localAddress = address
    }

    /// Checks the output folder, opens the commit log, binds and starts accepting. The preparation
    /// reads and writes the disk (the folder, the commit log's replay, hand-offs and alarms left
    /// from the last run) on a thread of its own (`BlockingWork`); the bind is awaited.
    public static func start(configuration: ReceiverConfiguration, logger: Logger) async throws(ReceiverStartError) -> CaptureReceiverServer {
        let prepared = try await BlockingWork.run("receiver start") { () throws(ReceiverStartError) in
            try prepare(configuration: configuration, logger: logger)
        }
        do {
            let channel = try await prepared.binding.get()
            return try CaptureReceiverServer(
                channel: channel, group: prepared.group, registry: prepared.registry, writerPool: prepared.writerPool, directory: prepared.directory,
                outputDirectory: configuration.outputDirectory, handOff: configuration.handOff,
                alarmHook: prepared.alarmHook, logger: logger)
        } catch {
            try? await prepared.group.shutdownGracefully()
            await BlockingWork.run("receiver stop") { prepared.writerPool.shutDown() }
            throw .bindFailed(host: configuration.host, port: configuration.port, reason: ListenErrorText.reason(error, host: configuration.host, port: configuration.port))
        }
    }

    /// What `start` prepares before it binds.
    private struct Prepared: Sendable {
        /// The bind, started.
        let binding: EventLoopFuture<Channel>
        let group: MultiThreadedEventLoopGroup
        let registry: StreamRegistry
        let writerPool: WriterPool
        let directory: StreamDirectory
        let alarmHook: AlarmHook?
    }

    /// The output folder, the writer pool and its commit log, the directory, and the bind started.
    private static func prepare(configuration: ReceiverConfiguration, logger: Logger) throws(ReceiverStartError) -> Prepared {
        try prepareOutputDirectory(configuration.outputDirectory)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, min(System.coreCount, 4)))
        let registry = StreamRegistry()
        let tls = try configuration.tls?.prepare()
        let rateLimiter = AuthRateLimiter(maximumFailures: configuration.authFailureLimit, blockDuration: configuration.authBlockSeconds)
        let writerPool = try WriterPool(
            policy: configuration.syncPolicy, metrics: configuration.metrics, outputDirectory: configuration.outputDirectory,
            logRoot: configuration.logDirectory, logger: logger)
        let storage = PooledStreamStorage(files: StreamFiles(configuration: configuration, pool: writerPool))
        let connectionLimit = configuration.maximumStreams + StreamCapacity.handshakeAllowance
        let overflow = RepeatedEventSummary()
        // Hand-offs a previous run did not complete run again.
        configuration.handOff?.start()
        // Alarms raised before the last stop stay raised; hook runs not completed then run again.
        let alarmHook = configuration.alarmHook
        alarmHook?.start(resumeWindow: configuration.resumeWindow)
        AbandonedStreamSweeper.start(configuration: configuration, writerPool: writerPool, eventLoop: group.next(), logger: logger)
        let metrics = configuration.metrics
        let directory = StreamDirectory(
            settings: StreamDirectory.Settings(resumeWindow: configuration.resumeWindow, alarms: configuration.alarms),
            alarmObserver: { alarm in
            // Each alarm is one line in the log: raised as a warning, cleared as a notice.
            let metadata: Logger.Metadata = [
                "stream": "\(alarm.name)", "id": "\(alarm.id.uuidString.lowercased())", "alarm": "\(alarm.kind.rawValue)",
            ]
            switch alarm.change {
            case .raised: logger.warning("alarm raised: \(alarm.kind.rawValue): \(alarm.detail)", metadata: metadata)
            case .cleared: logger.notice("alarm cleared: \(alarm.kind.rawValue): \(alarm.detail)", metadata: metadata)
            }
            metrics?.alarm(stream: alarm.name, kind: alarm.kind.rawValue, raised: alarm.change == .raised)
            alarmHook?.tell(alarm)
        }, restoredAlarms: { stream in alarmHook?.restoredAlarms(of: stream) ?? [] })
        group.next().scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in directory.sweep() }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptFailureLogger(logger: logger))
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // One read per readiness: NIO keeps as many receive buffers per connection as it may
            // read in a row (each up to 64 KiB), and keeps them while the connection idles. At
            // 10,000 connections that was 24 KiB each, half the receiver's memory (issue 28).
            .childChannelOption(.maxMessagesPerRead, value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
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
                        // Full: the connection goes before it reads a byte or opens a file. A flood
                        // of them is logged as one line per interval.
                        if let count = overflow.record() {
                            logger.warning("refusing connections: the receiver already has its limit of \(connectionLimit) connections (--max-streams \(configuration.maximumStreams) and \(StreamCapacity.handshakeAllowance) in their handshake); raise --max-streams if the open-file limit allows", metadata: ["refused": "\(count)"])
                        }
                        channel.close(promise: nil)
                        return
                    }
                    if let tls {
                        let handler: NIOSSLServerHandler
                        if let verifier = tls.clientVerifier, let report {
                            handler = NIOSSLServerHandler(context: tls.context, customVerificationCallback: verifier.callback(report: report))
                        } else {
                            handler = NIOSSLServerHandler(context: tls.context)
                        }
                        try channel.pipeline.syncOperations.addHandlers([PlaintextOnTLSPortDetector(logger: logger), handler])
                    }
                    var handlers: [any ChannelHandler] = [
                        IdleStateHandler(
                            readTimeout: TimeAmount(configuration.idleTimeout), writeTimeout: TimeAmount(configuration.heartbeatInterval)
                        ),
                    ]
                    if let metrics = configuration.metrics { handlers.append(ReceivedBytesCounter(metrics: metrics)) }
                    handlers.append(ByteToMessageHandler(WireFrameDecoder(role: .receiver, maxFrameBytes: configuration.maximumFrameBytes)))
                    handlers.append(MessageToByteHandler(WireFrameEncoder()))
                    if let metrics = configuration.metrics { handlers.append(ReceiverMetricsTap(metrics: metrics)) }
                    handlers.append(session)
                    try channel.pipeline.syncOperations.addHandlers(handlers)
                }
            }
        return Prepared(
            binding: bootstrap.bind(host: configuration.host, port: configuration.port), group: group, registry: registry, writerPool: writerPool, directory: directory,
            alarmHook: alarmHook)
    }

    private static func prepareOutputDirectory(_ path: String) throws(ReceiverStartError) {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw .outputDirectory("cannot create the output folder \(path): \(SystemErrorText.describe(error)); create it for the user capture-recv runs as, or choose another with --out")
            }
        } else if !isDirectory.boolValue {
            throw .outputDirectory("--out \(path) is a file, not a folder; name a folder for the recordings")
        }
        guard FileManager.default.isWritableFile(atPath: path) else {
            throw .outputDirectory("cannot write to the output folder \(path); check its permissions")
        }
        do throws(DurableFileError) {
            try StreamIndex(outputDirectory: path).prepare()
        } catch {
            throw .outputDirectory("cannot create the stream index in the output folder: \(error.description)")
        }
    }

    /// Streams being recorded now.
    public var activeStreamCount: Int { registry.activeStreamCount }

    /// Stops accepting, tells every sender, finishes every open file and stops, waiting at most
    /// `timeout`. Returns false when files were still open at the deadline. The listening channel's
    /// close is awaited; the rest waits for the disk (the open files' finish, the writer lanes, the
    /// hand-off commands), on a thread of its own (`BlockingWork`).
    @discardableResult
    public func shutDown(timeout: TimeInterval = 10) async -> Bool {
        let started = DispatchTime.now()
        // Running hand-off commands are stopped (their process groups: SIGTERM, then SIGKILL) while
        // the files finish; they run again at the next start, and none outlives the receiver.
        handOff?.beginStopping()
        alarmHook?.beginStopping()
        try? await channel.close()
        return await BlockingWork.run("receiver stop") { [self] in finishAndStop(started: started, timeout: timeout) }
    }

    /// The blocking part of `shutDown`: every open file finished or let go of, the writer pool and
    /// the event loops stopped, the hand-off and alarm commands waited for.
    private func finishAndStop(started: DispatchTime, timeout: TimeInterval) -> Bool {
        registry.shutDownAll()
        let clean = registry.waitUntilEmpty(deadline: Date().addingTimeInterval(timeout))
        // Streams whose connection was lost earlier have unfinished files: finish those nobody holds
        // too, keeping their position logs and index entries so their senders can still resume them.
        AbandonedStreamSweeper.sweep(index: StreamIndex(outputDirectory: outputDirectory), mode: .finalizeResumable, logger: logger)
        // Every queued disk operation runs (its completion still reaches a live event loop), then a
        // last sync round.
        writerPool.shutDown()
        try? group.syncShutdownGracefully()
        if let handOff, !handOff.waitUntilStopped(deadline: started + max(timeout, FinishedFileHandOff.stopGrace + 1)) {
            logger.error("a hand-off command still ran when the receiver stopped; its hand-off runs again at the next start, once that command has ended")
        }
        if let alarmHook, !alarmHook.waitUntilStopped(deadline: started + max(timeout, FinishedFileHandOff.stopGrace + 1)) {
            logger.error("an alarm hook command still ran when the receiver stopped; it runs again at the next start, once that command has ended")
        }
        return clean
    }
}
