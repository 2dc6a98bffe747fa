/// Writes samples given as numbers in -1...1 into interleaved little-endian PCM memory in one of
/// the sample formats capture-send carries. Integer formats round to nearest and clip at full scale.
public struct PCMSampleWriter: Sendable {
    /// The sample encoding written.
    public let sample: PCMSampleFormat

    public init(sample: PCMSampleFormat) { self.sample = sample }

    /// The largest positive integer value of the format (for example 32767 for s16).
    public var fullScale: Double {
        switch sample {
        case .s16: return 32_767
        case .s24: return 8_388_607
        case .s32: return 2_147_483_647
        case .f32: return 1
        }
    }

    /// Writes `value` (nominally -1...1) at byte offset `offset` of `buffer`.
    @inline(__always)
    public func write(_ value: Double, to buffer: UnsafeMutableRawBufferPointer, at offset: Int) {
        switch sample {
        case .f32:
            buffer.storeBytes(of: Float(value).bitPattern.littleEndian, toByteOffset: offset, as: UInt32.self)
        case .s16:
            let integer = Int16(clamping: Self.quantize(value, fullScale: 32_767))
            buffer.storeBytes(of: UInt16(bitPattern: integer).littleEndian, toByteOffset: offset, as: UInt16.self)
        case .s24:
            let integer = Self.quantize(value, fullScale: 8_388_607)
            let clamped = UInt32(bitPattern: Int32(max(-8_388_608, min(8_388_607, integer))))
            buffer[offset] = UInt8(truncatingIfNeeded: clamped)
            buffer[offset + 1] = UInt8(truncatingIfNeeded: clamped >> 8)
            buffer[offset + 2] = UInt8(truncatingIfNeeded: clamped >> 16)
        case .s32:
            let integer = Int32(clamping: Self.quantize(value, fullScale: 2_147_483_647))
            buffer.storeBytes(of: UInt32(bitPattern: integer).littleEndian, toByteOffset: offset, as: UInt32.self)
        }
    }

    @inline(__always)
    private static func quantize(_ value: Double, fullScale: Double) -> Int64 {
        let scaled = (value * fullScale).rounded()
        guard scaled.isFinite else { return 0 }
        return Int64(max(-fullScale - 1, min(fullScale, scaled)))
    }
}
