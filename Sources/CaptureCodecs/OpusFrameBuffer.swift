import CaptureCore

/// One Opus frame being filled from captured buffers of any size, in the sample type libopus takes:
/// 16-bit integers for s16 input (`opus_encode`, exact), floats for s24, s32 and f32
/// (`opus_encode_float`).
struct OpusFrameBuffer {
    /// The sample type handed to libopus.
    enum SampleKind {
        case int16
        case float
    }

    let kind: SampleKind
    let channels: Int
    /// Input frames in one Opus frame.
    let frameSize: Int
    /// Frames filled so far.
    private(set) var filledFrames = 0
    private(set) var int16Samples: [Int16]
    private(set) var floatSamples: [Float]

    init(inputSample: PCMSampleFormat, channels: Int, frameSize: Int) {
        kind = inputSample == .s16 ? .int16 : .float
        self.channels = channels
        self.frameSize = frameSize
        int16Samples = kind == .int16 ? [Int16](repeating: 0, count: frameSize * channels) : []
        floatSamples = kind == .float ? [Float](repeating: 0, count: frameSize * channels) : []
    }

    /// Whether the frame is complete and ready to encode.
    var isFull: Bool { filledFrames == frameSize }

    /// Copies frames from `bytes` (interleaved `format` samples), starting at frame `startFrame`, until
    /// the frame is full or `frameCount` frames are taken; returns how many frames were taken.
    mutating func fill(
        from bytes: UnsafeRawBufferPointer, format: PCMSampleFormat, startFrame: Int, frameCount: Int
    ) -> Int {
        let taken = min(frameCount, frameSize - filledFrames)
        let firstSample = startFrame * channels
        let destination = filledFrames * channels
        let sampleCount = taken * channels
        switch kind {
        case .int16:
            int16Samples.withUnsafeMutableBufferPointer { samples in
                for index in 0..<sampleCount {
                    samples[destination + index] = PCMSampleCodec.loadInt16(
                        bytes, sampleIndex: firstSample + index, format: format
                    )
                }
            }
        case .float:
            floatSamples.withUnsafeMutableBufferPointer { samples in
                for index in 0..<sampleCount {
                    samples[destination + index] = PCMSampleCodec.loadFloat(
                        bytes, sampleIndex: firstSample + index, format: format
                    )
                }
            }
        }
        filledFrames += taken
        return taken
    }

    /// Adds up to `frameCount` frames of silence (until the frame is full); returns how many were added.
    mutating func fillSilence(frameCount: Int) -> Int {
        let taken = min(frameCount, frameSize - filledFrames)
        let range = (filledFrames * channels)..<((filledFrames + taken) * channels)
        switch kind {
        case .int16:
            int16Samples.withUnsafeMutableBufferPointer { samples in
                for index in range { samples[index] = 0 }
            }
        case .float:
            floatSamples.withUnsafeMutableBufferPointer { samples in
                for index in range { samples[index] = 0 }
            }
        }
        filledFrames += taken
        return taken
    }

    /// Starts the next frame.
    mutating func reset() { filledFrames = 0 }
}
