import COpus
import CaptureCore

/// The Opus encoder stage over libopus: accumulates captured PCM buffers of any size into whole Opus
/// frames and emits one variable-size packet per frame (docs/OPUS.md has the full story).
///
/// - Input: interleaved little-endian PCM (s16, s24, s32, f32) at 8, 12, 16, 24 or 48 kHz with 1 to 8
///   channels. 1–2 channels use a plain libopus encoder; 3–8 use the multistream surround encoder
///   (RFC 7845 mapping family 1), which takes the channels in Vorbis order (for 5.1: FL, FC, FR, RL,
///   RR, LFE). s16 goes to libopus as 16-bit integers (exact), the others as floats.
/// - Output: `StreamFormat.opus` at 48 kHz, `framesPerPacket` = the frame duration at 48 kHz (960
///   for 20 ms) whatever the input rate. Packet sizes are in `EncodedPackets.packetSizes`.
/// - Timeline: every count (`firstSampleTime`, `frameCount`, `primingFrames`, `remainderFrames`) is in
///   48 kHz frames. Input sample time `s` at rate `r` is 48 kHz time `s * (48000 / r)`, exact because
///   48000 / r is an integer (6, 4, 3, 2 or 1). The first packet starts at the first buffer's sample
///   time so mapped (less the frames lost before it, `framesLostBefore`, which are encoded as silence);
///   packet `n` starts `n * framesPerPacket` later. Packets are contiguous: a forward jump in a
///   buffer's sample time (an overrun, a pause) is filled with encoded silence so that the packets
///   stay on the capture timeline, and the caller labels it with a filled gap instead of a gap
///   (`fillsLostFrames`); a backward jump is an error. An empty buffer (a paused queue's report)
///   fills up to its start.
/// - Priming: `primingFrames` is libopus's look-ahead (`OPUS_GET_LOOKAHEAD`) at 48 kHz, 312 for the
///   `audio` and `voip` applications, 120 for `lowdelay`. The decoded stream is the input delayed by
///   exactly that much; it is the RFC 7845 pre-skip and the CAF `mPrimingFrames`.
/// - End: `finish()` pads with silence until the input plus the priming fits in whole frames, so
///   that the decoder gives back every input frame, and reports the padding past the input's end as
///   `remainderFrames`. Valid frames = total − priming − remainder = the input's length at 48 kHz.
///   When input + priming is a whole number of frames, no padding is added.
public final class OpusEncoder: AudioEncoder {
    public let inputFormat: StreamFormat
    public let outputFormat: StreamFormat
    /// The settings the encoder runs with.
    public let settings: OpusEncoderSettings
    /// The RFC 7845 identification header this stream decodes with (pre-skip = `primingFrames`).
    public let opusHead: OpusHead
    /// `opusHead.bytes`: the codec configuration for the handshake (and a CAF `kuki`, see docs/OPUS.md).
    public var magicCookie: [UInt8] { opusHead.bytes }
    public let primingFrames: Int
    /// The bound libopus is given for every packet, so no packet is larger: per stream, 1275 bytes for
    /// each 20 ms (or shorter) Opus frame in the packet, plus 8 bytes of framing (TOC, frame count,
    /// frame lengths, and the self-delimiting length of a multistream packet), times the number of
    /// streams. 1283 for one stream at 2.5–20 ms, 2558 at 40 ms, 3833 at 60 ms; all within the 4000
    /// bytes per stream libopus's documentation recommends.
    public let maximumPacketSize: Int
    /// 48 kHz frames per input frame (48000 / input rate).
    public let timelineScale: Int

    /// Lost frames are encoded as silence: the packets cover the whole capture timeline.
    public var fillsLostFrames: Bool { true }
    /// `opus-BITRATE-FRAME`: `opus-64k-20ms` (bit rates that are not whole kb/s in b/s).
    public var encodingLabel: String { Self.label(settings) }

    /// The label of an Opus encoding with `settings`.
    static func label(_ settings: OpusEncoderSettings) -> String {
        let rate = settings.bitrate % 1_000 == 0 ? "\(settings.bitrate / 1_000)k" : "\(settings.bitrate)"
        let frame = settings.frameDuration.milliseconds
        let frameText = frame == frame.rounded() ? "\(Int(frame))ms" : "\(frame)ms"
        return "opus-\(rate)-\(frameText)"
    }

    /// The input's sample time at 48 kHz (× `timelineScale`).
    public func outputSampleTime(ofInput sampleTime: Int64) -> Int64 { sampleTime * Int64(timelineScale) }

    /// Gaps (forward jumps in sample time) longer than this many seconds are refused rather than
    /// filled with encoded silence.
    public static let maximumGapSeconds = 600

