import CaptureLocalCopy
import CaptureCore

extension CaptureStreamer {
    /// Which receiver a link serves.
    public enum Role: Sendable, Equatable, CustomStringConvertible {
        /// The receiver the stream is sent to (its spool is bound to it).
        case main
        /// The `n`th backup receiver (from 1).
        case backup(Int)

        public var description: String {
            switch self {
            case .main: return "main"
            case .backup(let number): return "backup \(number)"
            }
        }
    }

    /// One receiver's link at one moment.
    public struct LinkStatus: Sendable, Equatable {
        /// Main or backup.
        public var role: Role
        /// The receiver, as HOST:PORT.
        public var receiver: String
        /// Connecting, streaming, reconnecting, finished or gave up.
        public var state: SenderLinkState
        /// Whether the link uses TLS.
        public var usesTLS: Bool
        /// What this receiver acknowledged, and when it last did.
        public var progress: PacketLog.Progress
        /// The label of the encoding this receiver gets (`AudioEncoder.encodingLabel`).
        public var encoding: String = ""
        /// The log of that encoding as a whole (what was appended to it, what every receiver of it acknowledged).
        public var streamProgress: PacketLog.Progress? = nil
        /// The sample rate of that encoding's stream (for turning its sample times into seconds).
        public var sampleRate: Double = 0
    }

    /// The whole streamer at one moment, as `status` and `Event.progress` give it.
    public struct Status: Sendable, Equatable {
        /// Seconds of audio captured (and lost to overruns) since the start.
        public var secondsCaptured: Double
        /// Capture overruns so far.
        public var overruns: Int64
        /// Frames lost in those overruns.
        public var framesLost: Int64
        /// The log as a whole: acknowledged means held by every receiver still served; the
        /// unacknowledged bytes are what the spool keeps.
        public var log: PacketLog.Progress
        /// The sample rate of the sent stream (for turning sample times into seconds).
        public var outputSampleRate: Double
        /// Each receiver's link: the main receiver first, then the backups in order.
        public var links: [LinkStatus]
        /// The safety copy on the unit (`Configuration.localCopy`); nil without one.
        public var localCopy: LocalCopy.Progress? = nil
        /// Every encoding's stream (one with a single encoding), in `CaptureStreamer.encodings` order.
        public var encodings: [EncodingStatus] = []
    }

    /// One encoding's stream at one moment.
    public struct EncodingStatus: Sendable, Equatable {
        /// The encoding's label.
        public var label: String
        /// Its log as a whole: what was appended, what every receiver of it acknowledged, the backlog.
        public var progress: PacketLog.Progress
        /// Its stream's sample rate.
        public var sampleRate: Double
    }

    /// How one receiver's delivery ended.
    public struct LinkOutcome: Sendable {
        /// Main or backup.
        public var role: Role
        /// The receiver, as HOST:PORT.
        public var receiver: String
        /// The label of the encoding it was sent.
        public var encoding: String = ""
        /// What the receiver confirmed, or why it could not.
        public var result: Result<StreamSummary, SenderError>
        /// Foreground or background.
        public var priority: Priority = .foreground
        /// For a background destination whose delivery ended before its receiver had everything
        /// (deferred, or stopped): what stays in its spool for a later delivery.
        public var leftInSpool: LeftInSpool? = nil
    }

    /// What a background delivery left in its spool for `capture-send spool deliver` or the next run.
    public struct LeftInSpool: Sendable, Equatable {
        /// Seconds of audio its receiver has not acknowledged.
        public var seconds: Double
        /// Bytes of it.
        public var bytes: Int
        /// The spool folder that keeps it.
        public var spoolDirectory: String
        /// Ended by `deferBackground()` (as asked) rather than by a failure or `stopDelivering()`.
        public var deferred: Bool
    }

    /// How a run ended, once capture and every delivery are over.
    public struct Outcome: Sendable {
        /// How capture ended.
        public var capture: Result<CaptureQueue.Completion, SenderError>
        /// Each receiver's delivery, the main receiver first.
        public var links: [LinkOutcome]
        /// Delivery was stopped by `stopDelivering()`: what was not acknowledged stays in the spool.
        public var stoppedDelivering: Bool
        /// Earlier streams from the spool that could not be delivered and stay there, one line
        /// each saying why (a failed delivery, damage that keeps one from being delivered, an
        /// unreadable `meta.json`).
        public var earlierStreamFailures: [String]
        /// Earlier streams delivered without audio that spool damage destroyed, one line each
        /// naming the seconds lost and where the damaged bytes are kept.
        public var earlierStreamLosses: [String]
        /// How the safety copy on the unit went (`Configuration.localCopy`); nil without one.
        public var localCopy: LocalCopy.Outcome? = nil

        /// The main receiver's delivery.
        public var main: LinkOutcome { links[0] }
        /// Backups that did not get the whole stream, but for background ones left in their spools
        /// as asked (`deferredBackground`).
        public var incompleteBackups: [LinkOutcome] {
            links.dropFirst().filter {
                guard case .failure = $0.result else { return false }
                return $0.leftInSpool?.deferred != true
            }
        }
        /// Background destinations whose audio was left in their spools by `deferBackground()`.
        public var deferredBackground: [LinkOutcome] {
            links.filter { $0.leftInSpool?.deferred == true }
        }
    }

    /// What a running streamer reports through `events`.
    public enum Event: Sendable {
        /// A receiver's link changed state.
        case link(role: Role, receiver: String, state: SenderLinkState)
        /// Something about the log's storage the user must know (overflow, lost audio, a failed spool).
        case storage(PacketLogEvent)
        /// Capture ended (end of source, stopped, or failed).
        case captureEnded(Result<CaptureQueue.Completion, SenderError>)
        /// A receiver confirmed the whole stream.
        case delivered(role: Role, receiver: String, StreamSummary)
        /// A receiver's delivery ended without the whole stream: refused, given up, or stopped.
        case deliveryFailed(role: Role, receiver: String, SenderError)
        /// The safety copy on the unit stopped before the capture ended (a full or failing disk, or
        /// one that fell too far behind); the stream goes on. Once at most.
        case localCopyStopped(reason: String)
        /// The figures, every `Configuration.progressInterval` while running.
        case progress(Status)
        /// Capture and every delivery are over; the last event.
        case finished(Outcome)
    }
}
