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

        /// Peak in dBFS (-infinity for silence).
        public var peakDBFS: Double { 20 * log10(peak) }
        /// RMS in dBFS (-infinity for silence).
        public var rmsDBFS: Double { 20 * log10(rms) }
    }

    /// The levels measured since the last `take()`, one per channel, and the frames they cover.
    public struct Reading: Sendable, Equatable {
        public var channels: [ChannelLevel]
        public var frames: Int
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
    public mutating func measure(_ buffer: CapturedBuffer) {
        guard let sample else { return }
        let bytes = buffer.bytes
        let width = sample.bytesPerSample
        var offset = 0
        for _ in 0..<buffer.packetCount {
            for channel in 0..<channelCount {
                let value: Double
                let atFullScale: Bool
                switch sample {
                case .s16:
                    let raw = Int16(bitPattern: UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8)
                    value = Double(raw) / 32_768
                    atFullScale = raw == .max || raw == .min
                case .s24:
                    let unsigned = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
                    let raw = Int32(bitPattern: unsigned << 8) >> 8
                    value = Double(raw) / 8_388_608
                    atFullScale = raw == 8_388_607 || raw == -8_388_608
                case .s32:
                    let raw = Int32(bitPattern: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
                    value = Double(raw) / 2_147_483_648
                    atFullScale = raw == .max || raw == .min
                case .f32:
                    let raw = Float(bitPattern: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
                    value = Double(raw)
                    atFullScale = abs(raw) >= 1
                }
                let magnitude = abs(value)
                if magnitude > peaks[channel] { peaks[channel] = magnitude }
                sumsOfSquares[channel] += value * value
                if atFullScale { clipped[channel] = true }
                offset += width
            }
        }
        frames += buffer.packetCount
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
