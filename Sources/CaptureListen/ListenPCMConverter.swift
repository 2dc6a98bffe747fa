import CaptureCore

/// Turns a PCM stream's interleaved samples, in the stream's own format, into interleaved 32-bit
/// floats of at most two channels for the listen encoder.
///
/// Takes 16, 24 (packed in 3 bytes) and 32-bit signed integers and 32 or 64-bit floats, little- or
/// big-endian as the format's flags say, 1 to 8 channels. Mono and stereo pass through. More than
/// two channels are downmixed to stereo for listening: channel 1 is the left, channel 2 the right,
/// and every further channel goes into both at half gain; the sum is divided by the total gain
/// (1 + half the further channels) so that it cannot clip. The recording keeps every channel.
struct ListenPCMConverter: Sendable {
    /// The PCM sample encodings the converter reads.
    enum Sample: Sendable {
        case int16, int24, int32, float32, float64
    }

    let sample: Sample
    let bigEndian: Bool
    let inputChannels: Int
    let bytesPerFrame: Int
    /// 1 or 2.
    var outputChannels: Int { min(inputChannels, 2) }

    init(format: StreamFormat) throws(ListenError) {
        guard format.isLinearPCM else {
            throw .unsupportedStream("its format \(format) is neither linear PCM nor Opus")
        }
        guard !format.formatFlags.contains(.isNonInterleaved) else {
            throw .unsupportedStream("its PCM is not interleaved")
        }
        guard (1...8).contains(format.channelCount) else {
            throw .unsupportedStream("it has \(format.channelCount) channels; 1 to 8 can be played")
        }
        let bits = Int(format.bitsPerChannel)
        let sample: Sample
        if format.formatFlags.contains(.isFloat) {
            switch bits {
            case 32: sample = .float32
            case 64: sample = .float64
            default: throw .unsupportedStream("its samples are \(bits)-bit floats; 32 or 64-bit floats can be played")
            }
        } else {
            switch bits {
            case 16: sample = .int16
            case 24: sample = .int24
            case 32: sample = .int32
            default: throw .unsupportedStream("its samples are \(bits)-bit integers; 16, 24 or 32-bit can be played")
            }
        }
        let expectedFrame = bits / 8 * format.channelCount
        guard Int(format.bytesPerFrame) == expectedFrame else {
            throw .unsupportedStream("its frames are \(format.bytesPerFrame) bytes, not the \(expectedFrame) bytes of packed \(bits)-bit samples")
        }
        guard format.sampleRate.isFinite, format.sampleRate >= 8_000, format.sampleRate <= 192_000 else {
            throw .unsupportedStream("its sample rate \(format.sampleRate) Hz is outside 8000 to 192000 Hz")
        }
        self.sample = sample
        self.bigEndian = format.formatFlags.contains(.isBigEndian)
        self.inputChannels = format.channelCount
        self.bytesPerFrame = expectedFrame
    }

    /// Appends the floats for every whole frame in `bytes` to `output`.
    func convert(_ bytes: UnsafeRawBufferPointer, into output: inout [Float]) {
        let frames = bytes.count / bytesPerFrame
        guard frames > 0 else { return }
        let bytesPerSample = bytesPerFrame / inputChannels
        let read = reader()
        output.reserveCapacity(output.count + frames * outputChannels)
        if inputChannels <= 2 {
            for index in 0..<(frames * inputChannels) {
                output.append(read(bytes, index * bytesPerSample))
            }
            return
        }
        let further = inputChannels - 2
        let scale = 1 / (1 + 0.5 * Float(further))
        for frame in 0..<frames {
            let start = frame * bytesPerFrame
            var shared: Float = 0
            for channel in 2..<inputChannels {
                shared += read(bytes, start + channel * bytesPerSample)
            }
            shared *= 0.5
            output.append((read(bytes, start) + shared) * scale)
            output.append((read(bytes, start + bytesPerSample) + shared) * scale)
        }
    }

    /// A function that reads the sample starting at a byte offset, chosen once per call.
    private func reader() -> (UnsafeRawBufferPointer, Int) -> Float {
        let big = bigEndian
        switch sample {
        case .int16:
            return { bytes, offset in
                let raw = UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
                let value = Int16(bitPattern: big ? raw.byteSwapped : raw)
                return Float(value) / 32_768
            }
        case .int24:
            return { bytes, offset in
                let first = UInt32(bytes[offset]), middle = UInt32(bytes[offset + 1]), last = UInt32(bytes[offset + 2])
                let raw = big ? (first << 16 | middle << 8 | last) : (last << 16 | middle << 8 | first)
                let value = Int32(bitPattern: raw << 8) >> 8
                return Float(value) / 8_388_608
            }
        case .int32:
            return { bytes, offset in
                let raw = Self.load32(bytes, offset, bigEndian: big)
                return Float(Double(Int32(bitPattern: raw)) / 2_147_483_648)
            }
        case .float32:
            return { bytes, offset in
                Float(bitPattern: Self.load32(bytes, offset, bigEndian: big))
            }
        case .float64:
            return { bytes, offset in
                let low = UInt64(Self.load32(bytes, offset, bigEndian: false))
                let high = UInt64(Self.load32(bytes, offset + 4, bigEndian: false))
                let raw = high << 32 | low
                return Float(Double(bitPattern: big ? raw.byteSwapped : raw))
            }
        }
    }

    private static func load32(_ bytes: UnsafeRawBufferPointer, _ offset: Int, bigEndian: Bool) -> UInt32 {
        let raw = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
        return bigEndian ? raw.byteSwapped : raw
    }
}
