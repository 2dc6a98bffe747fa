import CaptureCore

/// Makes the encoder for a capture: what capture-send and any program embedding the sender use, so
/// that the choice (Opus straight at its own rates, resampled to 48 kHz first at any other) is made
/// in one place.
public enum AudioEncoders {
    /// Linear PCM, in the capture's own format.
    public static func pcm(for input: StreamFormat) throws(EncoderError) -> any AudioEncoder {
        try PCMEncoder(inputFormat: input)
    }

    /// Opus with `settings`: at 8, 12, 16, 24 or 48 kHz the capture is encoded as it is; at any
    /// other rate (44.1 kHz, 96 kHz…) it is resampled to 48 kHz with libsoxr first, its timeline exact.
    public static func opus(for input: StreamFormat, settings: OpusEncoderSettings = OpusEncoderSettings()) throws(EncoderError) -> any AudioEncoder {
        if ResamplingOpusEncoder.needsResampling(input) { return try ResamplingOpusEncoder(inputFormat: input, settings: settings) }
        return try OpusEncoder(inputFormat: input, settings: settings)
    }
}
