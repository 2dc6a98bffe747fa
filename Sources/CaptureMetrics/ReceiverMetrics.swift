import CaptureCore
import CoreMetrics
import class Prometheus.PrometheusCollectorRegistry
import struct Prometheus.PrometheusMetricsFactory

/// The receiver's metrics, as swift-metrics objects made by a `PrometheusMetricsFactory` over this
/// object's own registry (never the global `MetricsSystem`), so several receivers (or tests) in one
/// process each count on their own. The receiver calls the small methods below as things happen;
/// `exposition()` renders everything in the Prometheus text format, with the figures read at scrape
/// time (the live streams' levels, which the receiver already keeps for its console) added.
///
/// What the receiver feeds per audio message is one atomic increment (`packetsReceived`); the
/// rest is per connection, per Ack, per disk round or per scrape.
public final class ReceiverMetrics: Sendable {
    /// Metric names, as they appear in the exposition.
    public enum Name {
        public static let activeStreams = "capture_active_streams"
        public static let activeConnections = "capture_active_connections"
        public static let bytesReceived = "capture_received_bytes_total"
        public static let packetsReceived = "capture_received_packets_total"
        public static let acksSent = "capture_acks_sent_total"
        public static let filesFinalized = "capture_files_finalized_total"
        public static let refusals = "capture_refusals_total"
        public static let errors = "capture_errors_total"
        public static let diskWriteSeconds = "capture_disk_write_seconds"
        public static let streamBacklogBytes = "capture_stream_backlog_bytes"
        public static let streamBacklogSeconds = "capture_stream_backlog_seconds"
        public static let waitingStreams = "capture_waiting_streams"
        public static let streamAlarm = "capture_stream_alarm"
        public static let ackLatencySeconds = "capture_ack_latency_seconds"
        public static let diskRounds = "capture_disk_rounds_total"
        public static let diskRoundSeconds = "capture_disk_round_seconds"
        public static let diskRoundStreams = "capture_disk_round_streams"
        public static let streamPeakDBFS = "capture_stream_peak_dbfs"
        public static let streamShortTermLUFS = "capture_stream_short_term_lufs"

        /// Every name above, in name order.
        public static let all: [String] = [
            activeStreams, activeConnections, bytesReceived, packetsReceived, acksSent, filesFinalized, refusals, errors,
            diskWriteSeconds, streamBacklogBytes, streamBacklogSeconds, waitingStreams, streamAlarm, ackLatencySeconds,
            diskRounds, diskRoundSeconds, diskRoundStreams, streamPeakDBFS, streamShortTermLUFS,
        ].sorted()
    }

