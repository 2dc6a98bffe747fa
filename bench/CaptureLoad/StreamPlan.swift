import CaptureCore
import CaptureWire
import Foundation

/// The two stream shapes capture-load can play.
enum LoadCodec: String, CaseIterable, Sendable {
    /// Opus-shaped: 48 kHz stereo, 20 ms packets of pseudo-random sizes (not valid Opus).
    case opus
    /// Linear PCM: 48 kHz signed 16-bit stereo.
    case pcm
}

/// Everything about one simulated stream that both the generator and the verifier derive from its
/// index and the run's seed: identity, format, how many packets and AudioData messages, and the
/// exact bytes of every message. Nothing here depends on time or on the connection.
struct StreamPlan: Sendable {
    /// Frames per Opus packet (20 ms at 48 kHz).
    static let opusFramesPerPacket = 960
    /// The encoder lookahead a real Opus sender announces (libopus `audio`/`voip` at 48 kHz).
    static let opusPrimingFrames = 312
    /// The sample rate of both shapes.
    static let sampleRate = 48_000

    let index: Int
    let name: String
    let streamID: UUID
    /// The stream's resume secret (PROTOCOL.md §6.1.2), derived from the seed like its id, so that a
    /// run restarted with the same flags can resume its streams. Predictable: a load generator's
    /// streams are test streams, not field recordings.
    let resumeSecret: Data
    let codec: LoadCodec
    let format: StreamFormat
    /// Every AudioData carries `steadyToneLevels`.
    let sendsLevels: Bool
    /// Frames of real audio (the stream's duration); Opus adds priming and remainder around it.
    let capturedFrames: Int
    /// Packets in the whole stream (PCM: frames).
    let packetCount: Int
    /// Packets in every AudioData but possibly the last.
    let packetsPerMessage: Int
    /// AudioData messages in the stream (sequences 1...messageCount).
    let messageCount: Int
    let primingFrames: Int
    let remainderFrames: Int
    /// Average Opus packet size in bytes (unused for PCM).
    let meanPacketBytes: Int
    let seed: UInt64

