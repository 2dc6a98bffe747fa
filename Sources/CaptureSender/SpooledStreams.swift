import CaptureCore
import Foundation
import Synchronization
import Logging

/// One stream waiting in a spool root, as `capture-send spool list` shows it.
public struct SpooledStreamSummary: Sendable, Equatable {
    /// The stream's folder.
    public var directory: String
    /// The stream's id (its folder's name).
    public var streamID: UUID
    /// The stream's name.
    public var streamName: String
    /// The receiver it belongs to; nil for spools written before destinations were recorded.
    public var destination: SpoolDestination?
    /// When sample 0 was captured.
    public var startTime: Date
    /// Seconds of audio from sample 0 to the end of the last spooled entry.
    public var capturedSeconds: Double
    /// Bytes of audio the receiver has not acknowledged.
    public var unacknowledgedBytes: Int
    /// Whether the spool holds captured audio at all (see `SpoolContents.holdsCapturedAudio`).
    public var holdsCapturedAudio: Bool
    /// "pid N" while a running capture-send holds the stream (records or delivers it).
    public var owner: String?
    /// The last delivery error ("<UTC time> <message>"), if any.
    public var lastError: String?
    /// What is damaged in the stream's spool, as `spool list` shows it in STATE ("damaged: seconds
    /// 1.500-1.600 lost", "damaged: meta.json: …"); nil when nothing is.
    public var damage: String?
    /// Why the stream's description (`meta.json`) cannot be read: such a stream is listed (its
    /// other fields empty) but never delivered, and never removed but by `spool discard`.
    public var unreadable: SpoolError?
}

/// The streams of a spool root: listing them, deciding which a run may deliver, and claiming one
/// under its exclusive lock so that two processes never deliver (or discard) the same stream.
public enum SpooledStreams {
    /// Every stream under `root`, oldest first.
    public static func list(root: String) -> [SpooledStreamSummary] {
        var result: [SpooledStreamSummary] = []
        for directory in StreamSpool.streamDirectories(root: root) {
            let spool: StreamSpool
            do throws(SpoolError) {
                guard let inspected = try StreamSpool.inspect(directory: directory) else { continue }
                spool = inspected
            } catch {
                guard let id = UUID(uuidString: (directory as NSString).lastPathComponent) else { continue }
                result.append(SpooledStreamSummary(
                    directory: directory, streamID: id, streamName: "", destination: nil, startTime: Date(timeIntervalSince1970: 0),
                    capturedSeconds: 0, unacknowledgedBytes: 0, holdsCapturedAudio: true, owner: StreamSpool.owner(directory: directory),
                    lastError: StreamSpool.lastDeliveryError(directory: directory), damage: "damaged: \(error.summary ?? error.description)",
                    unreadable: error))
                continue
            }
            defer { spool.release() }
            let contents = try? spool.contents()
            let meta = spool.meta
            let report = contents.flatMap { SpoolDamageReport(contents: $0, sampleRate: meta.format.sampleRate, keptIn: nil) }
            result.append(SpooledStreamSummary(
                directory: directory, streamID: meta.streamID, streamName: meta.streamName, destination: meta.destination,
                startTime: Date(timeIntervalSince1970: meta.startTime),
                capturedSeconds: Double(contents?.endOfLastEntry ?? 0) / meta.format.sampleRate,
                unacknowledgedBytes: contents?.entries.reduce(0) { $0 + $1.bytes } ?? 0,
                holdsCapturedAudio: contents?.holdsCapturedAudio ?? true,
                owner: StreamSpool.owner(directory: directory),
                lastError: StreamSpool.lastDeliveryError(directory: directory),
                damage: report?.state))
        }
        return result.sorted { ($0.startTime, $0.streamID.uuidString) < ($1.startTime, $1.streamID.uuidString) }
    }

    /// How an earlier stream relates to the receiver a run sends to.
    public enum Ownership: Sendable, Equatable {
        /// The stream belongs to this destination (same address as given, same TLS identity).
        case own
        /// It belongs to another receiver (or the same address verified another way).
        case other
        /// Its spool predates destinations: only `spool deliver ID --to HOST:PORT` sends it.
        case unknown
    }

    /// Whether a stream whose spool says `meta` may be delivered by a run sending to `destination`.
    public static func ownership(of meta: SpoolMeta, for destination: SpoolDestination) -> Ownership {
        guard let own = meta.destination else { return .unknown }
        return own == destination ? .own : .other
    }

    /// The result of claiming an earlier stream for delivery.
    public enum Claim {
        /// Claimed and read back: ready to deliver with `log`; `spool` is locked by this process.
        /// Damage found in its spool is in `spool.damageReport` (its bytes already kept).
        case ready(spool: StreamSpool, log: PacketLog)
        /// It held no captured audio (its run ended or died before its first buffer): its folder
        /// was removed, and nothing is delivered.
        case removedEmpty(SpoolMeta)
        /// Its spool is damaged so that it cannot be delivered (the report says why, and where its
        /// damaged bytes are kept); it is left in the spool, released.
        case undeliverable(SpoolMeta, SpoolDamageReport)
        /// A running capture-send holds it ("pid N").
        case inUse(owner: String)
        /// It was delivered or discarded meanwhile.
        case gone
    }

