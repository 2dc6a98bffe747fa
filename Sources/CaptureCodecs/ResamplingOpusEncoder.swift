import COpus
import CSoxr
import CaptureCore

/// Opus from a source at a rate Opus does not run at (11.025, 22.05, 32, 44.1, 88.2, 96, 176.4,
/// 192 kHz...): the captured audio is resampled to 48 kHz with libsoxr (high quality, streaming, so
/// consecutive buffers join without a seam) and then encoded by an `OpusEncoder` at 48 kHz.
///
/// Timeline: every output count is at 48 kHz, as for `OpusEncoder`. The input's first sample maps to
/// 48 kHz time `first × 48000 / rate` (rounded); soxr compensates its own filter delay (its output
/// starts with the first input sample's time, and the flush at the end gives the rest), so the
/// resampled stream holds `round(input frames × 48000 / rate)` frames in step with the input, and the
/// priming is the Opus encoder's alone: decoded and trimmed by priming and remainder, the stream is
/// as long as the source, to the sample. A forward jump in the input's sample times (an overrun) is
/// resampled as silence, so the timeline stays whole (`fillsLostFrames`).
public final class ResamplingOpusEncoder: AudioEncoder {
    public let inputFormat: StreamFormat
    public var outputFormat: StreamFormat { opus.outputFormat }
    /// The stream's OpusHead: the 48 kHz encoder's, naming the source's rate as the input rate.
    public let opusHead: OpusHead
    public var magicCookie: [UInt8] { opusHead.bytes }
    public var primingFrames: Int { opus.primingFrames }
    public var maximumPacketSize: Int { opus.maximumPacketSize }
    public var fillsLostFrames: Bool { true }
    /// The 48 kHz encoder's label (`opus-64k-20ms`).
    public var encodingLabel: String { opus.encodingLabel }
    /// The input's sample time at 48 kHz, rounded to the nearest frame.
    public func outputSampleTime(ofInput sampleTime: Int64) -> Int64 { Int64((Double(sampleTime) * ratio).rounded()) }

    private let opus: OpusEncoder
    private let resampler: soxr_t
    private let channels: Int
    private let inputSample: PCMSampleFormat
    private let ratio: Double
    /// The input sample time the next buffer should start at; nil before the first buffer.
    private var nextInputSampleTime: Int64?
    /// The 48 kHz time of the next resampled frame.
    private var nextOutputSampleTime: Int64 = 0
    private var floats: [Float] = []
    private var resampled: [Float] = []
    private var finished: EncoderTail?

    /// Whether `format`'s rate needs this encoder (Opus does not run at it).
    public static func needsResampling(_ format: StreamFormat) -> Bool {
        guard let rate = Int(exactly: format.sampleRate) else { return true }
        return !OpusEncoderSettings.supportedSampleRates.contains(rate)
    }

    /// Creates an encoder for `inputFormat` (any rate from 8 to 192 kHz) with `settings`.
    public init(inputFormat: StreamFormat, settings: OpusEncoderSettings = OpusEncoderSettings()) throws(EncoderError) {
        let inputSample = try OpusEncoder.checkedInputSample(inputFormat)
        let channels = inputFormat.channelCount
        let opus = try OpusEncoder(inputFormat: .linearPCM(sampleRate: 48_000, channels: channels, sample: .f32), settings: settings)
        var error: soxr_error_t?
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
        guard let resampler = soxr_create(inputFormat.sampleRate, 48_000, UInt32(channels), &error, &io, &quality, nil), error == nil else {
            throw .invalidConfiguration("libsoxr cannot resample \(inputFormat.sampleRate) Hz to 48000 Hz for Opus: capture at 48000 Hz")
        }
        self.inputFormat = inputFormat
        self.opus = opus
        self.resampler = resampler
        self.channels = channels
        self.inputSample = inputSample
        self.ratio = 48_000 / inputFormat.sampleRate
        var head = opus.opusHead
        head.inputSampleRate = Int(inputFormat.sampleRate.rounded())
        self.opusHead = head
    }

    deinit { soxr_delete(resampler) }

