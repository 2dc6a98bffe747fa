import CEbur128
import CaptureCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Measures the EBU R128 loudness of captured linear PCM as it streams, through libebur128
/// (ITU-R BS.1770-4 K-weighting, 4× oversampled true peak): the sender measures each buffer before
/// encoding, so PCM and Opus streams carry the same figures, and the receiver shows them without
/// computing anything per sample.
///
/// `take()` reads the momentary and short-term loudness as of the last frame measured and each
/// channel's true peak over the frames measured since the last `take()`. Channels weigh as
/// libebur128's defaults have them: the first three as left, right and centre, a fourth (LFE) not
/// at all, a fifth and sixth as surrounds; a mono stream is one channel, as `ffmpeg -af ebur128`
/// measures it.
///
/// Not thread-safe: its owner (the capture pipeline) calls it under its own lock.
public final class LoudnessMeter {
    private let state: UnsafeMutablePointer<ebur128_state>
    private let sample: PCMSampleFormat
    private let reader: PCMSampleReader
    private let channelCount: Int
    /// Each channel's true peak (linear, 1 = full scale) since the last `take()`.
    private var truePeaks: [Double]
    /// Frames measured since the last `take()`.
    private var framesSinceTake = 0
    /// The samples of the buffer being measured, as floats at full scale ±1.
    private var scratch: [Float] = []

    /// A meter for audio in `format`; nil when `format` is not linear PCM or libebur128 cannot
    /// measure it (no channels, or a sample rate it does not take).
    public init?(format: StreamFormat) {
        guard let sample = format.pcmSampleFormat, format.channelCount > 0, format.sampleRate >= 1 else { return nil }
        let mode = Int32(EBUR128_MODE_S.rawValue | EBUR128_MODE_TRUE_PEAK.rawValue)
        guard let state = ebur128_init(UInt32(format.channelCount), UInt(format.sampleRate), mode) else { return nil }
        self.state = state
        self.sample = sample
        reader = PCMSampleReader(sample: sample)
        channelCount = format.channelCount
        truePeaks = Array(repeating: 0, count: format.channelCount)
    }

    deinit {
        var state: UnsafeMutablePointer<ebur128_state>? = state
        ebur128_destroy(&state)
    }

    /// Adds a captured buffer to the measurement.
    public func measure(_ buffer: CapturedBuffer) {
        let bytesPerFrame = sample.bytesPerSample * channelCount
        let frames = min(buffer.packetCount, buffer.bytes.count / bytesPerFrame)
        guard frames > 0, let base = buffer.bytes.baseAddress else { return }
        let samples = frames * channelCount
        if scratch.count < samples { scratch = Array(repeating: 0, count: samples) }
        let bytes = UnsafeRawBufferPointer(start: base, count: samples * sample.bytesPerSample)
        scratch.withUnsafeMutableBufferPointer { floats in
            for index in 0..<samples { floats[index] = reader.float(bytes, sampleIndex: index) }
            guard let pointer = floats.baseAddress else { return }
            guard ebur128_add_frames_float(state, pointer, frames) == EBUR128_SUCCESS.rawValue else { return }
            for channel in 0..<channelCount {
                var peak = 0.0
                if ebur128_prev_true_peak(state, UInt32(channel), &peak) == EBUR128_SUCCESS.rawValue, peak > truePeaks[channel] {
                    truePeaks[channel] = peak
                }
            }
        }
        framesSinceTake += frames
    }

    /// The loudness as of the last frame measured, with each channel's true peak since the last
    /// call, and starts the next true-peak span; nil when nothing was measured since the last call.
    public func take() -> Loudness? {
        guard framesSinceTake > 0 else { return nil }
        let reading = Loudness(
            momentaryLUFS: loudness(ebur128_loudness_momentary), shortTermLUFS: loudness(ebur128_loudness_shortterm),
            truePeakDBTP: truePeaks.map { $0 > 0 ? 20 * log10($0) : -.infinity }
        )
        for channel in truePeaks.indices { truePeaks[channel] = 0 }
        framesSinceTake = 0
        return reading
    }

    /// One of libebur128's loudness readings, in LUFS. It reports silence as −HUGE_VAL; a failed
    /// reading, or anything else not finite, counts as silence too.
    private func loudness(_ read: (UnsafeMutablePointer<ebur128_state>, UnsafeMutablePointer<Double>) -> Int32) -> Double {
        var value = -Double.infinity
        guard read(state, &value) == EBUR128_SUCCESS.rawValue, value.isFinite else { return -.infinity }
        return value
    }
}
