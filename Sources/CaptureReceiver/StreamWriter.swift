import CAF
import CaptureMetrics
import CaptureCore
import Dispatch
import Foundation

/// When the receiver makes written audio durable (fdatasync) and so can acknowledge it.
public struct SyncPolicy: Sendable, Equatable {
    /// Longest time written audio waits for a sync.
    public var interval: Duration
    /// Unsynced bytes that trigger a sync at once.
    public var bytes: Int

    public init(interval: Duration = .milliseconds(200), bytes: Int = 2 << 20) {
        self.interval = interval
        self.bytes = bytes
    }
}

/// What is durably on disk for a stream: the acknowledgement the sender gets.
public struct DurablePosition: Sendable, Equatable {
    /// The highest sequence durably written.
    public var sequence: UInt64
    /// The sample index just past the durable audio.
    public var sampleTime: Int64
}

/// The summary of a finished stream file.
public struct FinishedFile: Sendable, Equatable {
    public var path: String
    public var frames: Int64
    public var packets: Int64
    public var bytes: Int64
    public var gaps: Int
}

/// Why the receiver could not store a stream.
public enum StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file could not be created or reopened (disk full, permissions...): try again later.
    case cannotCreate(String)
    /// Writing or syncing failed: nothing after the last Ack is durable; try again later.
    case writeFailed(String)
    /// A resumed stream announced another format than its file has: it cannot continue that file.
    case formatChanged(String)

    public var description: String {
        switch self {
        case .cannotCreate(let message), .writeFailed(let message), .formatChanged(let message): return message
        }
    }
}

/// Writes one stream's CAF file on a serial queue of its own, so the network's event loop never
/// waits on the disk. Audio is appended as it arrives and made durable by fdatasync at most every
/// `SyncPolicy.interval` or every `SyncPolicy.bytes`; only then is `onDurable` told, and only then does
/// the receiver acknowledge. Linear PCM gaps are filled with silence (so the timeline stays true) and
/// marked with a CAF marker; a gap in a VBR stream is marked only.
public final class StreamWriter: @unchecked Sendable {
    /// The file's path.
    public let path: String
    /// The stream's format.
    public let format: StreamFormat

    private let queue: DispatchQueue
    private let policy: SyncPolicy
    private let onDurable: @Sendable (DurablePosition) -> Void
    private let onFailure: @Sendable (StorageError) -> Void
    // State below is touched on `queue` only.
    private var writer: CAFWriter?
    private var positionLog: StreamPositionLog?
    /// Where disk write latency (append, and sync with the position record) is recorded.
    private let metrics: ReceiverMetrics?
    private var written = DurablePosition(sequence: 0, sampleTime: 0)
    private var durable = DurablePosition(sequence: 0, sampleTime: 0)
    private var unsyncedBytes = 0
    private var syncScheduled = false
    private var gapCount = 0
    private var failure: StorageError?
    // Pending bytes, read from the event loop for backpressure.
    private let pendingLock = NSLock()
    private var pending = 0

    /// A writer over an open CAF file and its position log, continuing at `start` (what is durable).
    /// `StreamFiles` creates both for a new stream, or reopens them to resume one.
    init(
        writer: CAFWriter, positionLog: StreamPositionLog, start: DurablePosition, policy: SyncPolicy,
        onDurable: @escaping @Sendable (DurablePosition) -> Void,
        onFailure: @escaping @Sendable (StorageError) -> Void,
        metrics: ReceiverMetrics? = nil
    ) {
        self.onFailure = onFailure
        self.metrics = metrics
        self.path = writer.path
        self.format = writer.format
        self.policy = policy
        self.onDurable = onDurable
        queue = DispatchQueue(label: "stream-writer \((writer.path as NSString).lastPathComponent)")
        self.writer = writer
        self.positionLog = positionLog
        written = start
        durable = start
    }

    /// Bytes handed to the writer and not yet written.
    public var pendingBytes: Int { pendingLock.withLock { pending } }

    /// Appends audio packets for `sequence`, whose frames end at `endSampleTime`.
    public func write(sequence: UInt64, payload: Data, packetSizes: [UInt32], frameCount: Int, endSampleTime: Int64) {
        pendingLock.withLock { pending += payload.count }
        queue.async { [self] in
            defer { pendingLock.withLock { pending -= payload.count } }
            guard failure == nil, let writer else { return }
            let started = ContinuousClock.now
            let appended: Result<Void, CAFError> = payload.withUnsafeBytes { bytes in
                Result { () throws(CAFError) in try writer.append(bytes, packetSizes: packetSizes, frameCount: frameCount) }
            }
            metrics?.diskWrite(duration: ContinuousClock.now - started)
            if case .failure(let error) = appended {
                fail(error)
                return
            }
            written = DurablePosition(sequence: sequence, sampleTime: endSampleTime)
            unsyncedBytes += payload.count
            syncIfDue()
        }
    }

