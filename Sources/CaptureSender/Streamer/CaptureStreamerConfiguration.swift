import CaptureCore
import CaptureLocalCopy
import Foundation
import NIOCore

extension CaptureStreamer {
    /// A receiver the stream goes to: where it is, how the connection is secured, and the token it
    /// may require.
    public struct Receiver: Sendable, CustomStringConvertible {
        /// Host name or address.
        public var host: String
        /// TCP port (capture-recv listens on 7373 by default).
        public var port: Int
        /// TLS settings; nil for plain TCP.
        public var tls: SenderTLSConfiguration?
        /// Shared secret for receivers that require one (empty for none).
        public var authToken: String
        /// The identity a spooled stream is bound to (address and TLS trust), so that a restarted
        /// sender delivers it to this same receiver only. Recorded for the main receiver.
        public var identity: SpoolDestination

        public init(host: String, port: Int, tls: SenderTLSConfiguration? = nil, authToken: String = "", identity: SpoolDestination? = nil) {
            self.host = host
            self.port = port
            self.tls = tls
            self.authToken = authToken
            self.identity = identity ?? SpoolDestination(address: "\(host):\(port)")
        }

        /// HOST:PORT.
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// Everything a `CaptureStreamer` needs besides its source and encoder. Only `streamName` and
    /// `receiver` have no default.
    public struct Configuration: Sendable {
        /// The stream's name (the receiver sanitizes it into the file name).
        public var streamName: String
        /// The stream's identity, the same across reconnects and restarts.
        public var streamID: UUID = UUID()
        /// The main receiver.
        public var receiver: Receiver
        /// Backup receivers: each gets the whole stream, with its own acknowledgements and reconnects.
        public var backups: [Receiver] = []
        /// How long a backup may lack audio without making progress (unreachable, or connected
        /// without acknowledging anything new) before it is dropped and the spool stops keeping
        /// audio for it. A backup whose backlog would cost the main receiver audio or pace is
        /// dropped at once whatever this says (`BackupRoom`). The main receiver is never given up.
        public var backupGiveUpAfter: Duration = .seconds(3_600)
        /// The capture queue: buffers and their duration (kNumberBuffers, DeriveBufferSize).
        public var queue = CaptureQueue.Configuration(bufferCount: 3, bufferDuration: .milliseconds(500))
        /// The folder of the disk spool; nil keeps unacknowledged audio in memory only.
        public var spoolRoot: String? = StreamSpool.defaultRoot
        /// Unacknowledged bytes kept at most before capture overflows into a local CAF file.
        public var spoolCapacity: Int = 4 << 30
        /// Also deliver the streams earlier runs left in the spool for the main receiver.
        public var deliversEarlierStreams = true
        /// Delays between reconnection attempts.
        public var reconnect = ReconnectPolicy()
        /// Silence from a receiver after which its connection is considered dead.
        public var idleTimeout: Duration = .seconds(20)
        /// Heartbeat interval on an otherwise idle connection.
        public var heartbeatInterval: Duration = .seconds(5)
        /// Time allowed to establish a TCP connection.
        public var connectTimeout: Duration = .seconds(10)
        /// Unacknowledged bytes in flight per connection at most.
        public var windowBytes = 4 << 20
        /// Written into the handshake, and from there into the file's `info` chunk.
        public var application = "CaptureStreamer"
        /// This machine's name, for the file's `info` chunk.
        public var sourceHost = ProcessInfo.processInfo.hostName
        /// The time between two `Event.progress` events (1 s by default); nil or zero for none.
        public var progressInterval: Duration? = .seconds(1)
        /// A safety copy of the capture written on this machine while streaming (`LocalCopy`): in
        /// the capture's own format, whatever the encoder; nil: none.
        public var localCopy: LocalCopySettings?
        /// The capture's id: every stream of this capture (one per encoding) names it in its Hello
        /// when there are several.
        public var captureID = UUID()
        /// How the streamer's errors and log lines name a setting to change ("the spool is full
        /// (the spool's size limit)"): the library's words unless the program has its own.
        public var settingNames: any SettingNaming = LibrarySettingNames()

        public init(streamName: String, receiver: Receiver) {
            self.streamName = streamName
            self.receiver = receiver
        }
    }
}
