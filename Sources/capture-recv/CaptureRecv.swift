import ArgumentParser
import CAF
import CaptureCLISupport
import CaptureConsole
import CaptureCore
import CaptureListen
import CaptureMetrics
import CaptureService
import CaptureReceiver
import CaptureSecurity
import Dispatch
import Foundation
import Logging
import NIOCore
import ServiceLifecycle

/// `capture-recv`: receives audio streams from capture-send and writes each to a CAF file.
struct CaptureRecv: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture-recv",
        abstract: "Receive audio streams from capture-send and write each one to a CAF file.",
        discussion: """
            Run without a subcommand to receive (the same as `capture-recv serve`):
              capture-recv --out DIR [--listen HOST:PORT]
            See `capture-recv serve --help` for every option.
            """,
        version: ProgramVersion.line(for: "capture-recv"),
        subcommands: [Serve.self, Recover.self, Export.self, GenCert.self],
        defaultSubcommand: Serve.self
    )

    /// The root help: serve's help, and the subcommands.
    static func rootHelp(columns: Int? = nil) -> String {
        let serve = helpMessage(for: Serve.self, columns: columns)
            .replacingOccurrences(of: "USAGE: capture-recv serve ", with: "USAGE: capture-recv [serve] ")
        return serve.trimmingCharacters(in: .newlines) + """


            SUBCOMMANDS:
              serve (default)         \(Serve.configuration.abstract)
              recover                 \(Recover.configuration.abstract)
              export                  \(Export.configuration.abstract)
              gen-cert                \(GenCert.configuration.abstract)

              See 'capture-recv help <subcommand>' for detailed help.
            """
    }
}

