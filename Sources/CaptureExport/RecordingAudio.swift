import CAF
import COpus
import CaptureCore

/// A recording's valid audio (as `ExportPlan` checked it), read in pieces: linear PCM as it is stored, Opus decoded with libopus
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
    /// Frames of the stored stream before the first valid one (Opus priming).
    let leadingFrames: Int64
    /// Frames delivered so far.
    private(set) var framesOut: Int64 = 0
    private var nextPacket: Int64 = 0
    private var framesToSkip: Int64
    private let decoder: OpusDecoding?

    /// Linear PCM frames a piece holds (a second or less at most rates): bounded, whatever the rate.
    static let pieceFrames: Int64 = 48_000

    init(plan: ExportPlan) throws(ExportError) {
        file = plan.file
        channels = plan.channels
        sampleRate = plan.sampleRate
        validFrames = plan.validFrames
        leadingFrames = plan.leadingFrames
        framesToSkip = plan.leadingFrames
        decoder = plan.file.format.isLinearPCM ? nil : try OpusDecoding(channels: plan.channels, head: plan.opusHead, path: plan.file.path)
    }

    /// The next piece of valid audio (about a second), or nil at the end.
    func next() throws(ExportError) -> Samples? {
        guard framesOut < validFrames else { return nil }
        if let decoder { return try nextDecoded(decoder) }
        // The plan admits only s16, s24, s32 and f32 little-endian, packed: bytes per frame is
        // channels × bytes per sample, at most 32 bytes.
        let bytesPerFrame = Int64(file.format.bytesPerFrame)
        let frames = min(Self.pieceFrames, validFrames - framesOut)
        let bytes: [UInt8]
        do {
            bytes = try file.readAudioBytes(offset: framesOut * bytesPerFrame, count: Int(frames * bytesPerFrame))
        } catch {
            throw .unreadable("cannot export \(file.path): its audio cannot be read: \(error.description)")
        }
        guard Int64(bytes.count) == frames * bytesPerFrame else {
            throw .unreadable("cannot export \(file.path): its audio ends before its \(validFrames) frames")
        }
        framesOut += frames
        return Self.samples(bytes, bytesPerSample: Int(file.format.bitsPerChannel) / 8, isFloat: file.format.formatFlags.contains(.isFloat))
    }

    /// Little-endian samples of `bytesPerSample` bytes (2 to 4): floats as they are, integers
    /// left-justified in 32 bits. Only whole samples of `bytes` are read.
    static func samples(_ bytes: [UInt8], bytesPerSample: Int, isFloat: Bool) -> Samples {
        let count = bytes.count / bytesPerSample
        func word(_ index: Int) -> UInt32 {
            var value: UInt32 = 0
            let start = index * bytesPerSample
            for byte in 0..<bytesPerSample { value |= UInt32(bytes[start + byte]) << (8 * (4 - bytesPerSample + byte)) }
            return value
        }
        if isFloat { return .floats((0..<count).map { Float(bitPattern: word($0)) }) }
        return .integers((0..<count).map { Int32(bitPattern: word($0)) })
    }

    private func nextDecoded(_ decoder: OpusDecoding) throws(ExportError) -> Samples? {
        var out: [Float] = []
        let packets = file.packetCount ?? 0
        while out.count < sampleRate * channels, nextPacket < packets, framesOut < validFrames {
            let packet: [UInt8]
            do {
                packet = try file.readPacket(nextPacket)
            } catch {
                throw .unreadable("cannot export \(file.path): its packet \(nextPacket) cannot be read: \(error.description)")
            }
            nextPacket += 1
            var decoded = try decoder.decode(packet, index: nextPacket - 1)
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
            throw .unreadable("cannot export \(file.path): its packets end \(validFrames - framesOut) frames before the packet table's valid frames; the file is damaged")
        }
        return out.isEmpty ? nil : .floats(out)
    }
}

/// libopus decoding of one stream's packets to interleaved floats at 48 kHz.
final class OpusDecoding {
    /// The most frames one Opus packet decodes to: 120 ms at 48 kHz.
    static let maximumPacketFrames = 5_760
    private let channels: Int
    private let path: String
    private var plain: OpaquePointer?
    private var multistream: OpaquePointer?
    private var scratch: [Float]

    /// A decoder for `channels` (1 to 8, as `ExportPlan` checked) and, beyond 2, the checked
    /// OpusHead's channel mapping.
    init(channels: Int, head: [UInt8]?, path: String) throws(ExportError) {
        self.channels = channels
        self.path = path
        var error: Int32 = 0
        if channels <= 2 {
            plain = opus_decoder_create(48_000, Int32(channels), &error)
        } else {
            guard let head, head.count == 21 + channels, head[18] == 1 else {
                throw .unreadable("cannot export \(path): a \(channels)-channel Opus recording needs its OpusHead (channel mapping family 1) in its magic cookie; the file is damaged")
            }
            var mapping = Array(head[21...])
            multistream = opus_multistream_decoder_create(48_000, Int32(channels), Int32(head[19]), Int32(head[20]), &mapping, &error)
        }
        guard error == OPUS_OK, plain != nil || multistream != nil else {
            throw .unreadable("cannot export \(path): libopus cannot set up a decoder for it (\(String(cString: opus_strerror(error))))")
        }
        scratch = [Float](repeating: 0, count: Self.maximumPacketFrames * channels)
    }

    deinit {
        if let plain { opus_decoder_destroy(plain) }
        if let multistream { opus_multistream_decoder_destroy(multistream) }
    }

    /// Packet `index`'s samples.
    func decode(_ packet: [UInt8], index: Int64) throws(ExportError) -> [Float] {
        let frames: Int32
        // A packet's size comes from the packet table as a UInt32; libopus takes an Int32.
        guard let size = Int32(exactly: packet.count) else {
            throw .unreadable("cannot export \(path): its packet \(index) of \(packet.count) bytes is not an Opus packet; the file is damaged")
        }
        if let plain {
            frames = opus_decode_float(plain, packet, size, &scratch, Int32(Self.maximumPacketFrames), 0)
        } else if let multistream {
            frames = opus_multistream_decode_float(multistream, packet, size, &scratch, Int32(Self.maximumPacketFrames), 0)
        } else {
            frames = OPUS_INVALID_STATE
        }
        guard frames >= 0 else {
            throw .unreadable("cannot export \(path): libopus cannot decode its packet \(index) (\(String(cString: opus_strerror(frames)))); the file is damaged")
        }
        return Array(scratch[0..<(Int(frames) * channels)])
    }
}
