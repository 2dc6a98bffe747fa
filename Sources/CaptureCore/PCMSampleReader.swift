/// Reads samples of interleaved little-endian PCM in one of the sample formats capture-send carries
/// as numbers in the nominal range -1...1, the inverse of `PCMSampleWriter`: a `b`-bit integer is
/// divided by 2^(b-1) (exact for s16 and s24, rounded to nearest for s32), f32 is read as it is.
public struct PCMSampleReader: Sendable {
    /// The sample encoding read.
    public let sample: PCMSampleFormat

    public init(sample: PCMSampleFormat) { self.sample = sample }

    /// Sample `index` (counted in samples, not bytes) of `bytes`.
    @inlinable
    public func float(_ bytes: UnsafeRawBufferPointer, sampleIndex index: Int) -> Float {
        switch sample {
        case .f32:
            return Float(bitPattern: UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self)))
        case .s16:
            return Float(Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 2, as: Int16.self))) * (1 / 32_768)
        case .s24:
            let offset = index * 3
            let raw = UInt32(bytes[offset]) << 8 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 24
            return Float(Int32(bitPattern: raw) >> 8) * (1 / 8_388_608)
        case .s32:
            return Float(Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: index * 4, as: Int32.self))) * (1 / 2_147_483_648)
        }
    }
}