    private let codec: OpusCodecHandle
    private let inputSample: PCMSampleFormat
    private var frameBuffer: OpusFrameBuffer
    private var packetScratch: [UInt8]
    /// The input sample time the next buffer should start at; nil before the first buffer.
    private var nextInputSampleTime: Int64?
    /// The 48 kHz sample time of the first packet.
    private var firstOutputSampleTime: Int64 = 0
    private var packetsEmitted: Int64 = 0
    /// Input frames put on the timeline so far: audio and gap silence, not the final padding.
    private var timelineInputFrames: Int64 = 0
    private var finishedRemainder: Int?

    /// The sample format of a valid interleaved little-endian PCM input; throws what is wrong with any other.
    static func checkedInputSample(_ inputFormat: StreamFormat) throws(EncoderError) -> PCMSampleFormat {
        guard let inputSample = inputFormat.pcmSampleFormat else {
            throw .invalidConfiguration("the Opus encoder takes interleaved little-endian PCM: the input is \(inputFormat)")
        }
        do {
            try inputFormat.validate()
        } catch {
            throw .invalidConfiguration("the Opus encoder's input format is unusable: \(error)")
        }
        return inputSample
    }

    /// Creates an encoder for `inputFormat` with `settings`; throws a message that says what to
    /// change when Opus cannot take the input or the settings.
    public init(inputFormat: StreamFormat, settings: OpusEncoderSettings = OpusEncoderSettings()) throws(EncoderError) {
        try settings.validate(for: inputFormat)
        let inputSample = try Self.checkedInputSample(inputFormat)
        let sampleRate = Int(inputFormat.sampleRate)
        let channels = inputFormat.channelCount
        let codec = try OpusCodecHandle(sampleRate: sampleRate, channels: channels, application: settings.application)
        try codec.set(OPUS_SET_BITRATE_REQUEST, Int32(settings.bitrate), what: "bitrate")
        try codec.set(OPUS_SET_COMPLEXITY_REQUEST, Int32(settings.complexity), what: "complexity")
        try codec.set(OPUS_SET_VBR_REQUEST, settings.bitrateMode == .cbr ? 0 : 1, what: "VBR")
        if settings.bitrateMode != .cbr {
            try codec.set(OPUS_SET_VBR_CONSTRAINT_REQUEST, settings.bitrateMode == .cvbr ? 1 : 0, what: "VBR constraint")
        }
        let lookahead = Int(try codec.get(OPUS_GET_LOOKAHEAD_REQUEST, what: "its look-ahead"))

        let scale = 48_000 / sampleRate
        let framesPerPacket = settings.frameDuration.frames(atSampleRate: 48_000)
        let opusFramesPerPacket = max(1, settings.frameDuration.microseconds / 20_000)
        let perStreamBound = 1_275 * opusFramesPerPacket + 8

        self.inputFormat = inputFormat
        self.settings = settings
        self.codec = codec
        self.inputSample = inputSample
        self.timelineScale = scale
        self.primingFrames = lookahead * scale
        self.maximumPacketSize = perStreamBound * codec.streamCount
        self.outputFormat = StreamFormat.opus(channels: channels, framesPerPacket: framesPerPacket)
        self.opusHead = OpusHead(
            channelCount: channels, preSkip: lookahead * scale, inputSampleRate: sampleRate,
            mappingFamily: codec.mappingFamily, streamCount: codec.streamCount,
            coupledStreamCount: codec.coupledStreamCount, channelMapping: codec.channelMapping
        )
        self.frameBuffer = OpusFrameBuffer(
            inputSample: inputSample, channels: channels, frameSize: settings.frameDuration.frames(atSampleRate: sampleRate)
        )
        self.packetScratch = [UInt8](repeating: 0, count: perStreamBound * codec.streamCount)
    }

    public func encode(_ buffer: CapturedBuffer) throws(EncoderError) -> EncodedPackets? {
        guard finishedRemainder == nil else {
            throw .invalidConfiguration("the Opus encoder has finished its stream: create a new encoder for a new stream")
        }
        let frames = buffer.packetCount
        let byteCount = frames * Int(inputFormat.bytesPerFrame)
        guard buffer.bytes.count >= byteCount else {
            throw .invalidConfiguration(
                "a captured buffer says it holds \(frames) frames (\(byteCount) bytes) but has \(buffer.bytes.count) bytes: the capture source and queue disagree on the format"
            )
        }
        var collector = PacketCollector(firstPacketIndex: packetsEmitted)
        let startTime = buffer.startTime.sampleTime
        let expected: Int64
        if let nextInputSampleTime {
            expected = nextInputSampleTime
        } else {
            // Frames lost before the first buffer are on the stream's timeline too: the packets
            // start where they would have, and the lost stretch becomes silence like any other.
            expected = startTime - Int64(buffer.framesLostBefore) - Int64(buffer.framesPausedBefore)
            guard expected >= 0 else {
                throw .invalidConfiguration(
                    "the first captured buffer starts at sample \(startTime) but says \(buffer.framesLostBefore) frames were lost and \(buffer.framesPausedBefore) paused before it: the capture source and queue disagree on the timeline"
                )
            }
            firstOutputSampleTime = expected * Int64(timelineScale)
        }
        let gap = startTime - expected
        guard gap >= 0 else {
            throw .invalidConfiguration(
                "a captured buffer starts at sample \(startTime), before the end of the previous one (\(expected)): sample times must not go backward"
            )
        }
        // A pause is as long as the person recording wants; it comes in pieces (`CaptureQueue`).
        guard gap - Int64(buffer.framesPausedBefore) <= Int64(Self.maximumGapSeconds) * Int64(inputFormat.sampleRate) else {
            throw .invalidConfiguration(
                "a gap of \(gap) frames before sample \(startTime) is longer than \(Self.maximumGapSeconds) s: end this stream and start a new one"
            )
        }
        if gap > 0 { try appendSilence(frames: Int(gap), to: &collector) }
        if frames > 0 { try appendAudio(buffer.bytes, frames: frames, to: &collector) }
        nextInputSampleTime = startTime + Int64(frames)
        return packets(from: collector)
    }