/// Receives streams until SIGINT or SIGTERM.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receive streams and write one CAF file per stream (the default subcommand).",
        discussion: """
            Files are named STREAM-NAME_YYYYMMDDTHHMMSSZ.caf after the sanitized stream name and the \
            stream's UTC start time, and are only ever created inside --out. While a stream records, its \
            file is readable (the data chunk size is -1); at end of stream the sizes are set and the path \
            is logged. Audio is acknowledged to the sender only once it is durable: one round for every \
            stream at most --sync-ms milliseconds after the audio was written (or at once when a stream \
            has 2 MiB waiting) appends it to the receiver's commit log and syncs that one file; \
            checkpoints make the recordings durable every 30 s, and a restart replays the log. A stream whose connection is lost stays \
            open (unfinalized) for its sender to resume, also across a restart of capture-recv, for \
            --resume-window seconds. SIGINT or SIGTERM tells connected senders, finalizes every open \
            file (a sender that comes back after a restart still continues its file) and exits 0. \
            See docs/DURABILITY.md.
            """
    )

    @Option(name: .long, help: ArgumentHelp("Folder for the recordings (created if missing).", valueName: "DIR"))
    var out: String

    @Option(
        name: .long, help: ArgumentHelp("Address and port to listen on; an empty host means all addresses. (default: 0.0.0.0:\(ReceiverConfiguration.defaultPort))", valueName: "HOST:PORT"),
        transform: HostAndPort.listenAddress)
    var listen = HostAndPort(host: "0.0.0.0", port: ReceiverConfiguration.defaultPort)

    @Option(
        name: .long,
        help: ReceiveRanges.maxStreams.help(
            "Streams recorded at the same time at most; connections beyond it (and \(StreamCapacity.handshakeAllowance) more in their handshake) are refused. A value above what the open-file limit allows is lowered to that, with a warning.",
            valueName: "N",
            default: "what the open-file limit allows at \(StreamCapacity.descriptorsPerStream) file per stream (its connection), raised to its hard limit at start, and at most one stream per MiB of memory. Each stream keeps its recording open too when the limit has room for \(StreamCapacity.descriptorsPerStreamHoldingFiles) per stream; otherwise files are opened for each write"),
        transform: ReceiveRanges.maxStreams.integer)
    var maxStreams: Int?

    @Option(name: .long, help: ReceiveRanges.maxFrameBytes.help("Largest frame accepted, in bytes.", default: "1114112"), transform: ReceiveRanges.maxFrameBytes.integer)
    var maxFrameBytes = 1_048_576 + 65_536

    @Option(
        name: .long,
        help: ReceiveRanges.syncMs.help(
            "Milliseconds written audio may wait for a round, which commits every stream's new audio to the commit log at once (and so for its acknowledgement).", default: "200"),
        transform: ReceiveRanges.syncMs.integer)
    var syncMs = 200

    @Option(
        name: .long, help: ReceiveRanges.handshakeTimeout.help("Seconds a new connection has to complete the handshake.", default: "10"),
        transform: ReceiveRanges.handshakeTimeout.integer)
    var handshakeTimeout = 10

    @Option(
        name: .long, help: ReceiveRanges.idleTimeout.help("Seconds of silence after which a connection is considered dead.", default: "20"),
        transform: ReceiveRanges.idleTimeout.integer)
    var idleTimeout = 20

    @OptionGroup var logging: LogOptions<ReceiveLogLevel>

    @OptionGroup(title: "TLS and authentication (docs/SECURITY.md)")
    var security: ReceiverSecurityOptions

    @OptionGroup(title: "Console, API and metrics (docs/HTTP-API.md)")
    var httpOptions: HTTPOptions

    @OptionGroup(title: "Interrupted streams")
    var durability: DurabilityOptions

    @OptionGroup(title: "Alarms (docs/HTTP-API.md, \"Alarms\")")
    var alarmOptions: AlarmOptions

    @OptionGroup(title: "Recordings: segments and names (docs/RECORDINGS.md)")
    var recordings: RecordingOptions

    @OptionGroup(title: "Configuration")
    var configFile: ConfigFileOption<ReceiveConfigFile>

    /// Puts the limits and time amounts into `configuration` (each number is within its range,
    /// ReceiveRanges, once parsed); --max-streams as `capacity` allows it (`StreamCapacity.maximumStreams`).
    func applyLimits(to configuration: inout ReceiverConfiguration, capacity: StreamCapacity) {
        configuration.maximumStreams = capacity.maximumStreams(requested: maxStreams)
        configuration.holdsFileDescriptors = capacity.holdsFileDescriptors(maximumStreams: configuration.maximumStreams)
        configuration.maximumFrameBytes = maxFrameBytes
        configuration.syncPolicy = SyncPolicy(interval: .milliseconds(syncMs))
        configuration.handshakeTimeout = .nanoseconds(Saturating.nanoseconds(seconds: Double(handshakeTimeout)))
        configuration.idleTimeout = .nanoseconds(Saturating.nanoseconds(seconds: Double(idleTimeout)))
        configuration.heartbeatInterval = .nanoseconds(Saturating.nanoseconds(seconds: Double(max(1, idleTimeout / 4))))
        security.applyLimits(to: &configuration)
        durability.apply(to: &configuration)
        alarmOptions.apply(to: &configuration)
    }

    func run() async throws {
        try await logging.reportingErrors(label: "capture-recv") { try await serve() }
    }

    /// capture-recv logs at info unless told otherwise.
    enum ReceiveLogLevel: DefaultLogLevel {
        static var level: Logger.Level { .info }
    }

    /// Receives until a signal; throws `CLIError` for the one line a failed start ends with.
    private func serve() async throws {
        let logger = LoggingSetup.bootstrap(label: "capture-recv", format: logging.logFormat, level: logging.logLevel)
        var configuration = ReceiverConfiguration(outputDirectory: out, host: listen.host, port: listen.port)
        let capacity = StreamCapacity.raiseAndMeasure()
        applyLimits(to: &configuration, capacity: capacity)
        configuration.applicationName = "capture-recv \(ProgramVersion.version)"
        // The graceful stop's deadline; the service group escalates to cancellation 5 s later, and
        // systemd's TimeoutStopSec and docker's stop timeout are longer still.
        configuration.shutdownTimeout = .seconds(10)
        configuration.settingNames = CommandLineSettingNames()
        try recordings.apply(to: &configuration, logger: logger)
        try alarmOptions.applyHook(to: &configuration, logger: logger)
        try security.apply(to: &configuration, logger: logger)
        let access: ConsoleAccess?
        do {
            access = try httpOptions.access()
        } catch let error as ConsoleSetupError {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        } catch let error as SecurityError {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        } catch {
            throw CLIError("\(error)")
        }
        if let warning = httpOptions.warning { logger.warning("\(warning)") }
        let metrics = httpOptions.http.map { _ in
            ReceiverMetrics(
                refusalReasons: ["malformedFrame", "unsupportedVersion", "badFormat", "authenticationFailed", "tooManyStreams", "timeout"],
                errorReasons: ["storageFailed", "sequenceGap", "invalidMessage"]
            )
        }
        configuration.metrics = metrics
        // Live listening is served by the console: its registry hears every accepted stream.
        let listening = httpOptions.http.map { _ in LiveListeningRegistry() }
        configuration.listening = listening

        let server: CaptureReceiverServer
        do {
            // Announced once the service group traps SIGTERM and SIGINT (the server's run), so a
            // signal from then on always shuts down gracefully.
            server = try await CaptureReceiverServer.start(configuration: configuration, logger: logger) { address in
                StandardStreams.writeOutput("listening on \(address.userText)\n")
            }
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
        logger.info("listening", metadata: ["address": "\(server.localAddress.userText)", "out": "\(out)"])
        Self.logCapacity(capacity, requested: maxStreams, maximumStreams: configuration.maximumStreams, logger: logger)

        var services: [any Service] = []
        if let address = httpOptions.http, let access {
            var settings = ConsoleSettings(
                host: address.host, port: address.port, access: access,
                tlsCertificatePath: configuration.tls?.certificatePath, tlsKeyPath: configuration.tls?.privateKeyPath)
            settings.settingNames = CommandLineSettingNames()
            let scheme = configuration.tls == nil ? "http" : "https"
            do {
                services.append(try ConsoleServer.make(
                    settings: settings, metrics: metrics, directory: server.directory, listening: listening,
                    recordings: RecordingCatalogue(outputDirectory: out), logger: logger,
                    onListening: { port in
                        // Announced once it listens: tests and scripts read the port from here.
                        StandardStreams.writeOutput("http on \(address.host):\(port)\nmetrics on \(address.host):\(port)\n")
                        logger.info("serving the console, API and metrics", metadata: ["url": "\(scheme)://\(address.host):\(port)/"])
                    }))
            } catch {
                await server.shutDown()
                throw CLIError(error.message(naming: CommandLineSettingNames()))
            }
        }

        // SIGTERM or SIGINT: stop accepting, tell senders, finish every open file, exit 0 within a
        // bounded time (swift-service-lifecycle).
        do {
            try await SignalledServiceRunner.run([server] + services, maximumGracefulShutdownDuration: .seconds(15), logger: logger)
        } catch let error as ShutdownError {
            logger.error("\(error)")
        } catch let error as ConsoleSetupError {
            // The console could not listen: the receiver stopped (its files finalized), and says why.
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
        logger.notice("stopped")
    }
}

extension Serve {
    /// Says how many streams the open-file limit allows and what the limit is, and warns when
    /// --max-streams (`requested`) asked for more than the limit allows and was lowered.
    static func logCapacity(_ capacity: StreamCapacity, requested: Int?, maximumStreams: Int, logger: Logger) {
        let raised = capacity.openFileLimit > capacity.openFileLimitBefore ? " (raised from \(capacity.openFileLimitBefore))" : ""
        logger.info("stream limit", metadata: [
            "max-streams": "\(maximumStreams)",
            "open-file-limit": "\(capacity.openFileLimit)\(raised)",
            "streams-the-open-file-limit-allows": "\(capacity.streamsAllowedByOpenFiles)",
            "recordings-held-open": "\(capacity.holdsFileDescriptors(maximumStreams: maximumStreams) ? "yes" : "no (opened for each write: lower --max-streams to \(capacity.streamsHoldingFiles) to keep them open)")",
        ])
        if let requested, requested > maximumStreams {
            logger.warning("--max-streams \(requested) needs an open-file limit of \(StreamCapacity.openFilesNeeded(forStreams: requested)) but this process may open \(capacity.openFileLimit) files: lowered to \(maximumStreams) streams, and the streams beyond are refused as too many; to record \(requested) at once, raise the limit (LimitNOFILE= in the systemd unit, ulimit -Hn, or the container's nofile ulimit)")
        }
    }
}


/// Finalizes CAF files that a crashed receiver left unfinished.
struct Recover: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Finish CAF files left open by a receiver that crashed (sets sizes, rebuilds the packet table).",
        discussion: """
            Safe to run on finished files: they are left as they are. First the commit logs of receivers \
            that are not running are replayed into the recordings, so that every acknowledged sample is \
            in a file before it is finished: the logs under --log-dir, else under the .commit-log folder \
            of --out, else of the nearest folder above each file that has one.
            """
    )

    @Argument(help: ArgumentHelp("CAF files to recover.", valueName: "PATH"))
    var paths: [String]

    @Option(name: .long, help: ArgumentHelp("The receiver's output folder the files are in. (default: the nearest folder above each file with a .commit-log folder)", valueName: "DIR"))
    var out: String?

    @Option(name: .long, help: ArgumentHelp("The receiver's --log-dir, when it had one. (default: OUT/.commit-log)", valueName: "DIR"))
    var logDir: String?

    func run() throws {
        var failed = false
        var replayed = Set<String>()
        let logger = Logger(label: "capture-recv.recover")
        for path in paths {
            if let outputDirectory = out ?? Self.outputDirectory(containing: path), replayed.insert(outputDirectory).inserted {
                do throws(ReceiverStartError) {
                    let count = try CommitLogReplay.replayAbandonedLogs(outputDirectory: outputDirectory, logDirectory: logDir, logger: logger)
                    if count > 0 { print("replayed \(count) commit log\(count == 1 ? "" : "s") into the recordings of \(outputDirectory)") }
                } catch {
                    StandardStreams.writeError("capture-recv: \(error.message(naming: CommandLineSettingNames()))\n")
                    throw ExitCode.failure
                }
            }
            do {
                let report = try CAFRecovery.recover(path: path)
                print(report.description)
            } catch {
                StandardStreams.writeError("capture-recv: \(error.description)\n")
                failed = true
            }
        }
        if failed { throw ExitCode.failure }
    }

    /// The nearest folder above `path` that holds a commit log folder.
    static func outputDirectory(containing path: String) -> String? {
        var folder = ((path as NSString).standardizingPath as NSString).deletingLastPathComponent
        if !folder.hasPrefix("/") { folder = (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(folder) }
        while !folder.isEmpty {
            if FileManager.default.fileExists(atPath: CommitLogReplay.defaultLogDirectory(outputDirectory: folder)) { return folder }
            guard folder != "/" else { return nil }
            folder = (folder as NSString).deletingLastPathComponent
        }
        return nil
    }
}
