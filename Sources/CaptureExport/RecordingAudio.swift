import CAF
import COpus
import CaptureCore

/// A recording's valid audio, read in pieces: linear PCM as it is stored, Opus decoded with libopus
/// (the multistream decoder, set up from the stored OpusHead, for 3–8 channels) with its priming
/// dropped and its remainder cut, so what comes out is exactly the recording's valid frames.
final class RecordingAudio {
    enum Samples {
        /// Integers left-justified in 32 bits (s16, s24, s32), as libsndfile's `sf_write_int` takes them.
        case integers([Int32])
        /// Floats in [-1, 1] (f32 recordings, decoded Opus).
        case floats([Float])
    }

    let file: CAFFile
    let channels: Int
    /// The sample rate of what comes out (48 kHz for Opus).
    let sampleRate: Int
    /// Valid frames in all.
    let validFrames: Int64
    /// Frames of the stored stream before the first valid one (Opus priming): marker positions,
    /// which count stored frames, lose this much.
    let leadingFrames: Int64
    private var nextPacket: Int64 = 0
    private var framesOut: Int64 = 0
    private var framesToSkip: Int64
    private let decoder: OpusDecoding?

    init(file: CAFFile) throws(ExportError) {
        self.file = file
        channels = file.format.channelCount
        if file.format.isLinearPCM {
            sampleRate = Int(file.format.sampleRate.rounded())
            validFrames = file.totalFrames ?? 0
            leadingFrames = 0
            framesToSkip = 0
            decoder = nil
        } else if file.format.formatID == .opus {
            guard let table = file.packetTable else {
                throw .unreadable("\(file.path) is an Opus recording without a packet table: finish it first with `capture-recv recover`")
            }
            sampleRate = 48_000
            validFrames = table.validFrames
            leadingFrames = Int64(table.primingFrames)
            framesToSkip = Int64(table.primingFrames)
            decoder = try OpusDecoding(channels: channels, cookie: file.magicCookie)
        } else {
            throw .unsupported("\(file.path) holds \(file.format), which export cannot decode")
        }
    }

    /// The next piece of valid audio (about a second), or nil at the end.
    func next() throws(ExportError) -> Samples? {
        guard framesOut < validFrames else { return nil }
        if let decoder { return try nextDecoded(decoder) }
        let bytesPerFrame = Int(file.format.bytesPerFrame)
        let frames = Int(min(Int64(sampleRate), validFrames - framesOut))
        let bytes: [UInt8]
        do {
            bytes = try file.readAudioBytes(offset: framesOut * Int64(bytesPerFrame), count: frames * bytesPerFrame)
        } catch {
            throw .unreadable("cannot read the audio of \(file.path): \(error.description)")
        }
        framesOut += Int64(frames)
        let count = frames * channels
        let bits = Int(file.format.bitsPerChannel)
        if file.format.formatFlags.contains(.isFloat) {
            return .floats((0..<count).map { index in
                let offset = index * 4
                return Float(bitPattern: UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24)
            })
        }
        let width = bits / 8
        return .integers((0..<count).map { index in
            var value: UInt32 = 0
            for byte in 0..<width { value |= UInt32(bytes[index * width + byte]) << (8 * (4 - width + byte)) }
            return Int32(bitPattern: value)
        })
    }

    private func nextDecoded(_ decoder: OpusDecoding) throws(ExportError) -> Samples? {
        var out: [Float] = []
        let packets = file.packetCount ?? 0
        while out.count < sampleRate * channels, nextPacket < packets, framesOut < validFrames {
            let packet: [UInt8]
            do {
                packet = try file.readPacket(nextPacket)
            } catch {
                throw .unreadable("cannot read packet \(nextPacket) of \(file.path): \(error.description)")
            }
            nextPacket += 1
            var decoded = try decoder.decode(packet)
            var frames = Int64(decoded.count / channels)
            if framesToSkip > 0 {
                let skipped = min(framesToSkip, frames)
                decoded.removeFirst(Int(skipped) * channels)
                framesToSkip -= skipped
                frames -= skipped
            }
            let kept = min(frames, validFrames - framesOut)
            out += decoded[0..<(Int(kept) * channels)]
            framesOut += kept
        }
        if out.isEmpty, framesOut < validFrames {
            throw .unreadable("\(file.path) ends \(validFrames - framesOut) frames before its packet table says")
        }
        return out.isEmpty ? nil : .floats(out)
    }
}

/// libopus decoding of one stream's packets to interleaved floats at 48 kHz.
final class OpusDecoding {
    private let channels: Int
    private var plain: OpaquePointer?
    private var multistream: OpaquePointer?
    private var scratch: [Float]

    init(channels: Int, cookie: [UInt8]) throws(ExportError) {
        self.channels = channels
        scratch = [Float](repeating: 0, count: 5_760 * channels)
        var error: Int32 = 0
        if channels <= 2 {
            plain = opus_decoder_create(48_000, Int32(channels), &error)
        } else {
            guard cookie.count == 21 + channels, cookie.starts(with: Array("OpusHead".utf8)), cookie[18] == 1 else {
                throw .unreadable("a \(channels)-channel Opus recording needs its OpusHead (mapping family 1) in the kuki chunk")
            }
            var mapping = Array(cookie[21...])
            multistream = opus_multistream_decoder_create(48_000, Int32(channels), Int32(cookie[19]), Int32(cookie[20]), &mapping, &error)
        }
        guard error == OPUS_OK, plain != nil || multistream != nil else {
            throw .unreadable("libopus cannot decode this recording: \(String(cString: opus_strerror(error)))")
        }
    }

    deinit {
        if let plain { opus_decoder_destroy(plain) }
        if let multistream { opus_multistream_decoder_destroy(multistream) }
    }

    func decode(_ packet: [UInt8]) throws(ExportError) -> [Float] {
        let frames: Int32
        if let plain {
            frames = opus_decode_float(plain, packet, Int32(packet.count), &scratch, 5_760, 0)
        } else if let multistream {
            frames = opus_multistream_decode_float(multistream, packet, Int32(packet.count), &scratch, 5_760, 0)
        } else {
            frames = OPUS_INVALID_STATE
        }
        guard frames >= 0 else { throw .unreadable("libopus cannot decode a packet: \(String(cString: opus_strerror(frames)))") }
        return Array(scratch[0..<(Int(frames) * channels)])
    }
}