    public func finish() throws(EncoderError) -> EncoderTail {
        if let finishedRemainder { return EncoderTail(packets: nil, remainderFrames: finishedRemainder) }
        guard nextInputSampleTime != nil else {
            finishedRemainder = 0
            return EncoderTail(packets: nil, remainderFrames: 0)
        }
        let frameSize = Int64(frameBuffer.frameSize)
        let primingInputFrames = Int64(primingFrames / timelineScale)
        let framesToDecode = timelineInputFrames + primingInputFrames
        let packetCount = (framesToDecode + frameSize - 1) / frameSize
        let padding = packetCount * frameSize - timelineInputFrames
        var collector = PacketCollector(firstPacketIndex: packetsEmitted)
        try appendSilence(frames: Int(padding), to: &collector, countsOnTimeline: false)
        let totalFrames = packetsEmitted * Int64(outputFormat.framesPerPacket)
        let remainder = Int(totalFrames - Int64(primingFrames) - timelineInputFrames * Int64(timelineScale))
        finishedRemainder = remainder
        return EncoderTail(packets: packets(from: collector), remainderFrames: remainder)
    }

    // MARK: - Accumulation

    /// Packets completed during one call, back to back.
    private struct PacketCollector {
        let firstPacketIndex: Int64
        var payload: [UInt8] = []
        var sizes: [UInt32] = []
    }

    private func packets(from collector: PacketCollector) -> EncodedPackets? {
        guard !collector.sizes.isEmpty else { return nil }
        let framesPerPacket = Int(outputFormat.framesPerPacket)
        return EncodedPackets(
            payload: collector.payload, packetCount: collector.sizes.count, packetSizes: collector.sizes,
            firstSampleTime: firstOutputSampleTime + collector.firstPacketIndex * Int64(framesPerPacket),
            frameCount: collector.sizes.count * framesPerPacket
        )
    }

    private func appendAudio(
        _ bytes: UnsafeRawBufferPointer, frames: Int, to collector: inout PacketCollector
    ) throws(EncoderError) {
        var done = 0
        while done < frames {
            done += frameBuffer.fill(from: bytes, format: inputSample, startFrame: done, frameCount: frames - done)
            if frameBuffer.isFull { try encodeFrame(into: &collector) }
        }
        timelineInputFrames += Int64(frames)
    }

    private func appendSilence(
        frames: Int, to collector: inout PacketCollector, countsOnTimeline: Bool = true
    ) throws(EncoderError) {
        var done = 0
        while done < frames {
            done += frameBuffer.fillSilence(frameCount: frames - done)
            if frameBuffer.isFull { try encodeFrame(into: &collector) }
        }
        if countsOnTimeline { timelineInputFrames += Int64(frames) }
    }

    private func encodeFrame(into collector: inout PacketCollector) throws(EncoderError) {
        let frameSize = frameBuffer.frameSize
        let capacity = packetScratch.count
        let codec = codec
        let result: Int32
        switch frameBuffer.kind {
        case .int16:
            result = frameBuffer.int16Samples.withUnsafeBufferPointer { samples in
                packetScratch.withUnsafeMutableBufferPointer { packet in
                    guard let input = samples.baseAddress, let output = packet.baseAddress else { return OPUS_BAD_ARG }
                    return codec.encode(int16: input, frameSize: frameSize, into: output, capacity: capacity)
                }
            }
        case .float:
            result = frameBuffer.floatSamples.withUnsafeBufferPointer { samples in
                packetScratch.withUnsafeMutableBufferPointer { packet in
                    guard let input = samples.baseAddress, let output = packet.baseAddress else { return OPUS_BAD_ARG }
                    return codec.encode(float: input, frameSize: frameSize, into: output, capacity: capacity)
                }
            }
        }
        guard result > 0 else {
            throw .codecFailed("libopus could not encode a frame: \(OpusCodecHandle.message(result))")
        }
        collector.payload.append(contentsOf: packetScratch[0..<Int(result)])
        collector.sizes.append(UInt32(result))
        packetsEmitted += 1
        frameBuffer.reset()
    }
}
