import CaptureCore

/// Reads and writes single interleaved little-endian PCM samples, and converts between sample
/// encodings.
///
/// Conversions, with the full scale of a `b`-bit integer taken as 2^(b-1):
/// - integer widening (s16 → s24 → s32) shifts left: exact, and narrowing back returns the original;
/// - integer narrowing (s32 → s24 → s16) rounds to the nearest value, halves upward
///   (`(x + half) >> shift`), and clips at the largest positive value (so 0x7FFF_FFFF → 0x7FFF);
/// - integer → f32 divides by 2^(b-1): exact for s16 and s24, rounded to nearest (24-bit mantissa)
///   for s32; the result lies in [-1, 1);
/// - f32 → integer multiplies by 2^(b-1), rounds to nearest with ties to even, and clips to
///   [-2^(b-1), 2^(b-1) - 1] (so +1.0 becomes the largest positive value); NaN becomes 0.
///   An integer → f32 → same-integer round trip is exact for s16 and s24.
enum PCMSampleCodec {
    /// Reads sample `index` (counted in samples, not bytes) as a signed integer scaled to 32 bits
    /// (s16 and s24 shifted left), or as float bits for f32.
    @inline(__always)
    static func loadInteger(_ bytes: UnsafeRawBufferPointer, sampleIndex index: Int, format: PCMSampleFormat) -> Int32 {
        switch format {
        case .s16:
            let value = Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 2, as: Int16.self))
            return Int32(value) << 16
        case .s24:
            let offset = index * 3
            let raw = UInt32(bytes[offset]) << 8 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 24
            return Int32(bitPattern: raw)
        case .s32, .f32:
            return Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 4, as: Int32.self))
        }
    }

    /// Reads sample `index` as a float in the nominal range [-1, 1].
    @inline(__always)
    static func loadFloat(_ bytes: UnsafeRawBufferPointer, sampleIndex index: Int, format: PCMSampleFormat) -> Float {
        PCMSampleReader(sample: format).float(bytes, sampleIndex: index)
    }

    /// Reads sample `index` as a 16-bit integer (rounded and clipped as described above).
    @inline(__always)
    static func loadInt16(_ bytes: UnsafeRawBufferPointer, sampleIndex index: Int, format: PCMSampleFormat) -> Int16 {
        switch format {
        case .s16:
            return Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 2, as: Int16.self))
        case .s24, .s32:
            return Int16(truncatingIfNeeded: narrow(loadInteger(bytes, sampleIndex: index, format: format), toBits: 16))
        case .f32:
            return Int16(truncatingIfNeeded: floatToInteger(loadFloat(bytes, sampleIndex: index, format: .f32), bits: 16))
        }
    }

    /// Rounds a 32-bit-scaled integer to `bits` bits (nearest, halves up), clipping at the top.
    @inline(__always)
    static func narrow(_ value: Int32, toBits bits: Int) -> Int32 {
        let shift = Int32(32 - bits)
        guard shift > 0 else { return value }
        let rounded = (Int64(value) + (Int64(1) << (shift - 1))) >> Int64(shift)
        let maximum = (Int64(1) << Int64(bits - 1)) - 1
        return Int32(min(rounded, maximum))
    }

    /// Scales a float to a `bits`-bit integer: rounded to nearest (ties to even), clipped; NaN is 0.
    @inline(__always)
    static func floatToInteger(_ value: Float, bits: Int) -> Int32 {
        guard !value.isNaN else { return 0 }
        let scale = Double(Int64(1) << Int64(bits - 1))
        let scaled = (Double(value) * scale).rounded(.toNearestOrEven)
        let clipped = min(max(scaled, -scale), scale - 1)
        return Int32(clipped)
    }

    /// Converts one sample from `source` encoding and appends its bytes in `target` encoding.
    @inline(__always)
    static func convert(
        _ bytes: UnsafeRawBufferPointer, sampleIndex index: Int, from source: PCMSampleFormat,
        to target: PCMSampleFormat, into output: UnsafeMutableRawBufferPointer, sampleOffset: Int
    ) {
        switch target {
        case .f32:
            let value = loadFloat(bytes, sampleIndex: index, format: source)
            output.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: sampleOffset * 4, as: UInt32.self)
        case .s16, .s24, .s32:
            let value: Int32
            if source == .f32 {
                value = floatToInteger(loadFloat(bytes, sampleIndex: index, format: .f32), bits: target.bitsPerChannel)
            } else {
                let scaled = loadInteger(bytes, sampleIndex: index, format: source)
                value = source.bitsPerChannel > target.bitsPerChannel
                    ? narrow(scaled, toBits: target.bitsPerChannel)
                    : scaled >> Int32(32 - target.bitsPerChannel)
            }
            store(value, bits: target.bitsPerChannel, into: output, sampleOffset: sampleOffset)
        }
    }

    /// Stores a `bits`-bit signed integer (16, 24 or 32) little-endian at sample `sampleOffset`.
    @inline(__always)
    static func store(_ value: Int32, bits: Int, into output: UnsafeMutableRawBufferPointer, sampleOffset: Int) {
        switch bits {
        case 16:
            output.storeBytes(of: Int16(truncatingIfNeeded: value).littleEndian, toByteOffset: sampleOffset * 2, as: Int16.self)
        case 24:
            let offset = sampleOffset * 3
            let raw = UInt32(bitPattern: value)
            output[offset] = UInt8(truncatingIfNeeded: raw)
            output[offset + 1] = UInt8(truncatingIfNeeded: raw >> 8)
            output[offset + 2] = UInt8(truncatingIfNeeded: raw >> 16)
        default:
            output.storeBytes(of: value.littleEndian, toByteOffset: sampleOffset * 4, as: Int32.self)
        }
    }
}