    init(index: Int, shape: StreamShape) {
        self.index = index
        self.name = shape.streamName(index: index)
        self.seed = shape.seed
        self.codec = shape.codec
        self.sendsLevels = shape.sendsLevels
        var idBytes = [UInt8](repeating: 0, count: 16)
        // The id depends on the name and the codec too, so that runs with other prefixes or shapes are other streams.
        let nameHash = (self.name + "/" + shape.codec.rawValue).utf8.reduce(UInt64(0xCBF2_9CE4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        var generator = PayloadGenerator(seed: shape.seed ^ nameHash, stream: index, item: UInt64.max)
        generator.fill(&idBytes)
        var secret = [UInt8](repeating: 0, count: 32)
        generator.fill(&secret)
        self.resumeSecret = Data(secret)
        idBytes[6] = (idBytes[6] & 0x0F) | 0x40  // version 4
        idBytes[8] = (idBytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        self.streamID = UUID(uuid: (
            idBytes[0], idBytes[1], idBytes[2], idBytes[3], idBytes[4], idBytes[5], idBytes[6], idBytes[7],
            idBytes[8], idBytes[9], idBytes[10], idBytes[11], idBytes[12], idBytes[13], idBytes[14], idBytes[15]))
        let captured = max(1, Int((shape.durationSeconds * Double(Self.sampleRate)).rounded()))
        self.capturedFrames = captured
        switch shape.codec {
        case .opus:
            format = .opus(channels: 2, framesPerPacket: Self.opusFramesPerPacket)
            primingFrames = Self.opusPrimingFrames
            let packets = (captured + Self.opusPrimingFrames + Self.opusFramesPerPacket - 1) / Self.opusFramesPerPacket
            packetCount = packets
            remainderFrames = packets * Self.opusFramesPerPacket - Self.opusPrimingFrames - captured
            packetsPerMessage = max(1, Int((shape.frameSeconds / 0.02).rounded()))
            meanPacketBytes = max(2, Int((Double(shape.bitrate) / 8 * 0.02).rounded()))
        case .pcm:
            format = .linearPCM(sampleRate: Double(Self.sampleRate), channels: 2, sample: .s16)
            primingFrames = 0
            remainderFrames = 0
            packetCount = captured
            packetsPerMessage = max(1, Int((shape.frameSeconds * Double(Self.sampleRate)).rounded()))
            meanPacketBytes = 4
        }
        messageCount = (packetCount + packetsPerMessage - 1) / packetsPerMessage
    }

    /// Frames in one packet.
    var framesPerPacket: Int { Int(format.framesPerPacket) }

    /// Seconds of audio in one full AudioData message: the pace at which messages become due.
    var messageSeconds: Double { Double(packetsPerMessage * framesPerPacket) / Double(Self.sampleRate) }

    /// The range of packet indexes (0-based) that AudioData `sequence` carries.
    func packets(ofSequence sequence: UInt64) -> Range<Int> {
        let start = Int(sequence - 1) * packetsPerMessage
        return start..<min(start + packetsPerMessage, packetCount)
    }

    /// The sample time of the first frame of `sequence`.
    func firstSampleTime(ofSequence sequence: UInt64) -> Int64 {
        Int64(packets(ofSequence: sequence).lowerBound * framesPerPacket)
    }

    /// The sample index just past the stream's last packet.
    var endSampleTime: Int64 { Int64(packetCount * framesPerPacket) }

    /// The size of Opus packet `packet`: uniform between half and one and a half times the mean.
    func opusPacketSize(_ packet: Int) -> Int {
        var generator = PayloadGenerator(seed: seed, stream: index, item: UInt64(packet) | (1 << 62))
        let spread = meanPacketBytes
        return max(1, meanPacketBytes / 2 + Int(generator.next() % UInt64(spread + 1)))
    }

    /// The packet sizes of `sequence` (empty for PCM, whose packets are all one frame).
    func packetSizes(ofSequence sequence: UInt64) -> [UInt32] {
        guard codec == .opus else { return [] }
        return packets(ofSequence: sequence).map { UInt32(opusPacketSize($0)) }
    }

    /// The TOC byte every Opus-shaped packet starts with: CELT fullband, 20 ms, stereo, one frame
    /// (RFC 6716 §3.1), so that tools which parse packet headers (ffprobe) accept the packets.
    static let opusTOC: UInt8 = (31 << 3) | (1 << 2)

    /// The bytes of Opus packet `packet`: a valid TOC byte, then pseudo-random bytes.
    func fillOpusPacket(_ packet: Int, into bytes: UnsafeMutableRawBufferPointer) {
        var generator = PayloadGenerator(seed: seed, stream: index, item: UInt64(packet))
        generator.fill(bytes)
        if !bytes.isEmpty { bytes[0] = Self.opusTOC }
    }

    /// The complete payload of AudioData `sequence`: Opus packets back to back, or PCM frames.
    func payload(ofSequence sequence: UInt64, sizes: [UInt32]) -> Data {
        let range = packets(ofSequence: sequence)
        switch codec {
        case .opus:
            let total = sizes.reduce(0) { $0 + Int($1) }
            var data = Data(count: total)
            data.withUnsafeMutableBytes { buffer in
                var offset = 0
                for (packet, size) in zip(range, sizes) {
                    fillOpusPacket(packet, into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + Int(size)]))
                    offset += Int(size)
                }
            }
            return data
        case .pcm:
            var data = Data(count: range.count * Int(format.bytesPerFrame))
            data.withUnsafeMutableBytes { buffer in
                var generator = PayloadGenerator(seed: seed, stream: index, item: sequence)
                generator.fill(buffer)
            }
            return data
        }
    }

    /// The AudioData message of `sequence`.
    func audioData(sequence: UInt64) -> Capture_V1_AudioData {
        let sizes = packetSizes(ofSequence: sequence)
        var message = Capture_V1_AudioData()
        message.sequence = sequence
        message.firstSampleTime = firstSampleTime(ofSequence: sequence)
        message.packetCount = UInt32(packets(ofSequence: sequence).count)
        message.packetSizes = sizes
        message.payload = payload(ofSequence: sequence, sizes: sizes)
        message.frameCount = UInt32(packets(ofSequence: sequence).count * framesPerPacket)
        if sendsLevels { message.levels = Self.steadyToneLevels }
        return message
    }

    /// What capture-send measures for a steady stereo tone peaking at −12 dBFS: RMS −15.01 dBFS,
    /// −12.7 LUFS momentary and short-term, true peak −12 dBTP.
    static let steadyToneLevels = Capture_V1_Levels.with {
        $0.peak = [1_200, 1_200]
        $0.rms = [1_501, 1_501]
        $0.momentaryLoudness = -1_270
        $0.shortTermLoudness = -1_270
        $0.truePeak = [-1_200, -1_200]
    }

    /// The RFC 7845 OpusHead a real Opus sender sends as its magic cookie (2 channels, mapping 0).
    var opusHead: Data {
        var bytes = Array("OpusHead".utf8)
        bytes.append(1)
        bytes.append(2)
        bytes.append(contentsOf: [UInt8(Self.opusPrimingFrames & 0xFF), UInt8(Self.opusPrimingFrames >> 8)])
        let rate = UInt32(Self.sampleRate)
        bytes.append(contentsOf: [0, 8, 16, 24].map { UInt8(truncatingIfNeeded: rate >> $0) })
        bytes.append(contentsOf: [0, 0, 0])
        return Data(bytes)
    }
}

/// The parameters shared by every stream of a run, from which each `StreamPlan` follows.
struct StreamShape: Sendable {
    var codec: LoadCodec
    var durationSeconds: Double
    var frameSeconds: Double
    var bitrate: Int
    var namePrefix: String
    var seed: UInt64
    /// Every AudioData carries levels and loudness, as capture-send's for a steady tone (`--levels`).
    var sendsLevels = false

    /// The stream name of stream `index`: the prefix and a zero-padded number.
    func streamName(index: Int) -> String {
        "\(namePrefix)-" + String(repeating: "0", count: max(0, 6 - String(index).count)) + String(index)
    }
}

/// A small, fast deterministic generator (SplitMix64) keyed by seed, stream and item, so that any
/// packet's bytes can be made again, by a resend or by the verifier, without keeping them.
struct PayloadGenerator {
    private var state: UInt64

    init(seed: UInt64, stream: Int, item: UInt64) {
        state = seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: stream) &* 0xBF58_476D_1CE4_E5B9 ^ item &* 0x94D0_49BB_1331_11EB
        _ = next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func fill(_ bytes: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset + 8 <= bytes.count {
            bytes.storeBytes(of: next().littleEndian, toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        if offset < bytes.count {
            var last = next()
            while offset < bytes.count {
                bytes[offset] = UInt8(truncatingIfNeeded: last)
                last >>= 8
                offset += 1
            }
        }
    }

    mutating func fill(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { fill($0) }
    }
}
