import CaptureCore
import CaptureSender
import CaptureStatus
import Foundation

/// Reads the status line's figures from the running pipeline, packet log and sender: the levels of
/// the most recent audio with peak hold (`PeakHoldMeter`), link state, whether acknowledgements are
/// overdue (`AcknowledgementWatch`), seconds captured and acknowledged, the backlog, the encoded
/// bit rate since the last line, and overruns. Nothing is estimated.
///
/// Sendability (`@unchecked Sendable`): `lock` guards every mutable field; the pipeline, log and sender it reads are thread-safe themselves.
final class StatusFigures: @unchecked Sendable {
    private let pipeline: CapturePipeline
    private let log: PacketLog
    private let sender: StreamSender
    private let inputRate: Double
    private let outputRate: Double
    // `lock` guards everything below.
    private let lock = NSLock()
    private var lastBytes: Int64 = 0
    private var lastEnd: Int64 = 0
    private var lastBitRate = 0.0
    private var meter = PeakHoldMeter()
    private var acknowledgements = AcknowledgementWatch()

    init(pipeline: CapturePipeline, log: PacketLog, sender: StreamSender, inputRate: Double) {
        self.pipeline = pipeline
        self.log = log
        self.sender = sender
        self.inputRate = inputRate
        outputRate = pipeline.outputFormat.sampleRate
    }

    func snapshot() -> SenderStatusSnapshot {
        let capture = pipeline.queue.statistics
        let progress = log.progress
        let link = SenderStatusSnapshot.LinkState(rawValue: sender.linkState.rawValue) ?? .connecting
        let now = Self.seconds(MonotonicClock.nanoseconds())
        let reading = pipeline.takeLevels()
        let (bitRate, display, overdue) = lock.withLock {
            let seconds = Double(progress.appendedEndSampleTime - lastEnd) / outputRate
            if seconds > 0 {
                lastBitRate = Double(progress.appendedBytes - lastBytes) * 8 / seconds
                lastBytes = progress.appendedBytes
                lastEnd = progress.appendedEndSampleTime
            }
            let overdue = acknowledgements.overdue(
                now: now, link: link, lastAcknowledgement: progress.lastAcknowledgementAt.map(Self.seconds),
                oldestUnacknowledged: progress.oldestUnacknowledgedAppendedAt.map(Self.seconds)
            )
            return (lastBitRate, meter.update(reading, at: now), overdue)
        }
        return SenderStatusSnapshot(
            levels: display?.levels, heldPeaksDBFS: display?.heldPeaksDBFS ?? [], link: link,
            secondsWithoutAcknowledgement: overdue, usesTLS: sender.usesTLS,
            secondsCaptured: Double(capture.framesCaptured + capture.framesLost) / inputRate,
            secondsAcknowledged: Double(progress.acknowledgedEndSampleTime) / outputRate,
            backlogBytes: progress.unacknowledgedBytes,
            backlogSeconds: Double(max(0, progress.appendedEndSampleTime - progress.acknowledgedEndSampleTime)) / outputRate,
            bitsPerSecond: bitRate, overruns: Int(capture.overruns)
        )
    }

    private static func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }
}
