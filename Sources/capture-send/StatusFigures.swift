import CaptureCore
import CaptureSender
import CaptureStatus
import Foundation
import Synchronization

/// Reads the status line's figures from the running streamer: the levels of the most recent audio
/// with peak hold (`PeakHoldMeter`) and its short-term loudness, the main link and whether its acknowledgements are overdue
/// (`AcknowledgementWatch`), each backup's link and how far behind it is, seconds captured and
/// acknowledged, the spool's backlog, the encoded bit rate since the last line, and overruns.
/// Nothing is estimated.
///
/// Sendability: every mutable field is in a `Mutex`; the streamer it reads is thread-safe itself.
final class StatusFigures: Sendable {
    private struct State {
        var lastBytes: Int64 = 0
        var lastEnd: Int64 = 0
        var lastBitRate = 0.0
        var meter = PeakHoldMeter()
        var acknowledgements = AcknowledgementWatch()
    }

    private let streamer: CaptureStreamer
    private let state = Mutex(State())

    init(streamer: CaptureStreamer) {
        self.streamer = streamer
    }

    func snapshot() -> SenderStatusSnapshot {
        let status = streamer.status
        let outputRate = status.outputSampleRate
        let main = status.links[0]
        let link = Self.state(main.state)
        let now = Self.seconds(MonotonicClock.nanoseconds())
        let reading = streamer.takeLevels()
        let appended = status.log
        let (bitRate, display, overdue) = state.withLock { state in
            let seconds = Double(appended.appendedEndSampleTime - state.lastEnd) / outputRate
            if seconds > 0 {
                state.lastBitRate = Double(appended.appendedBytes - state.lastBytes) * 8 / seconds
                state.lastBytes = appended.appendedBytes
                state.lastEnd = appended.appendedEndSampleTime
            }
            let overdue = state.acknowledgements.overdue(
                now: now, link: link, lastAcknowledgement: main.progress.lastAcknowledgementAt.map(Self.seconds),
                oldestUnacknowledged: main.progress.oldestUnacknowledgedAppendedAt.map(Self.seconds)
            )
            return (state.lastBitRate, state.meter.update(reading, at: now), overdue)
        }
        let backups = status.links.dropFirst().map { backup in
            SenderStatusSnapshot.BackupLink(
                receiver: backup.receiver, link: Self.state(backup.state),
                secondsBehind: backup.state == .gaveUp
                    ? 0 : Double(max(0, (backup.streamProgress ?? appended).appendedEndSampleTime - backup.progress.acknowledgedEndSampleTime))
                        / (backup.sampleRate > 0 ? backup.sampleRate : outputRate))
        }
        return SenderStatusSnapshot(
            levels: display?.levels, shortTermLUFS: streamer.loudness?.shortTermLUFS, heldPeaksDBFS: display?.heldPeaksDBFS ?? [], link: link,
            secondsWithoutAcknowledgement: overdue, usesTLS: main.usesTLS,
            secondsCaptured: status.secondsCaptured,
            secondsAcknowledged: Double(main.progress.acknowledgedEndSampleTime) / outputRate,
            backlogBytes: appended.unacknowledgedBytes,
            backlogSeconds: Double(max(0, appended.appendedEndSampleTime - appended.acknowledgedEndSampleTime)) / outputRate,
            bitsPerSecond: bitRate, overruns: Int(status.overruns), backups: Array(backups),
            encodings: status.encodings.map { encoding in
                let rate = encoding.sampleRate > 0 ? encoding.sampleRate : outputRate
                return SenderStatusSnapshot.EncodingProgress(
                    label: encoding.label, secondsAcknowledged: Double(encoding.progress.acknowledgedEndSampleTime) / rate,
                    backlogSeconds: Double(max(0, encoding.progress.appendedEndSampleTime - encoding.progress.acknowledgedEndSampleTime)) / rate)
            },
            localCopy: status.localCopy.map { copy in
                copy.stoppedBecause == nil ? .writing(seconds: copy.secondsWritten) : .stopped(seconds: copy.secondsWritten)
            }
        )
    }

    private static func state(_ state: SenderLinkState) -> SenderStatusSnapshot.LinkState {
        SenderStatusSnapshot.LinkState(rawValue: state.rawValue) ?? .connecting
    }

    private static func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }
}