    /// Claims the stream in `directory` under its lock and reads it back. A stream without captured
    /// audio is removed at once instead. Damaged bytes found are copied beside the spool first
    /// (`StreamSpool.keepDamagedBytes`); a stream whose damaged bytes cannot be kept, or that
    /// cannot be delivered with its damage, is left as it is.
    public static func claim(directory: String) throws(SpoolError) -> Claim {
        switch try StreamSpool.claim(directory: directory) {
        case .gone: return .gone
        case .inUse(let owner): return .inUse(owner: owner)
        case .claimed(let spool):
            let log: PacketLog
            do throws(SpoolError) {
                log = try PacketLog(recovering: spool)
                _ = try spool.keepDamagedBytes()
            } catch {
                spool.release()
                throw error
            }
            if let report = spool.damageReport, report.undeliverable != nil {
                spool.release()
                return .undeliverable(spool.meta, report)
            }
            if !log.holdsCapturedAudio {
                log.removeSpool()
                return .removedEmpty(spool.meta)
            }
            return .ready(spool: spool, log: log)
        }
    }
}

/// Delivers claimed earlier streams, each in a task and on a connection of its own, to the
/// receiver in its configuration; a delivered stream's folder is removed, a failed one keeps its
/// folder with the error in `last-error` and is released for a later attempt.
///
/// Sendability: the senders, tasks and results are one value in a `Mutex`.
public final class SpooledStreamDeliveries: Sendable {
    /// How one delivery ended: its stream, the receiver (HOST:PORT), nil for delivered, else the
    /// error; with the damage its spool had, if any.
    public typealias Result = (streamID: UUID, streamName: String, receiver: String, error: String?, damage: SpoolDamageReport?)

    private struct State {
        var senders: [StreamSender] = []
        var deliveries: [Task<Void, Never>] = []
        var failures: [String] = []
        var outcomes: [Result] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Starts delivering a claimed stream. `configuration` names its receiver and credentials; its
    /// stream id and name are taken from the spool.
    public func start(spool: StreamSpool, log: PacketLog, configuration template: SenderConfiguration, logger: Logger) {
        var configuration = template
        configuration.streamID = spool.meta.streamID
        configuration.streamName = spool.meta.streamName
        configuration.resumeSecret = spool.meta.resumeSecret ?? []
        configuration.continuation = spool.meta.continuation
        var streamLogger = logger
        streamLogger[metadataKey: "earlier-stream"] = "\(spool.meta.streamID.uuidString.lowercased())"
        streamLogger.notice("delivering audio an earlier run left in the spool", metadata: [
            "stream": "\(spool.meta.streamName)", "messages": "\(log.lastSequence - log.acknowledgedSequence)",
            "bytes": "\(log.unacknowledgedBytes)", "receiver": "\(spool.meta.destination?.description ?? "\(configuration.host):\(configuration.port)")",
            "pid": "\(getpid())",
        ])
        let sender = StreamSender(configuration: configuration, description: spool.meta.streamDescription, log: log, logger: streamLogger)
        let reporter = streamLogger
        let directory = spool.directory
        let damage = spool.damageReport
        let receiver = "\(configuration.host):\(configuration.port)"
        let delivery = Task { [self] in
            switch await sender.run() {
            case .success(let summary):
                log.removeSpool()
                state.withLock { $0.outcomes.append((spool.meta.streamID, spool.meta.streamName, receiver, nil, damage)) }
                reporter.notice("earlier stream delivered; removed from the spool", metadata: ["file": "\(summary.fileName)", "pid": "\(getpid())"])
                if let damage {
                    reporter.error("\(damage.delivered(streamName: spool.meta.streamName, receiver: receiver))", metadata: ["pid": "\(getpid())"])
                }
            case .failure(let failure):
                // Told with the naming the sender was configured with (capture-send: its flags).
                let error = failure.message(naming: configuration.settingNames)
                spool.recordDeliveryError(error)
                log.flushSpool()
                spool.release()
                reporter.error("an earlier stream could not be delivered; it stays in the spool", metadata: [
                    "folder": "\(directory)", "error": "\(error)",
                ])
                if let damage {
                    reporter.error("\(damage.undelivered(streamName: spool.meta.streamName))", metadata: ["pid": "\(getpid())"])
                }
                state.withLock { state in
                    state.failures.append("\(directory): \(error)")
                    state.outcomes.append((spool.meta.streamID, spool.meta.streamName, receiver, error, damage))
                }
            }
        }
        state.withLock { state in
            state.senders.append(sender)
            state.deliveries.append(delivery)
        }
    }

    /// Stops every delivery (their audio stays in the spool).
    public func abandon() { state.withLock { $0.senders }.forEach { $0.abandon() } }

    /// Waits until every started delivery succeeded or failed; returns the failures.
    public func finished() async -> [String] {
        for delivery in state.withLock({ $0.deliveries }) { await delivery.value }
        return state.withLock { $0.failures }
    }

    /// How each finished delivery went.
    public var results: [Result] { state.withLock { $0.outcomes } }
}
