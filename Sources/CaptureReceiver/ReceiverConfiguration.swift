import CaptureCore
import CaptureSecurity
import NIOCore

/// Everything capture-recv can be told: where to listen, where files go, and its limits.
public struct ReceiverConfiguration: Sendable {
    /// The default TCP port, 7373.
    public static let defaultPort = 7373

    /// Folder that receives one CAF file per stream.
    public var outputDirectory: String
    /// Address to listen on.
    public var host: String
    /// Port to listen on (0 picks a free one).
    public var port: Int
    /// Streams recorded at once at most.
    public var maximumStreams: Int
    /// Largest frame accepted.
    public var maximumFrameBytes: Int
    /// Time a new connection has to complete the handshake.
    public var handshakeTimeout: Duration
    /// Silence after which a connection is considered dead.
    public var idleTimeout: Duration
    /// How often the receiver sends a heartbeat on an otherwise idle connection.
    public var heartbeatInterval: Duration
    /// When written audio is made durable and acknowledged.
    public var syncPolicy: SyncPolicy
    /// How long the shutdown may take to tell the senders and finish every open file; files still
    /// open then stay readable and resumable (`CaptureReceiverServer.shutDown`).
    public var shutdownTimeout: Duration = .seconds(10)
    /// Where the receivers' commit logs are (`--log-dir`): nil for `OUT/.commit-log`. Each receiver
    /// keeps its log in a folder of its own there.
    public var logDirectory: String? = nil
    /// Whether each recording keeps its file's descriptor open between writes. False when the
    /// open-file limit has no room for one per stream beside its connection
    /// (`StreamCapacity.holdsFileDescriptors`): files are then opened for each write.
    public var holdsFileDescriptors = true
    /// Audio a recording gathers before writing it to its file (`CAFWriter.writeBehind`): one write
    /// per 8 KiB instead of one per packet. Nothing waits on it: Acks come from the commit log.
    public var fileWriteBehind = 8_192
    /// Written to each file's `info` chunk as the encoding application.
    public var applicationName: String
    /// Where the receiver counts what it does (served by `--metrics`); nil for none.
    public var metrics: (any ReceiverMetricsRecorder)?
    /// Where accepted streams' audio goes for live listening (the console's play buttons); nil for none.
    public var listening: (any StreamListening)?
    /// TLS settings; nil for a plaintext port.
    public var tls: ReceiverTLSConfiguration? = nil
    /// Tokens a sender must present in its Hello; nil when none is required.
    public var authTokens: AuthTokens? = nil
    /// Failed authentications per peer address within a minute before that address is refused for a minute (0: no limit).
    public var authFailureLimit: Int = 5
    /// How long an address over `authFailureLimit` is refused (RATE_LIMITED).
    public var authBlockDuration: Duration = .seconds(60)
    /// How long an unfinalized stream (its connection lost, or found at start-up) stays resumable
    /// before it is finalized with what it holds; zero finalizes at once when a connection is lost.
    public var resumeWindow: Duration = .seconds(86_400)
    /// When each stream's alarms (silence, clipping, loudness, link down, no audio) are raised and
    /// cleared (`--alarm-*`, `--alarm-override`, `--no-alarms`).
    public var alarms = StreamAlarmPolicy()
    /// Interrupted streams that may wait in the output folder for their senders at once; beyond it
    /// the sweep finalizes the ones waiting longest (`--max-waiting-streams`).
    public var maximumWaitingStreams: Int = 10_000
    /// Cut each stream's recording into files of this length at UTC boundaries of its own timeline
    /// (`--segment`); nil: one file per stream.
    public var segmentLength: Duration? = nil
    /// Hands finished files on (`--on-finalize`, `--export-on-finalize`); nil: nothing runs.
    public var handOff: FinishedFileHandOff? = nil
    /// Tells each alarm raised and cleared to a command (`--on-alarm`); nil: none runs.
    public var alarmHook: AlarmHook? = nil
    /// How recordings are named (`--name-template`).
    public var nameTemplate: FileNameTemplate = .standard
    /// How the receiver's own log lines and refusals name a setting to change ("raise the stream
    /// limit"): the library's words unless the program has its own (capture-recv: its flags).
    public var settingNames: any SettingNaming = LibrarySettingNames()

    public init(
        outputDirectory: String, host: String = "0.0.0.0", port: Int = ReceiverConfiguration.defaultPort,
        maximumStreams: Int = 64, maximumFrameBytes: Int = 1_048_576 + 65_536,
        handshakeTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(20),
        heartbeatInterval: Duration = .seconds(5), syncPolicy: SyncPolicy = SyncPolicy(),
        applicationName: String = "capture-recv"
    ) {
        self.outputDirectory = outputDirectory
        self.host = host
        self.port = port
        self.maximumStreams = maximumStreams
        self.maximumFrameBytes = maximumFrameBytes
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
        self.heartbeatInterval = heartbeatInterval
        self.syncPolicy = syncPolicy
        self.applicationName = applicationName
    }
}
