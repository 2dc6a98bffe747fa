/// Turns the frames a capture lost or paused before each buffer into the gaps a recording of it
/// holds, in timeline order, one gap per pause: the rule every consumer of a `CaptureQueue` shares
/// (each encoding of a capture, its local copy), so that all of them put every gap at the same
/// sample time.
///
/// A paused real-time queue reports its pause as it goes (empty buffers, see `CaptureQueue`); the
/// reports and the first buffer after the resume make one pause, closed when audio comes again or
/// the capture ends (`finish`). In a report, frames lost came before the pause (the device overran
/// before capture paused); in a buffer of audio, the pause came before frames lost since (an
/// overrun right after the resume). A pure value: feed it the buffers in order.
public struct CaptureGapTracker: Sendable, Equatable {
    /// A stretch of the capture's timeline that holds no captured audio.
    public enum Gap: Sendable, Equatable {
        /// `frames` lost in an overrun from `start`.
        case lost(start: Int64, frames: Int64)
        /// A pause of `frames` from `start`.
        case paused(start: Int64, frames: Int64)
    }

    /// The pause being recorded, still open.
    private var openPause: (start: Int64, frames: Int64)?

    public init() {}

    public static func == (left: CaptureGapTracker, right: CaptureGapTracker) -> Bool {
        left.openPause?.start == right.openPause?.start && left.openPause?.frames == right.openPause?.frames
    }

    /// The gaps that `buffer` closes, in timeline order (empty while a pause goes on).
    public mutating func take(_ buffer: CapturedBuffer) -> [Gap] {
        let start = buffer.startTime.sampleTime
        let lost = Int64(buffer.framesLostBefore)
        let paused = Int64(buffer.framesPausedBefore)
        var gaps: [Gap] = []
        if buffer.packetCount == 0 {
            if lost > 0 {
                close(into: &gaps)
                gaps.append(.lost(start: start - paused - lost, frames: lost))
            }
            if paused > 0 { extend(from: start - paused, frames: paused, into: &gaps) }
        } else {
            if paused > 0 { extend(from: start - lost - paused, frames: paused, into: &gaps) }
            close(into: &gaps)
            if lost > 0 { gaps.append(.lost(start: start - lost, frames: lost)) }
        }
        return gaps
    }

    /// The pause still open when the capture ended (a stop during a pause), if any.
    public mutating func finish() -> [Gap] {
        var gaps: [Gap] = []
        close(into: &gaps)
        return gaps
    }

    private mutating func extend(from start: Int64, frames: Int64, into gaps: inout [Gap]) {
        if let pause = openPause, pause.start + pause.frames == start {
            openPause = (pause.start, pause.frames + frames)
        } else {
            close(into: &gaps)
            openPause = (start, frames)
        }
    }

    private mutating func close(into gaps: inout [Gap]) {
        guard let pause = openPause else { return }
        openPause = nil
        gaps.append(.paused(start: pause.start, frames: pause.frames))
    }
}