    public func encode(_ buffer: CapturedBuffer) throws(EncoderError) -> EncodedPackets? {
        let frames = buffer.packetCount
        let start = buffer.startTime.sampleTime
        var collected: EncodedPackets?
        if let expected = nextInputSampleTime {
            guard start >= expected else {
                throw .invalidConfiguration(
                    "a captured buffer starts at sample \(start), before the end of the previous one (\(expected)): sample times must not go backward")
            }
            if start > expected { collected = try resample(silence: Int(start - expected)) }
        } else {
            let before = buffer.framesLostBefore + buffer.framesPausedBefore
            let first = start - Int64(before)
            nextOutputSampleTime = outputSampleTime(ofInput: first)
            if before > 0 { collected = try resample(silence: before) }
        }
        guard frames > 0 else {
            // A paused queue's report: the silence up to its start is all there is.
            nextInputSampleTime = start
            return collected
        }
        let byteCount = frames * Int(inputFormat.bytesPerFrame)
        guard buffer.bytes.count >= byteCount else {
            throw .invalidConfiguration(
                "a captured buffer says it holds \(frames) frames (\(byteCount) bytes) but has \(buffer.bytes.count) bytes: the capture source and queue disagree on the format")
        }
        floats.removeAll(keepingCapacity: true)
        floats.reserveCapacity(frames * channels)
        for index in 0..<frames * channels {
            floats.append(PCMSampleCodec.loadFloat(buffer.bytes, sampleIndex: index, format: inputSample))
        }
        nextInputSampleTime = start + Int64(frames)
        return Self.join(collected, try process(floats, frames: frames))
    }

    public func finish() throws(EncoderError) -> EncoderTail {
        if let finished { return finished }
        // The flush: soxr hands over what its filter still holds.
        let flushed = try process(nil, frames: 0)
        let tail = try opus.finish()
        let result = EncoderTail(packets: Self.join(flushed, tail.packets), remainderFrames: tail.remainderFrames)
        finished = result
        return result
    }

    private func resample(silence frames: Int) throws(EncoderError) -> EncodedPackets? {
        var collected: EncodedPackets?
        var left = frames
        while left > 0 {
            let piece = min(left, 48_000)
            collected = Self.join(collected, try process([Float](repeating: 0, count: piece * channels), frames: piece))
            left -= piece
        }
        return collected
    }

    /// Runs `input` (`frames` frames; nil: the flush at the end) through soxr and the resampled
    /// frames through Opus.
    private func process(_ input: [Float]?, frames: Int) throws(EncoderError) -> EncodedPackets? {
        let room = Int(Double(frames) * ratio) + 1_024
        if resampled.count < room * channels { resampled = [Float](repeating: 0, count: room * channels) }
        var collected: EncodedPackets?
        var consumed = 0
        while true {
            var inputDone = 0
            var outputDone = 0
            let error: soxr_error_t? = resampled.withUnsafeMutableBufferPointer { output in
                guard let input else { return soxr_process(resampler, nil, 0, nil, output.baseAddress, room, &outputDone) }
                return input.withUnsafeBufferPointer { inputBuffer in
                    soxr_process(
                        resampler, inputBuffer.baseAddress.map { $0 + consumed * channels }, frames - consumed, &inputDone,
                        output.baseAddress, room, &outputDone)
                }
            }
            if let error { throw .codecFailed("libsoxr failed to resample: \(String(cString: error))") }
            consumed += inputDone
            if outputDone > 0 {
                let time = nextOutputSampleTime
                let encoded: Result<EncodedPackets?, EncoderError> = resampled.withUnsafeBytes { bytes in
                    do throws(EncoderError) {
                        return .success(try opus.encode(CapturedBuffer(
                            bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<outputDone * channels * 4]),
                            startTime: CaptureTimestamp(sampleTime: time, hostTime: 0), packetCount: outputDone)))
                    } catch {
                        return .failure(error)
                    }
                }
                let packets = try encoded.get()
                nextOutputSampleTime += Int64(outputDone)
                collected = Self.join(collected, packets)
            }
            // Done when the input is taken and soxr had no more to give than fitted (or, flushing,
            // gave nothing more).
            if input == nil ? outputDone == 0 : (consumed >= frames && outputDone < room) || (inputDone == 0 && outputDone == 0) { break }
        }
        return collected
    }

    /// Two runs of packets as one (they are contiguous).
    private static func join(_ first: EncodedPackets?, _ second: EncodedPackets?) -> EncodedPackets? {
        guard var joined = first else { return second }
        guard let second else { return joined }
        joined.payload += second.payload
        joined.packetCount += second.packetCount
        joined.packetSizes += second.packetSizes
        joined.frameCount += second.frameCount
        return joined
    }
}
