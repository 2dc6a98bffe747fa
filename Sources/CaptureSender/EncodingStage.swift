import CaptureCodecs
import CaptureCore
import CaptureWire
import Foundation
import Synchronization

/// One encoding of a capture: an encoder and the packet log it fills, fed every captured buffer by
/// `CapturePipeline` on the queue's delivery thread. A capture has one stage per distinct encoding
/// (PCM for the archive, Opus for a thin link...), all on the same sample timeline.
///
/// Overruns: for PCM, frames lost before a buffer become a Gap of exactly those frames at their
/// position, and a loss at the very end a trailing Gap. For Opus the encoder fills the lost stretch
/// with encoded silence (`AudioEncoder.fillsLostFrames`): the packets alone cover the capture
/// timeline, and a filled gap (`PacketLog.appendFilledGap`), logged once the packets reach the
/// stretch, labels it at the same sample time. A loss at the very end leaves nothing to cover (the
/// stream ends after its last captured frame) and nothing to label.
///
/// Pauses: a pause of a real-time source (`CaptureStreamer.pause()`) is recorded as what it is, a
/// gap with reason `paused` covering the time it lasted, so the file keeps wall-clock positions and
/// every encoding of a capture the same timeline: a Gap for PCM (a hole that costs nothing), for
/// Opus encoded silence labelled by a filled gap. The queue reports a pause as it goes (empty
/// buffers, see `CaptureQueue`), so Opus encodes the pause's silence as it lasts; one Gap or filled
/// gap covers the whole pause, logged when capture resumes or ends.
///
/// Sendability (`@unchecked Sendable`): the failure, the two timeline ends and the frames reported
/// lost are in a `Mutex`; everything else (the encoder, the pending pause and filled gaps, the
/// levels and loudness waiting for the next packets) is used on the queue's delivery thread only,
/// and in `finish` once the queue has ended, an ownership the compiler cannot see.
public final class EncodingStage: @unchecked Sendable {
    /// Where the packets go.
    public let log: PacketLog
    /// The encoder's output format, as the handshake describes it.
    public let outputFormat: StreamFormat
    /// The encoder's magic cookie.
    public let magicCookie: [UInt8]
    /// The encoder's priming frames.
    public let primingFrames: Int
    /// The encoder fills frames lost to capture overruns with encoded silence (Opus), instead of
    /// the stage logging Gaps for them (PCM).
    public var fillsLostFrames: Bool { encoder.fillsLostFrames }

    /// What both the delivery thread and the readers of `hasFailed` and `finish` see.
    private struct State {
        var failure: EncoderError?
        /// Sample index just past the last captured buffer (input timeline).
        var lastEnd: Int64 = 0
        /// Sample index just past the last encoded packet (output timeline).
        var lastOutputEnd: Int64 = 0
        /// Frames lost in overruns that a delivered buffer reported (`framesLostBefore`).
        var reportedLost: Int64 = 0
    }

    private let encoder: any AudioEncoder
    private let state = Mutex(State())
    /// Where the capture's overruns and pauses fall (input timeline), one gap per pause.
    private var gaps = CaptureGapTracker()
    /// Filled gaps (output timeline) waiting for the packets logged to reach their start, in order.
    private var pendingFilledGaps: [(sampleTime: Int64, length: Int64, reason: String)] = []
    /// The levels of the audio captured since this stage last logged packets, sent with its next ones.
    private var packetLevels: LevelMeter
    /// The loudness since this stage last logged packets: momentary and short-term as of the last
    /// frame measured, each channel's true peak the highest since.
    private var pendingLoudness: Loudness?

    /// A stage for `encoder` that logs into `log`; `inputFormat` is the capture's format.
    public init(encoder: any AudioEncoder, log: PacketLog, inputFormat: StreamFormat) {
        self.encoder = encoder
        self.log = log
        outputFormat = encoder.outputFormat
        magicCookie = encoder.magicCookie
        primingFrames = encoder.primingFrames
        packetLevels = LevelMeter(format: inputFormat)
    }

    /// Whether the encoder failed (capture stops: the pipeline is told by the return of `handle`).
    var hasFailed: Bool { state.withLock { $0.failure != nil } }

    /// Takes one captured buffer, with its levels and the loudness read after it (measured once
    /// for every stage). Returns false when the encoder failed on it.
    func handle(_ buffer: CapturedBuffer, levels: LevelMeter.Reading?, loudness: Loudness?) -> Bool {
        gaps.take(buffer).forEach(record)
        guard buffer.packetCount > 0 else {
            // A paused queue's report: an encoder that fills the pause covers it with silence now,
            // as it lasts.
            let encoded = encoder.fillsLostFrames ? encode(buffer) : true
            state.withLock { $0.lastEnd = max($0.lastEnd, buffer.startTime.sampleTime) }
            return encoded
        }
        // The levels and loudness of this buffer go with the packets this stage logs next. An
        // encoder that accumulates whole frames (Opus) may log nothing for this buffer.
        if let levels { packetLevels.add(levels) }
        if let loudness { pendingLoudness = Self.merge(pendingLoudness, loudness) }
        return encode(buffer)
    }

