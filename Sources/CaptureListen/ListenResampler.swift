import CSoxr

/// Resamples interleaved float audio to 48 kHz through libsoxr, for PCM streams at rates Opus does
/// not take (11.025, 22.05, 32, 44.1, 88.2, 96, 176.4 or 192 kHz). Streaming: it keeps its filter
/// state between calls, so consecutive buffers join without a seam. Used from the hub's executor only.
final class ListenResampler {
    private let resampler: soxr_t
    private let channels: Int
    private let ratio: Double

    /// Creates a resampler from `inputRate` to 48 kHz for `channels` interleaved channels.
    init(inputRate: Double, channels: Int) throws(ListenError) {
        var error: soxr_error_t?
        var quality = soxr_quality_spec(UInt(SOXR_MQ), 0)
        guard let resampler = soxr_create(inputRate, 48_000, UInt32(channels), &error, nil, &quality, nil), error == nil else {
            throw .unsupportedStream("the resampler cannot convert \(Int(inputRate)) Hz to 48000 Hz for listening")
        }
        self.resampler = resampler
        self.channels = channels
        self.ratio = 48_000 / inputRate
    }

    deinit { soxr_delete(resampler) }

    /// Resamples `input` (whole frames) and returns the 48 kHz frames ready so far.
    func process(_ input: [Float]) -> [Float] {
        let inputFrames = input.count / channels
        guard inputFrames > 0 else { return [] }
        var output = [Float](repeating: 0, count: (Int(Double(inputFrames) * ratio) + 256) * channels)
        var consumed = 0
        var produced = 0
        input.withUnsafeBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                guard let inBase = inBuffer.baseAddress, let outBase = outBuffer.baseAddress else { return }
                while consumed < inputFrames {
                    let outputRoom = outBuffer.count / channels - produced
                    guard outputRoom > 0 else { return }
                    var inputDone = 0
                    var outputDone = 0
                    let error = soxr_process(
                        resampler, inBase + consumed * channels, inputFrames - consumed, &inputDone,
                        outBase + produced * channels, outputRoom, &outputDone
                    )
                    guard error == nil, inputDone + outputDone > 0 else { return }
                    consumed += inputDone
                    produced += outputDone
                }
            }
        }
        output.removeLast(output.count - produced * channels)
        return output
    }
}
