import CaptureErrorText
import CAF
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import CaptureService
import NIOCore
import NIOPosix
import NIOSSL
import CaptureSecurity

/// Why the receiver could not start. Its text names the settings to change through a
/// `SettingNaming` (`message(naming:)`); `description` uses the library's own words.
public enum ReceiverStartError: Error, Equatable, Sendable, CustomStringConvertible {
    case outputDirectory(OutputFolderProblem)
    case bindFailed(host: String, port: Int, reason: String)
    /// The TLS certificate, key or client CA cannot be used.
    case tls(ServerTLSProblem)
    /// The commit log cannot be opened or replayed.
    case commitLog(CommitLogStartFailure)

    /// What is wrong with the output folder.
    public enum OutputFolderProblem: Equatable, Sendable {
        /// The folder does not exist and cannot be created.
        case cannotCreate(path: String, reason: String)
        /// The path names a file.
        case notAFolder(path: String)
        /// The folder exists but cannot be written to.
        case notWritable(path: String)
        /// The stream index in the folder cannot be created.
        case streamIndex(reason: String)
    }

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .outputDirectory(.cannotCreate(let path, let reason)):
            return "cannot create the output folder \(path): \(reason); create it for the user capture-recv runs as, or choose another with \(naming.name(of: .outputFolder))"
        case .outputDirectory(.notAFolder(let path)):
            return "\(naming.name(of: .outputFolder)) \(path) is a file, not a folder; name a folder for the recordings"
        case .outputDirectory(.notWritable(let path)):
            return "cannot write to the output folder \(path); check its permissions"
        case .outputDirectory(.streamIndex(let reason)):
            return "cannot create the stream index in the output folder: \(reason)"
        case .tls(let problem): return problem.message(naming: naming)
        case .commitLog(let failure): return failure.message(naming: naming)
        case .bindFailed(let host, let port, let reason):
            return "cannot listen on \(host):\(port): \(reason); choose another address with \(naming.name(of: .listenAddress, value: "HOST:PORT"))"
        }
    }
}

/// The receiving server, run as a swift-service-lifecycle `Service` over `NIOAsyncChannel`, as
/// Hummingbird's server is: `start` prepares the output folder and the commit log and binds; `run()`
/// takes in connections from the listening channel's async sequence until the service group asks for
/// a graceful shutdown (SIGTERM, SIGINT, `triggerGracefulShutdown()`) or the task is cancelled, then
/// tells every sender, finishes every open file and stops within `ReceiverConfiguration.shutdownTimeout`.
///
/// Each connection is served by its own channel pipeline, a thin shell (`ReceiverSessionHandler`)
/// over the pure `ReceiverSession`; the stream registry keeps every connection for the shutdown.
/// One CAF file per stream is written under the output folder.
public final class CaptureReceiverServer: Service, Sendable {
    /// The address the server listens on (with the real port when 0 was asked for).
    public let localAddress: SocketAddress
    /// The listening channel: each element of its inbound sequence is a connection whose pipeline
    /// is set up (or that was refused and closed).
    private let listener: NIOAsyncChannel<Void, Never>
    private let group: MultiThreadedEventLoopGroup
    private let registry: StreamRegistry
    private let writerPool: WriterPool
    private let outputDirectory: String
    private let handOff: FinishedFileHandOff?
    private let alarmHook: AlarmHook?
    private let shutdownTimeout: Duration
    private let whenServing: @Sendable (_ address: SocketAddress) -> Void
    private let logger: Logger
    /// The shutdown once started: whoever asks first starts it, everyone awaits the same one.
    private let stopping = Mutex<Task<Bool, Never>?>(nil)
    /// The streams this receiver has seen, with their state and levels, for the console and API.
    public let directory: StreamDirectory