    /// Records a gap of `length` frames at `sampleTime` for `sequence`.
    public func recordGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String) {
        queue.async { [self] in
            guard failure == nil, let writer else { return }
            do throws(CAFError) {
                try writer.addMarker(framePosition: sampleTime, name: "gap: \(length) frames not captured (\(reason))")
                if format.isLinearPCM, length > 0 {
                    let frameBytes = Int(format.bytesPerFrame)
                    let chunkFrames = max(1, (256 << 10) / frameBytes)
                    let silence = [UInt8](repeating: 0, count: chunkFrames * frameBytes)
                    var remaining = length
                    while remaining > 0 {
                        let frames = Int(min(Int64(chunkFrames), remaining))
                        try writer.append(Array(silence[0..<(frames * frameBytes)]), frameCount: frames)
                        remaining -= Int64(frames)
                        unsyncedBytes += frames * frameBytes
                    }
                }
            } catch {
                fail(error)
                return
            }
            gapCount += 1
            written = DurablePosition(sequence: sequence, sampleTime: sampleTime + length)
            syncIfDue()
        }
    }

    /// Makes everything written durable now and reports it.
    public func synchronize() {
        queue.async { [self] in synchronizeNow() }
    }

    /// Finalizes the file (sizes, packet table, markers) and calls `completion` with the result.
    public func finish(remainderFrames: Int, completion: @escaping @Sendable (Result<FinishedFile, StorageError>) -> Void) {
        queue.async { [self] in
            if let failure { return completion(.failure(failure)) }
            guard let writer else { return completion(.failure(.writeFailed("\(path) was already closed"))) }
            do throws(CAFError) {
                try writer.finalize(remainderFrames: format.isVariableBitRate ? remainderFrames : 0)
            } catch {
                fail(error)
                return completion(.failure(.writeFailed(error.description)))
            }
            self.writer = nil
            positionLog?.close()
            positionLog = nil
            try? StreamPositionLog.remove(cafPath: path)
            durable = written
            onDurable(durable)
            completion(.success(FinishedFile(path: path, frames: writer.frameCount, packets: writer.packetCount, bytes: writer.dataByteCount, gaps: gapCount)))
        }
    }

    /// Makes what was written durable (when the disk allows), then closes the file, leaving it
    /// resumable: the stream's connection is gone but its sender may come back. With `finalizing`
    /// (a receiver shutting down) the file is also finalized, so every reader opens it complete; its
    /// position log stays, and a resume reopens it where it ended.
    public func detach(finalizing: Bool = false, completion: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            synchronizeNow()
            if finalizing, failure == nil, let writer {
                do throws(CAFError) {
                    try writer.finalize(remainderFrames: 0)
                } catch {
                    // Left unfinalized: still resumable, and `capture-recv recover` finishes it.
                    writer.close()
                }
            }
            writer?.close()
            writer = nil
            positionLog?.close()
            positionLog = nil
            completion()
        }
    }

    /// Blocks until everything queued so far has been handled (for shutdown and tests).
    public func drain() {
        queue.sync {}
    }

    /// The position written so far (not necessarily durable); read on the writer's queue.
    public var writtenPosition: DurablePosition { queue.sync { written } }

    /// The first storage failure, if any.
    public var storageFailure: StorageError? { queue.sync { failure } }

    private func syncIfDue() {
        if unsyncedBytes >= policy.bytes {
            synchronizeNow()
        } else if !syncScheduled {
            syncScheduled = true
            let components = policy.interval.components
            let nanoseconds = Int(components.seconds) * 1_000_000_000 + Int(components.attoseconds / 1_000_000_000)
            queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
                syncScheduled = false
                synchronizeNow()
            }
        }
    }

    private func synchronizeNow() {
        guard failure == nil, let writer, let positionLog, written != durable else { return }
        let started = ContinuousClock.now
        defer { metrics?.diskWrite(duration: ContinuousClock.now - started) }
        do throws(CAFError) {
            try writer.synchronize()
        } catch {
            fail(error)
            return
        }
        // The position record is durable before the Ack goes out: a restarted receiver resumes here.
        do throws(DurableFileError) {
            try positionLog.append(StreamPositionRecord(sequence: written.sequence, sampleTime: written.sampleTime, packets: writer.packetCount))
        } catch {
            fail(.io(operation: "recording the stream position in", path: error.path, errno: error.code))
            return
        }
        unsyncedBytes = 0
        durable = written
        onDurable(durable)
    }

    private func fail(_ error: CAFError) {
        guard failure == nil else { return }
        let storageError = StorageError.writeFailed(error.description)
        failure = storageError
        onFailure(storageError)
    }
}
