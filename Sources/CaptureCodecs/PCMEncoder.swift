import CaptureCore

/// The linear PCM "encoder": passes interleaved little-endian PCM through as constant bit rate
/// packets of one frame, optionally converting the sample encoding (for example s24 capture stored
/// as s32, or f32 capture stored as s16). See `PCMSampleCodec` for the exact rounding and clipping
/// rules; widening between integer widths is exact.
///
/// Each `encode(_:)` returns the buffer's frames as they are, with `firstSampleTime` equal to the
/// buffer's `startTime.sampleTime`, so a capture overrun shows as a jump in `firstSampleTime` that
/// the caller records as a gap. There is no priming, padding or magic cookie.
public final class PCMEncoder: AudioEncoder {
    public let inputFormat: StreamFormat
    public let outputFormat: StreamFormat
    public var magicCookie: [UInt8] { [] }
    public var primingFrames: Int { 0 }
    /// PCM skips lost frames: the caller records them as a gap.
    public var fillsLostFrames: Bool { false }
    /// `pcm-SAMPLE-RATE`: `pcm-s16-48000`.
    public var encodingLabel: String { "pcm-\(outputFormat.pcmSampleFormat?.rawValue ?? "pcm")-\(Int(outputFormat.sampleRate.rounded()))" }
    /// PCM keeps the capture's timeline.
    public func outputSampleTime(ofInput sampleTime: Int64) -> Int64 { sampleTime }
    /// One frame: a PCM packet is one frame.
    public var maximumPacketSize: Int { Int(outputFormat.bytesPerPacket) }

    private let inputSample: PCMSampleFormat
    private let outputSample: PCMSampleFormat

    /// Creates a pass-through encoder for `inputFormat`, converting samples to `outputSample` when it is
    /// given and differs from the input's.
    public init(inputFormat: StreamFormat, outputSample: PCMSampleFormat? = nil) throws(EncoderError) {
        guard let inputSample = inputFormat.pcmSampleFormat else {
            throw .invalidConfiguration(
                "the PCM encoder takes interleaved little-endian PCM (s16, s24, s32 or f32); the input is \(inputFormat): capture as PCM"
            )
        }
        do {
            try inputFormat.validate()
        } catch {
            throw .invalidConfiguration("the PCM encoder's input format is unusable: \(error)")
        }
        let target = outputSample ?? inputSample
        self.inputFormat = inputFormat
        self.inputSample = inputSample
        self.outputSample = target
        self.outputFormat = StreamFormat.linearPCM(
            sampleRate: inputFormat.sampleRate, channels: inputFormat.channelCount, sample: target
        )
    }

    public func encode(_ buffer: CapturedBuffer) throws(EncoderError) -> EncodedPackets? {
        let frames = buffer.packetCount
        guard frames > 0 else { return nil }
        let inputBytes = frames * Int(inputFormat.bytesPerFrame)
        guard buffer.bytes.count >= inputBytes else {
            throw .invalidConfiguration(
                "a captured buffer says it holds \(frames) frames (\(inputBytes) bytes) but has \(buffer.bytes.count) bytes: the capture source and queue disagree on the format"
            )
        }
        let payload: [UInt8]
        if inputSample == outputSample {
            payload = Array(buffer.bytes.prefix(inputBytes))
        } else {
            let samples = frames * inputFormat.channelCount
            let source = buffer.bytes
            let (inputSample, outputSample) = (inputSample, outputSample)
            payload = [UInt8](unsafeUninitializedCapacity: samples * outputSample.bytesPerSample) { output, count in
                let raw = UnsafeMutableRawBufferPointer(output)
                for index in 0..<samples {
                    PCMSampleCodec.convert(
                        source, sampleIndex: index, from: inputSample, to: outputSample, into: raw, sampleOffset: index
                    )
                }
                count = samples * outputSample.bytesPerSample
            }
        }
        return EncodedPackets(
            payload: payload, packetCount: frames, packetSizes: [],
            firstSampleTime: buffer.startTime.sampleTime, frameCount: frames
        )
    }

    /// PCM holds nothing back: no packets, no remainder.
    public func finish() throws(EncoderError) -> EncoderTail {
        EncoderTail(packets: nil, remainderFrames: 0)
    }
}
