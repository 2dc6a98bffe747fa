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

    /// Bounds a description must keep before anything sizes a buffer or a loop by it. 1024 channels
    /// is libsndfile's limit (and far beyond what capture-recv records).
    static let sampleRates: ClosedRange<Double> = 1...1_000_000
    static let maximumChannels: UInt32 = 1_024
    static let maximumFramesPerPacket: UInt32 = 1 << 20
    static let maximumBytesPerPacket: UInt32 = 1 << 24
    static let opusSampleRates: [Double] = [8_000, 12_000, 16_000, 24_000, 48_000]

    /// Decodes a `desc` body into a `StreamFormat` with Core Audio flag meanings and a derived
    /// `bytesPerFrame`, rejecting descriptions that cannot describe audio: out of bounds (sample rate,
    /// channels, packet sizes), or fields that contradict each other or the format's flags (linear
    /// PCM: one frame a packet, whole containers per channel, floats of 32 or 64 bits filling theirs;
    /// Opus: its sample rates, packet durations and channel count, no fixed packet size).
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
        func unusable(_ reason: String) -> CAFError { .unsupportedDescription(path: path, reason: reason) }
        guard sampleRate.isFinite, sampleRates.contains(sampleRate) else {
            throw unusable("the sample rate \(sampleRate) Hz is outside 1 to 1000000 Hz")
        }
        guard channels >= 1 else { throw unusable("it has no channels") }
        guard channels <= maximumChannels else {
            throw unusable("\(channels) channels is more than the \(maximumChannels) a recording can have")
        }
        guard framesPerPacket <= maximumFramesPerPacket else {
            throw unusable("\(framesPerPacket) frames per packet is more than \(maximumFramesPerPacket)")
        }
        guard bytesPerPacket <= maximumBytesPerPacket else {
            throw unusable("\(bytesPerPacket) bytes per packet is more than \(maximumBytesPerPacket)")
        }
        guard bits <= 64 else { throw unusable("\(bits) bits per sample is more than 64") }
        let id = AudioFormatID(rawValue: formatID)
        if id == .opus {
            try checkOpus(sampleRate: sampleRate, bytesPerPacket: bytesPerPacket, framesPerPacket: framesPerPacket, channels: channels, bits: bits, path: path)
        }
        guard id == .linearPCM else {
            return StreamFormat(
                sampleRate: sampleRate, formatID: id, formatFlags: AudioFormatFlags(rawValue: flags),
                bytesPerPacket: bytesPerPacket, framesPerPacket: framesPerPacket, bytesPerFrame: 0,
                channelsPerFrame: channels, bitsPerChannel: bits
            )
        }
        guard framesPerPacket == 1 else {
            throw unusable("linear PCM must have 1 frame per packet, not \(framesPerPacket)")
        }
        guard bits >= 8, bits % 8 == 0 else {
            throw unusable("linear PCM with \(bits) bits per sample is not supported")
        }
        let containerBytes = bytesPerPacket / channels
        guard bytesPerPacket > 0, bytesPerPacket % channels == 0, containerBytes >= bits / 8, containerBytes <= 8 else {
            throw unusable("\(bytesPerPacket) bytes per packet cannot hold \(channels) channels of \(bits) bits")
        }
        guard flags & ~(cafFlagIsFloat | cafFlagIsLittleEndian) == 0 else {
            throw unusable("unknown linear PCM flags 0x\(String(flags, radix: 16))")
        }
        let isFloat = flags & cafFlagIsFloat != 0
        if isFloat {
            guard bits == 32 || bits == 64 else { throw unusable("float samples are 32 or 64 bits, not \(bits)") }
            guard containerBytes * 8 == bits else {
                throw unusable("float samples fill their container: \(bytesPerPacket) bytes per packet hold \(channels) channels of \(bits) bits")
            }
        }
        var coreAudioFlags: AudioFormatFlags = []
        coreAudioFlags.insert(isFloat ? .isFloat : .isSignedInteger)
        if flags & cafFlagIsLittleEndian == 0 { coreAudioFlags.insert(.isBigEndian) }
        if containerBytes * 8 == bits { coreAudioFlags.insert(.isPacked) }
        return StreamFormat(
            sampleRate: sampleRate, formatID: id, formatFlags: coreAudioFlags,
            bytesPerPacket: bytesPerPacket, framesPerPacket: 1, bytesPerFrame: bytesPerPacket,
            channelsPerFrame: channels, bitsPerChannel: bits
        )
    }

    /// Opus (RFC 6716): 8 to 48 kHz, packets of 2.5 ms steps up to 120 ms (or 0: each packet's
    /// duration in the packet table), variable sizes, no bits per sample, at most 255 channels.
    private static func checkOpus(
        sampleRate: Double, bytesPerPacket: UInt32, framesPerPacket: UInt32, channels: UInt32, bits: UInt32, path: String
    ) throws(CAFError) {
        func unusable(_ reason: String) -> CAFError { .unsupportedDescription(path: path, reason: reason) }
        guard opusSampleRates.contains(sampleRate) else {
            throw unusable("Opus runs at 8000, 12000, 16000, 24000 or 48000 Hz, not \(sampleRate)")
        }
        guard bytesPerPacket == 0, bits == 0 else {
            throw unusable("Opus packets vary in size and have no bits per sample, so bytes per packet (\(bytesPerPacket)) and bits (\(bits)) must be 0")
        }
        guard channels <= 255 else { throw unusable("Opus carries at most 255 channels, not \(channels)") }
        let rate = UInt32(sampleRate)
        let step = rate / 400
        guard framesPerPacket == 0 || (framesPerPacket % step == 0 && framesPerPacket <= step * 48) else {
            throw unusable("Opus packets last 2.5 ms steps up to 120 ms (a multiple of \(step) frames up to \(step * 48) at \(rate) Hz), not \(framesPerPacket) frames")
        }
    }
}
