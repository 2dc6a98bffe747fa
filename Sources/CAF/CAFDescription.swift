import CaptureCore

/// Encodes and decodes the `desc` chunk body, converting linear PCM flags between their Core Audio
/// meaning (`StreamFormat`: bit 1 = big-endian, integer and packed flags present) and their CAF meaning
/// (`kCAFLinearPCMFormatFlagIsFloat` = 1, `kCAFLinearPCMFormatFlagIsLittleEndian` = 2, nothing else).
enum CAFDescription {
    static let cafFlagIsFloat: UInt32 = 1
    static let cafFlagIsLittleEndian: UInt32 = 2

    /// The 32-byte `desc` body for `format`.
    static func encode(_ format: StreamFormat) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(float64: format.sampleRate)
        writer.append(format.formatID.rawValue)
        writer.append(cafFlags(for: format))
        writer.append(format.bytesPerPacket)
        writer.append(format.framesPerPacket)
        writer.append(format.channelsPerFrame)
        writer.append(format.bitsPerChannel)
        return writer.bytes
    }

    static func cafFlags(for format: StreamFormat) -> UInt32 {
        guard format.isLinearPCM else { return format.formatFlags.rawValue }
        var flags: UInt32 = 0
        if format.formatFlags.contains(.isFloat) { flags |= cafFlagIsFloat }
        if !format.formatFlags.contains(.isBigEndian) { flags |= cafFlagIsLittleEndian }
        return flags
    }

    /// Decodes a `desc` body into a `StreamFormat` with Core Audio flag meanings and a derived
    /// `bytesPerFrame`, rejecting descriptions that cannot describe audio.
    static func decode(_ body: [UInt8], path: String) throws(CAFError) -> StreamFormat {
        var reader = ByteReader(body)
        guard body.count == Int(CAFChunkType.descriptionSize),
            let sampleRate = reader.readFloat64(),
            let formatID = reader.read(UInt32.self),
            let flags = reader.read(UInt32.self),
            let bytesPerPacket = reader.read(UInt32.self),
            let framesPerPacket = reader.read(UInt32.self),
            let channels = reader.read(UInt32.self),
            let bits = reader.read(UInt32.self)
        else {
            throw .malformedChunk(path: path, chunk: "desc", reason: "its size is \(body.count) bytes, not 32")
        }
        guard sampleRate.isFinite, sampleRate > 0 else {
            throw .unsupportedDescription(path: path, reason: "the sample rate \(sampleRate) is not a positive number")
        }
        guard channels >= 1 else {
            throw .unsupportedDescription(path: path, reason: "it has no channels")
        }
        let id = AudioFormatID(rawValue: formatID)
        guard id == .linearPCM else {
            return StreamFormat(
                sampleRate: sampleRate, formatID: id, formatFlags: AudioFormatFlags(rawValue: flags),
                bytesPerPacket: bytesPerPacket, framesPerPacket: framesPerPacket, bytesPerFrame: 0,
                channelsPerFrame: channels, bitsPerChannel: bits
            )
        }
        guard framesPerPacket == 1 else {
            throw .unsupportedDescription(path: path, reason: "linear PCM must have 1 frame per packet, not \(framesPerPacket)")
        }
        guard bits >= 8, bits <= 64, bits % 8 == 0 else {
            throw .unsupportedDescription(path: path, reason: "linear PCM with \(bits) bits per sample is not supported")
        }
        let containerBytes = bytesPerPacket / channels
        guard bytesPerPacket > 0, bytesPerPacket % channels == 0, containerBytes >= bits / 8, containerBytes <= 8 else {
            throw .unsupportedDescription(path: path, reason: "\(bytesPerPacket) bytes per packet cannot hold \(channels) channels of \(bits) bits")
        }
        guard flags & ~(cafFlagIsFloat | cafFlagIsLittleEndian) == 0 else {
            throw .unsupportedDescription(path: path, reason: "unknown linear PCM flags 0x\(String(flags, radix: 16))")
        }
        var coreAudioFlags: AudioFormatFlags = []
        coreAudioFlags.insert(flags & cafFlagIsFloat != 0 ? .isFloat : .isSignedInteger)
        if flags & cafFlagIsLittleEndian == 0 { coreAudioFlags.insert(.isBigEndian) }
        if containerBytes * 8 == bits { coreAudioFlags.insert(.isPacked) }
        return StreamFormat(
            sampleRate: sampleRate, formatID: id, formatFlags: coreAudioFlags,
            bytesPerPacket: bytesPerPacket, framesPerPacket: 1, bytesPerFrame: bytesPerPacket,
            channelsPerFrame: channels, bitsPerChannel: bits
        )
    }
}