    private init(
        listener: NIOAsyncChannel<Void, Never>, prepared: Prepared, configuration: ReceiverConfiguration,
        whenServing: @escaping @Sendable (_ address: SocketAddress) -> Void, logger: Logger
    ) throws(ReceiverStartError) {
        guard let address = listener.channel.localAddress else {
            throw .bindFailed(host: configuration.host, port: configuration.port, reason: "the listening socket has no local address")
        }
        localAddress = address
        self.listener = listener
        group = prepared.group
        registry = prepared.registry
        writerPool = prepared.writerPool
        directory = prepared.directory
        alarmHook = prepared.alarmHook
        outputDirectory = configuration.outputDirectory
        handOff = configuration.handOff
        shutdownTimeout = configuration.shutdownTimeout
        self.whenServing = whenServing
        self.logger = logger
    }

    /// Checks the output folder, opens the commit log and binds. The preparation reads and writes
    /// the disk (the folder, the commit log's replay, hand-offs and alarms left from the last run)
    /// on a thread of its own (`BlockingWork`); the bind is awaited. Connections are taken in once
    /// `run()` runs; `whenServing` is told the address then (capture-recv announces it there, once
    /// the service group traps the signals).
    public static func start(
        configuration: ReceiverConfiguration, logger: Logger, whenServing: @escaping @Sendable (_ address: SocketAddress) -> Void = { _ in }
    ) async throws(ReceiverStartError) -> CaptureReceiverServer {
        let prepared = try await BlockingWork.run("receiver start") { () throws(ReceiverStartError) in
            try prepare(configuration: configuration, logger: logger)
        }
        let listener: NIOAsyncChannel<Void, Never>
        do {
            listener = try await ServerBootstrap(group: prepared.group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AcceptFailureLogger(logger: logger))
                    }
                }
                .bind(host: configuration.host, port: configuration.port) { [connections = prepared.connections] channel in
                    channel.eventLoop.makeCompletedFuture { connections.setUp(channel) }
                }
        } catch {
            try? await prepared.group.shutdownGracefully()
            await BlockingWork.run("receiver stop") { prepared.writerPool.shutDown() }
            throw .bindFailed(host: configuration.host, port: configuration.port, reason: ListenErrorText.reason(error, host: configuration.host, port: configuration.port))
        }
        return try CaptureReceiverServer(listener: listener, prepared: prepared, configuration: configuration, whenServing: whenServing, logger: logger)
    }

    /// Takes in connections until a graceful shutdown is asked for or the task is cancelled, then
    /// stops (`shutDown`). Throws `ShutdownError.deadlineExceeded` when files were still open at the
    /// deadline, so that the program can choose its exit status, and the listening channel's error
    /// if it failed (after stopping all the same).
    public func run() async throws {
        whenServing(localAddress)
        var failure: (any Error)?
        do {
            try await withGracefulShutdownHandler {
                try await listener.executeThenClose { connections, _ in
                    // Each connection is served by its pipeline; taking it in lets NIO accept the next.
                    for try await _ in connections {}
                }
            } onGracefulShutdown: { [listener, logger, shutdownTimeout] in
                logger.notice("shutting down gracefully", metadata: ["deadline": "\(shutdownTimeout)"])
                listener.channel.close(promise: nil)
            }
        } catch is CancellationError {
            logger.notice("cancelled: shutting down", metadata: ["deadline": "\(shutdownTimeout)"])
        } catch {
            logger.error("the listening socket failed; stopping", metadata: ["reason": "\(SystemErrorText.describe(error))"])
            failure = error
        }
        let clean = await shutDown()
        if let failure { throw failure }
        guard clean else { throw ShutdownError.deadlineExceeded(service: "the receiver", deadline: shutdownTimeout) }
    }

    /// What `start` prepares before it binds.
    private struct Prepared: Sendable {
        let group: MultiThreadedEventLoopGroup
        let registry: StreamRegistry
        let writerPool: WriterPool
        let directory: StreamDirectory
        let alarmHook: AlarmHook?
        let connections: ConnectionSetup
    }

    /// The output folder, the writer pool and its commit log, the directory, and how connections
    /// are set up.
    private static func prepare(configuration: ReceiverConfiguration, logger: Logger) throws(ReceiverStartError) -> Prepared {
        try prepareOutputDirectory(configuration.outputDirectory)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, min(System.coreCount, 4)))
        let registry = StreamRegistry()
        let tls = try configuration.tls?.prepare()
        let writerPool = try WriterPool(
            policy: configuration.syncPolicy, metrics: configuration.metrics, outputDirectory: configuration.outputDirectory,
            logRoot: configuration.logDirectory, logger: logger, settingNames: configuration.settingNames)
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
        let connections = ConnectionSetup(
            configuration: configuration, registry: registry,
            storage: PooledStreamStorage(files: StreamFiles(configuration: configuration, pool: writerPool)),
            rateLimiter: AuthRateLimiter(maximumFailures: configuration.authFailureLimit, blockDuration: configuration.authBlockDuration),
            tls: tls, directory: directory, logger: logger)
        return Prepared(
            group: group, registry: registry, writerPool: writerPool, directory: directory, alarmHook: alarmHook, connections: connections)
    }

    private static func prepareOutputDirectory(_ path: String) throws(ReceiverStartError) {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw .outputDirectory(.cannotCreate(path: path, reason: SystemErrorText.describe(error)))
            }
        } else if !isDirectory.boolValue {
            throw .outputDirectory(.notAFolder(path: path))
        }
        guard FileManager.default.isWritableFile(atPath: path) else {
            throw .outputDirectory(.notWritable(path: path))
        }
        do throws(DurableFileError) {
            try StreamIndex(outputDirectory: path).prepare()
        } catch {
            throw .outputDirectory(.streamIndex(reason: error.description))
        }
    }

    /// Streams being recorded now.
    public var activeStreamCount: Int { registry.activeStreamCount }

    /// Stops accepting, tells every sender, finishes every open file and stops, waiting at most
    /// `ReceiverConfiguration.shutdownTimeout`. Returns false when files were still open at the
    /// deadline. `run()` calls it when it ends; call it yourself only for a server that never ran.
    /// Whoever calls first starts the shutdown and every caller awaits that one. The listening
    /// channel's close is awaited; the rest waits for the disk (the open files' finish, the writer
    /// lanes, the hand-off commands), on a thread of its own (`BlockingWork`).
    @discardableResult
    public func shutDown() async -> Bool {
        let shutdown = stopping.withLock { task in
            if let task { return task }
            let started = Task { [self] in await stop() }
            task = started
            return started
        }
        return await shutdown.value
    }

    private func stop() async -> Bool {
        let started = DispatchTime.now()
        let timeout = shutdownTimeout
        // Running hand-off commands are stopped (their process groups: SIGTERM, then SIGKILL) while
        // the files finish; they run again at the next start, and none outlives the receiver.
        handOff?.beginStopping()
        alarmHook?.beginStopping()
        try? await listener.channel.close()
        return await BlockingWork.run("receiver stop") { [self] in finishAndStop(started: started, timeout: timeout) }
    }

    /// The blocking part of `shutDown`: every open file finished or let go of, the writer pool and
    /// the event loops stopped, the hand-off and alarm commands waited for.
    private func finishAndStop(started: DispatchTime, timeout: Duration) -> Bool {
        registry.shutDownAll()
        let clean = registry.waitUntilEmpty(deadline: Date().addingTimeInterval(timeout.inSeconds))
        // Streams whose connection was lost earlier have unfinished files: finish those nobody holds
        // too, keeping their position logs and index entries so their senders can still resume them.
        AbandonedStreamSweeper.sweep(index: StreamIndex(outputDirectory: outputDirectory), mode: .finalizeResumable, logger: logger)
        // Every queued disk operation runs (its completion still reaches a live event loop), then a
        // last sync round.
        writerPool.shutDown()
        try? group.syncShutdownGracefully()
        // The hand-off and alarm commands get at least their grace from SIGTERM to SIGKILL, and a second.
        let commandsDeadline = started + max(timeout, FinishedFileHandOff.stopGrace + .seconds(1)).inSeconds
        if let handOff, !handOff.waitUntilStopped(deadline: commandsDeadline) {
            logger.error("a hand-off command still ran when the receiver stopped; its hand-off runs again at the next start, once that command has ended")
        }
        if let alarmHook, !alarmHook.waitUntilStopped(deadline: commandsDeadline) {
            logger.error("an alarm hook command still ran when the receiver stopped; it runs again at the next start, once that command has ended")
        }
        return clean
    }
}
