/// How many frames an overrun (or a suspend) cost, estimated from what the device reports.
///
/// When a capture ring buffer fills, the device stops and every frame in the buffer is discarded by
/// the recovery (`snd_pcm_prepare`). While stopped, the audio that would have been captured is lost
/// too. So the estimate is the frames waiting in the buffer when it stopped (`snd_pcm_status`'s
/// avail, at least one whole buffer since the stop happens when the buffer is full) plus the time
/// from the stop (the status trigger timestamp) to the restart, multiplied by the sample rate.
/// When the timestamps are missing or implausible (a plugin that does not keep them) the estimate
/// falls back to one buffer's worth.
public enum ALSAOverrunEstimate {
    /// The longest stall the timestamps are believed for; beyond this they are taken as bogus.
    public static let plausibleStallSeconds: Double = 3_600

    /// The estimated number of frames lost.
    ///
    /// - Parameters:
    ///   - framesInBuffer: frames the device held unread when it stopped (status avail), or `nil` if unknown.
    ///   - bufferFrames: the ring buffer size in frames.
    ///   - stalledSeconds: seconds from the stop to the restart, or `nil` if the timestamps are unusable.
    ///   - sampleRate: frames per second.
    public static func lostFrames(framesInBuffer: Int?, bufferFrames: Int, stalledSeconds: Double?, sampleRate: Double) -> Int {
        let discarded = max(framesInBuffer ?? bufferFrames, bufferFrames)
        guard let stalledSeconds, stalledSeconds.isFinite, stalledSeconds > 0,
              stalledSeconds < plausibleStallSeconds, sampleRate > 0 else {
            return discarded
        }
        return discarded + Int((stalledSeconds * sampleRate).rounded())
    }
}
