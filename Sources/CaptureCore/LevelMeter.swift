#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Measures per-channel peak and RMS levels of captured PCM, for the sender's level display.
public struct LevelMeter: Sendable {
    /// Levels of one channel over the measured span.
    public struct ChannelLevel: Sendable, Equatable {
        /// Peak absolute value, 1 = full scale.
        public var peak: Double
        /// Root mean square value, 1 = full scale.
        public var rms: Double
        /// Whether any sample reached full scale (clipping).
        public var clipped: Bool

        public init(peak: Double, rms: Double, clipped: Bool) {
            self.peak = peak
            self.rms = rms
            self.clipped = clipped
        }

        /// Peak in dBFS (-infinity for silence).
        public var peakDBFS: Double { 20 * log10(peak) }
        /// RMS in dBFS (-infinity for silence).
        public var rmsDBFS: Double { 20 * log10(rms) }
    }

    /// The levels measured since the last `take()`, one per channel, and the frames they cover.
    public struct Reading: Sendable, Equatable {
        public var channels: [ChannelLevel]
        public var frames: Int

        public init(channels: [ChannelLevel], frames: Int) {
            self.channels = channels
            self.frames = frames
        }
    }

    private let sample: PCMSampleFormat?
    private let channelCount: Int
    private var peaks: [Double]
    private var sumsOfSquares: [Double]
    private var clipped: [Bool]
    private var frames = 0

    /// A meter for audio in `format` (linear PCM; other formats measure nothing).
    public init(format: StreamFormat) {
        sample = format.pcmSampleFormat
        channelCount = format.channelCount
        peaks = Array(repeating: 0, count: channelCount)
        sumsOfSquares = Array(repeating: 0, count: channelCount)
        clipped = Array(repeating: false, count: channelCount)
    }

    /// Adds a captured buffer to the measurement.
    ///
    /// Each channel is measured in one pass over its samples: integer formats keep their extremes
    /// and an exact integer sum of squares (in runs short enough that it cannot overflow), so the
    /// loop has no floating-point dependency chain and no branch per sample.
    public mutating func measure(_ buffer: CapturedBuffer) {
        guard let sample, buffer.packetCount > 0, let base = buffer.bytes.baseAddress else { return }
        let frameCount = min(buffer.packetCount, buffer.bytes.count / max(1, sample.bytesPerSample * channelCount))
        let stride = sample.bytesPerSample * channelCount
        for channel in 0..<channelCount {
            let first = base + channel * sample.bytesPerSample
            let level: (peak: Double, sumOfSquares: Double, clipped: Bool)
            switch sample {
            case .s16: level = Self.integerLevel(first, stride: stride, frames: frameCount, bits: 16) { $0.loadUnaligned(as: Int16.self).littleEndian }
            case .s24: level = Self.integerLevel(first, stride: stride, frames: frameCount, bits: 24) { Self.loadInt24($0) }
            case .s32: level = Self.wideIntegerLevel(first, stride: stride, frames: frameCount)
            case .f32: level = Self.floatLevel(first, stride: stride, frames: frameCount)
            }
            if level.peak > peaks[channel] { peaks[channel] = level.peak }
            sumsOfSquares[channel] += level.sumOfSquares
            if level.clipped { clipped[channel] = true }
        }
        frames += frameCount
    }

    /// A 24-bit little-endian signed sample, sign-extended.
    @inline(__always)
    private static func loadInt24(_ pointer: UnsafeRawPointer) -> Int32 {
        let unsigned = UInt32(pointer.load(as: UInt8.self)) | UInt32(pointer.load(fromByteOffset: 1, as: UInt8.self)) << 8
            | UInt32(pointer.load(fromByteOffset: 2, as: UInt8.self)) << 16
        return Int32(bitPattern: unsigned << 8) >> 8
    }