    /// Ends the stream after the queue has ended: the pause the stop ended, the encoder's tail,
    /// the trailing loss, and the end in the log. `completion` is how capture ended; a capture
    /// failure is worded in the end's reason as `settingNames` names settings.
    func finish(
        _ completion: CaptureQueue.Completion, statistics: CaptureStatistics, reasonIfStopped: String, settingNames: any SettingNaming
    ) -> Result<Void, SenderError> {
        if let failure = state.withLock({ $0.failure }) {
            log.finish(endSampleTime: state.withLock { $0.lastEnd }, remainderFrames: 0, reason: "encoder-failed")
            return .failure(.encoderFailed(failure.description))
        }
        // A pause that the stop ended is recorded up to the stop (the queue reported it).
        gaps.finish().forEach(record)
        var remainder = 0
        do {
            let tail = try encoder.finish()
            if let packets = tail.packets {
                state.withLock { $0.lastOutputEnd = packets.firstSampleTime + Int64(packets.frameCount) }
                log.append(packets, levels: takePacketLevels())
            }
            // The tail covers every stretch the encoder filled; what the packets never reach (a
            // loss at the very end) was not filled and is not labelled.
            logFilledGaps()
            pendingFilledGaps.removeAll()
            remainder = tail.remainderFrames
        } catch {
            log.finish(endSampleTime: state.withLock { $0.lastEnd }, remainderFrames: 0, reason: "encoder-failed")
            return .failure(.encoderFailed(error.description))
        }
        // Frames lost in an overrun at the very end (no buffer followed them) become a trailing
        // gap. Buffers an immediate stop dropped were captured, not lost in an overrun: they are
        // not a gap (the stream ends after the last buffer delivered).
        let (capturedEnd, trailingLost) = state.withLock { ($0.lastEnd, max(0, statistics.framesLost - $0.reportedLost)) }
        let timelineEnd = capturedEnd + trailingLost
        if !encoder.fillsLostFrames, trailingLost > 0 {
            log.appendGap(sampleTime: capturedEnd, length: trailingLost, reason: "overrun")
        }
        let reason: String
        switch completion {
        case .endOfStream: reason = "end-of-source"
        case .stopped: reason = reasonIfStopped
        case .failed(let error): reason = "capture-failed: \(error.message(naming: settingNames))"
        }
        let endSampleTime = outputFormat.isLinearPCM ? max(timelineEnd, capturedEnd) : state.withLock { $0.lastOutputEnd }
        log.finish(endSampleTime: endSampleTime, remainderFrames: remainder, reason: reason)
        return .success(())
    }


    // MARK: - Inside

    /// Encodes `buffer` and logs the packets it completes, then the filled gaps they now reach.
    private func encode(_ buffer: CapturedBuffer) -> Bool {
        guard state.withLock({ $0.failure == nil }) else { return false }
        do {
            if let packets = try encoder.encode(buffer) {
                state.withLock { $0.lastOutputEnd = packets.firstSampleTime + Int64(packets.frameCount) }
                log.append(packets, levels: takePacketLevels())
            }
            state.withLock { $0.lastEnd = buffer.startTime.sampleTime + Int64(buffer.packetCount) }
        } catch {
            state.withLock { $0.failure = error }
            return false
        }
        logFilledGaps()
        return true
    }

    /// The levels and loudness since this stage last logged packets, for the packets logged now.
    private func takePacketLevels() -> AudioLevels? {
        let reading = packetLevels.take()
        let loudness = pendingLoudness
        pendingLoudness = nil
        return AudioLevels(reading, loudness: loudness)
    }

    /// `newer` after `older`: its momentary and short-term readings, each channel's higher true peak.
    private static func merge(_ older: Loudness?, _ newer: Loudness) -> Loudness {
        guard let older, older.truePeakDBTP.count == newer.truePeakDBTP.count else { return newer }
        var merged = newer
        merged.truePeakDBTP = zip(older.truePeakDBTP, newer.truePeakDBTP).map { max($0, $1) }
        return merged
    }

    /// A gap of the capture (input timeline): a Gap for PCM, a filled gap for an encoder that
    /// covers it with silence (`overrun` or `paused`).
    private func record(_ gap: CaptureGapTracker.Gap) {
        let (start, frames, reason): (Int64, Int64, String)
        switch gap {
        case .lost(let at, let length):
            state.withLock { $0.reportedLost += length }
            (start, frames, reason) = (at, length, "overrun")
        case .paused(let at, let length):
            (start, frames, reason) = (at, length, "paused")
        }
        if encoder.fillsLostFrames {
            queueFilledGap(from: start, frames: frames, reason: reason)
        } else {
            log.appendGap(sampleTime: start, length: frames, reason: reason)
        }
    }

    /// A stretch of `frames` from `start` (input timeline) that the encoder covers with silence,
    /// labelled by a filled gap on the output timeline once the packets reach it.
    private func queueFilledGap(from start: Int64, frames: Int64, reason: String) {
        let first = encoder.outputSampleTime(ofInput: start)
        let length = encoder.outputSampleTime(ofInput: start + frames) - first
        guard length > 0 else { return }
        pendingFilledGaps.append((first, length, reason))
        logFilledGaps()
    }

    /// Logs the waiting filled gaps whose start the packets logged have reached, in order.
    private func logFilledGaps() {
        let reached = state.withLock { $0.lastOutputEnd }
        while let next = pendingFilledGaps.first, next.sampleTime <= reached {
            pendingFilledGaps.removeFirst()
            log.appendFilledGap(sampleTime: next.sampleTime, length: next.length, reason: next.reason)
        }
    }
}
