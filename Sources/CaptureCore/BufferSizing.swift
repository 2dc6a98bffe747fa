/// Buffer sizing after Apple's `DeriveBufferSize` (Audio Queue Services, "Write a Function to Derive
/// Recording Audio Queue Buffer Size").
public enum BufferSizing {
    /// The upper bound of a buffer, 0x50000 bytes (320 KiB): about 5 s of 96 kHz 24-bit stereo.
    public static let maximumBufferSize = 0x50000

    /// The byte size of a buffer that holds `seconds` of audio in `format`, capped at
    /// `maximumBufferSize`. For a variable bit rate format (`bytesPerPacket` == 0) the encoder's
    /// maximum packet size stands in for the packet size, as in the original.
    ///
    /// - Parameters:
    ///   - format: the stream's format.
    ///   - seconds: the audio each buffer should hold; 0.5 s is the document's usual choice.
    ///   - maximumPacketSize: the largest packet the encoder can produce, used only for VBR formats.
    public static func deriveBufferSize(format: StreamFormat, seconds: Double, maximumPacketSize: Int = 0) -> Int {
        let packetSize = format.bytesPerPacket != 0 ? Int(format.bytesPerPacket) : maximumPacketSize
        // The original multiplies the sample rate by the packet size, which counts packets of one
        // frame; dividing by frames per packet keeps it right for VBR formats too.
        let packetsPerSecond = format.sampleRate / Double(max(format.framesPerPacket, 1))
        let bytesForTime = packetsPerSecond * Double(packetSize) * seconds
        guard bytesForTime.isFinite, bytesForTime > 0 else { return 0 }
        return bytesForTime < Double(maximumBufferSize) ? Int(bytesForTime) : maximumBufferSize
    }

    /// The number of whole PCM frames a capture buffer of the derived size holds (at least one):
    /// the buffer holds `duration` of audio in `format`, capped at `maximumBufferSize` bytes.
    public static func framesPerBuffer(format: StreamFormat, duration: Duration) -> Int {
        let bytes = deriveBufferSize(format: format, seconds: duration.inSeconds)
        let frameSize = max(Int(format.bytesPerFrame), 1)
        return max(bytes / frameSize, 1)
    }
}