    /// Peak, sum of squares (both scaled to full scale 1.0) and clipping of one channel of 16- or
    /// 24-bit integers. Squares are summed exactly as integers over runs of 2^16 frames: a 24-bit
    /// square is below 2^46, so a run stays below 2^62.
    @inline(__always)
    private static func integerLevel<Sample: FixedWidthInteger>(
        _ first: UnsafeRawPointer, stride: Int, frames: Int, bits: Int, load: (UnsafeRawPointer) -> Sample
    ) -> (peak: Double, sumOfSquares: Double, clipped: Bool) {
        let fullScale = Int64(1) << (bits - 1)
        var highest = Int64.min
        var lowest = Int64.max
        var sumOfSquares = 0.0
        var done = 0
        while done < frames {
            let run = min(frames - done, 1 << 16)
            var runSum: Int64 = 0
            var pointer = first + done * stride
            for _ in 0..<run {
                let value = Int64(load(pointer))
                highest = max(highest, value)
                lowest = min(lowest, value)
                runSum &+= value &* value
                pointer += stride
            }
            sumOfSquares += Double(runSum)
            done += run
        }
        let scale = Double(fullScale)
        let peak = max(Double(highest), -Double(lowest)) / scale
        return (peak, sumOfSquares / (scale * scale), highest == fullScale - 1 || lowest == -fullScale)
    }

    /// Peak, sum of squares and clipping of one channel of 32-bit integers (squares in Double).
    private static func wideIntegerLevel(_ first: UnsafeRawPointer, stride: Int, frames: Int) -> (peak: Double, sumOfSquares: Double, clipped: Bool) {
        var highest = Int32.min
        var lowest = Int32.max
        var sumOfSquares = 0.0
        var pointer = first
        for _ in 0..<frames {
            let value = pointer.loadUnaligned(as: Int32.self).littleEndian
            highest = max(highest, value)
            lowest = min(lowest, value)
            let scaled = Double(value)
            sumOfSquares += scaled * scaled
            pointer += stride
        }
        let scale = 2_147_483_648.0
        let peak = max(Double(highest), -Double(lowest)) / scale
        return (peak, sumOfSquares / (scale * scale), highest == .max || lowest == .min)
    }

    /// Peak, sum of squares and clipping (a sample at or beyond ±1.0) of one channel of floats.
    private static func floatLevel(_ first: UnsafeRawPointer, stride: Int, frames: Int) -> (peak: Double, sumOfSquares: Double, clipped: Bool) {
        var peak: Float = 0
        var sumOfSquares = 0.0
        var pointer = first
        for _ in 0..<frames {
            let value = Float(bitPattern: pointer.loadUnaligned(as: UInt32.self).littleEndian)
            let magnitude = abs(value)
            if magnitude > peak { peak = magnitude }
            let scaled = Double(value)
            sumOfSquares += scaled * scaled
            pointer += stride
        }
        return (Double(peak), sumOfSquares, peak >= 1)
    }

    /// Adds an earlier reading of the same channels to the measurement, as if its buffers had been
    /// measured here (a reading of other channels is ignored).
    public mutating func add(_ reading: Reading) {
        guard reading.channels.count == channelCount, reading.frames > 0 else { return }
        for (channel, level) in reading.channels.enumerated() {
            if level.peak > peaks[channel] { peaks[channel] = level.peak }
            sumsOfSquares[channel] += level.rms * level.rms * Double(reading.frames)
            if level.clipped { clipped[channel] = true }
        }
        frames += reading.frames
    }

    /// Returns the levels since the last call and starts a new measurement.
    public mutating func take() -> Reading {
        let channels = (0..<channelCount).map { channel in
            ChannelLevel(
                peak: peaks[channel],
                rms: frames > 0 ? (sumsOfSquares[channel] / Double(frames)).squareRoot() : 0,
                clipped: clipped[channel]
            )
        }
        let reading = Reading(channels: channels, frames: frames)
        for channel in 0..<channelCount {
            peaks[channel] = 0
            sumsOfSquares[channel] = 0
            clipped[channel] = false
        }
        frames = 0
        return reading
    }
}