    /// The disk write latency histogram's upper bounds: 100 µs to 2.5 s.
    public static let diskWriteBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2_500),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2_500),
    ]

    /// The ack latency histogram's upper bounds: 1 ms to 10 s (a round starts 200 ms after the first
    /// audio not yet in one, by default, so most Acks come within 200 ms and a sync).
    public static let ackLatencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(150), .milliseconds(200), .milliseconds(250), .milliseconds(300), .milliseconds(400), .milliseconds(500),
        .milliseconds(750), .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10),
    ]

    /// The streams-per-round histogram's upper bounds: 1 to 10,000 streams in one group commit.
    public static let roundStreamBuckets: [Double] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000]

    /// One `# HELP` text per metric name.
    static let helpTexts: [String: String] = [
        Name.activeStreams: "Streams being recorded now.",
        Name.activeConnections: "Sender connections open now.",
        Name.bytesReceived: "Audio payload bytes received.",
        Name.packetsReceived: "Audio packets received.",
        Name.acksSent: "Acknowledgements sent to senders.",
        Name.filesFinalized: "CAF files finished (sizes set) at end of stream or shutdown.",
        Name.refusals: "Connections or streams refused, by reason.",
        Name.errors: "Errors, by reason.",
        Name.diskWriteSeconds: "Time to write (and sync) audio to disk, in seconds.",
        Name.streamBacklogBytes: "Bytes a sender reports waiting in its spool, by stream.",
        Name.streamBacklogSeconds: "Seconds of audio a sender reports waiting in its spool, by stream.",
        Name.streamAlarm: "1 while an alarm (kind: silence, clipping, loudness, link-down, no-audio) is raised on a stream, 0 once cleared.",
        Name.waitingStreams: "Interrupted streams whose files wait in the output folder for their senders to resume them (at the last sweep).",
        Name.ackLatencySeconds: "Seconds from an audio message's arrival to the first Ack that covers it, sampled at most once per Ack: the first audio message to arrive after the previous sample's Ack.",
        Name.diskRounds: "Disk rounds (group commits) run: each appends every stream's new audio to the commit log and syncs it once.",
        Name.diskRoundSeconds: "Time a disk round took, from taking the streams' audio to the commit log's sync, in seconds.",
        Name.diskRoundStreams: "Streams whose audio one disk round made durable.",
        Name.streamPeakDBFS: "A live stream's latest sample peak per channel (1, 2, ...), in dBFS (-120 is silence), as its sender measured it.",
        Name.streamShortTermLUFS: "A live stream's latest EBU R128 short-term loudness (last 3 s), in LUFS (-120 is silence), when its sender measures it.",
    ]

    /// The registry the metrics live in; `exposition()` renders it.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let activeStreams: Meter
    private let activeConnections: Meter
    private let waitingStreamsMeter: Meter
    private let bytesReceivedCounter: Counter
    private let packetsReceivedCounter: Counter
    private let acksSentCounter: Counter
    private let filesFinalizedCounter: Counter
    private let diskWriteTimer: CoreMetrics.Timer
    private let ackLatencyTimer: CoreMetrics.Timer
    private let diskRoundsCounter: Counter
    private let diskRoundTimer: CoreMetrics.Timer
    private let diskRoundStreamsRecorder: Recorder

    /// Metrics in a new registry of their own.
    /// - Parameters:
    ///   - refusalReasons: reasons shown at 0 before the first refusal, so rates work from the start.
    ///   - errorReasons: the same for errors.
    public init(
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        refusalReasons: [String] = [], errorReasons: [String] = []
    ) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[Name.diskWriteSeconds] = Self.diskWriteBuckets
        factory.durationHistogramBuckets[Name.diskRoundSeconds] = Self.diskWriteBuckets
        factory.durationHistogramBuckets[Name.ackLatencySeconds] = Self.ackLatencyBuckets
        factory.valueHistogramBuckets[Name.diskRoundStreams] = Self.roundStreamBuckets
        self.factory = factory
        activeStreams = Meter(label: Name.activeStreams, factory: factory)
        activeConnections = Meter(label: Name.activeConnections, factory: factory)
        waitingStreamsMeter = Meter(label: Name.waitingStreams, factory: factory)
        bytesReceivedCounter = Counter(label: Name.bytesReceived, factory: factory)
        packetsReceivedCounter = Counter(label: Name.packetsReceived, factory: factory)
        acksSentCounter = Counter(label: Name.acksSent, factory: factory)
        filesFinalizedCounter = Counter(label: Name.filesFinalized, factory: factory)
        diskWriteTimer = CoreMetrics.Timer(label: Name.diskWriteSeconds, factory: factory)
        ackLatencyTimer = CoreMetrics.Timer(label: Name.ackLatencySeconds, factory: factory)
        diskRoundsCounter = Counter(label: Name.diskRounds, factory: factory)
        diskRoundTimer = CoreMetrics.Timer(label: Name.diskRoundSeconds, factory: factory)
        diskRoundStreamsRecorder = Recorder(label: Name.diskRoundStreams, aggregate: true, factory: factory)
        activeStreams.set(0)
        activeConnections.set(0)
        waitingStreamsMeter.set(0)
        for reason in refusalReasons { _ = reasonCounter(Name.refusals, reason) }
        for reason in errorReasons { _ = reasonCounter(Name.errors, reason) }
    }

    // MARK: What the receiver reports

    /// A sender connected.
    public func connectionOpened() { activeConnections.increment() }
    /// A sender connection closed (for any reason).
    public func connectionClosed() { activeConnections.decrement() }
    /// A stream began recording (new or resumed).
    public func streamOpened() { activeStreams.increment() }

    /// Streams waiting for their senders in the output folder, as a sweep counted them.
    public func waitingStreams(_ count: Int) { waitingStreamsMeter.set(count) }
    /// A stream stopped recording (ended, broken off, or shut down); its backlog series go away.
    public func streamClosed(stream: String? = nil) {
        activeStreams.decrement()
        if let stream { backlogCleared(stream: stream) }
    }
    /// Audio payload bytes arrived.
    public func bytesReceived(_ count: Int) { bytesReceivedCounter.increment(by: max(0, count)) }
    /// Audio packets arrived.
    public func packetsReceived(_ count: Int) { packetsReceivedCounter.increment(by: max(0, count)) }
    /// An acknowledgement went to a sender.
    public func ackSent() { acksSentCounter.increment() }
    /// A CAF file was finished.
    public func fileFinalized() { filesFinalizedCounter.increment() }
    /// A connection or stream was refused, for `reason` (a short snake_case word: `auth`, `limit`, `version`…).
    public func refused(reason: String) { reasonCounter(Name.refusals, reason).increment() }
    /// Something went wrong, for `reason` (a short snake_case word: `disk_full`, `protocol`…).
    public func error(reason: String) { reasonCounter(Name.errors, reason).increment() }
    /// A disk write (with its sync, if any) took `seconds`.
    public func diskWrite(seconds: Double) { diskWriteTimer.recordSeconds(max(0, seconds)) }
    /// A disk write (with its sync, if any) took `duration`.
    public func diskWrite(duration: Duration) { diskWriteTimer.recordNanoseconds(Self.nanoseconds(duration)) }
    /// An Ack was sent `duration` after the sampled audio message it is the first to cover arrived
    /// (`ReceiverMetricsTap` picks the sample).
    public func ackLatency(_ duration: Duration) { ackLatencyTimer.recordNanoseconds(Self.nanoseconds(duration)) }
    /// A disk round (group commit) made `streams` streams' new audio durable in `duration`.
    public func diskRound(duration: Duration, streams: Int) {
        diskRoundsCounter.increment()
        diskRoundTimer.recordNanoseconds(Self.nanoseconds(duration))
        diskRoundStreamsRecorder.record(max(0, streams))
    }
    /// What a sender reports waiting in its spool for `stream`.
    public func backlog(stream: String, bytes: Int, seconds: Double? = nil) {
        Gauge(label: Name.streamBacklogBytes, dimensions: [("stream", stream)], factory: factory).record(max(0, bytes))
        if let seconds {
            Gauge(label: Name.streamBacklogSeconds, dimensions: [("stream", stream)], factory: factory).record(max(0, seconds))
        }
    }
    /// An alarm of `kind` raised (1) or cleared (0) on `stream`; a cleared alarm's series stays at 0.
    public func alarm(stream: String, kind: String, raised: Bool) {
        Gauge(label: Name.streamAlarm, dimensions: [("stream", stream), ("kind", kind)], factory: factory).record(raised ? 1 : 0)
    }

    /// Removes `stream`'s backlog series (the stream is gone).
    public func backlogCleared(stream: String) {
        // Making a series that is not there and destroying it leaves the registry as it was.
        for name in [Name.streamBacklogBytes, Name.streamBacklogSeconds] {
            Gauge(label: name, dimensions: [("stream", stream)], factory: factory).destroy()
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 { max(0, duration.inNanoseconds) }

    private func reasonCounter(_ name: String, _ reason: String) -> Counter {
        Counter(label: name, dimensions: [("reason", reason)], factory: factory)
    }

    // MARK: Exposition

    /// Every metric in the Prometheus text format 0.0.4, families sorted by name, each with its
    /// `# HELP` and `# TYPE` lines, with `streamLevels` (read by the caller at scrape time: the
    /// console passes its stream directory's live streams) as `capture_stream_peak_dbfs` and
    /// `capture_stream_short_term_lufs`; those families are absent when no stream has levels.
    public func exposition(streamLevels: [StreamLevelReading] = []) -> String {
        ExpositionText.sortedWithHelp(registry.emitToString() + "\n" + StreamLevelReading.exposition(streamLevels), helpTexts: Self.helpTexts)
    }
}
