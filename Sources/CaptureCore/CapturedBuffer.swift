/// When the first frame of a captured buffer was captured: its index on the stream's sample timeline
/// (counting every frame since the stream began, including frames lost in overruns) and the monotonic
/// host time at which the buffer was read, in nanoseconds. The counterpart of `AudioTimeStamp`'s
/// `mSampleTime` and `mHostTime`.
public struct CaptureTimestamp: Hashable, Sendable {
    /// Index of the first frame on the stream's timeline.
    public var sampleTime: Int64
    /// Monotonic clock reading (CLOCK_MONOTONIC) in nanoseconds when the buffer's read completed.
    public var hostTime: UInt64

    public init(sampleTime: Int64, hostTime: UInt64) {
        self.sampleTime = sampleTime
        self.hostTime = hostTime
    }
}

/// Where one packet of a variable bit rate buffer lies, as `AudioStreamPacketDescription`.
public struct PacketDescription: Hashable, Sendable {
    /// Offset of the packet's first byte in the buffer.
    public var startOffset: Int
    /// Frames the packet decodes to (0 means the format's `framesPerPacket`).
    public var variableFramesInPacket: Int
    /// Size of the packet in bytes.
    public var dataByteSize: Int

    public init(startOffset: Int, variableFramesInPacket: Int = 0, dataByteSize: Int) {
        self.startOffset = startOffset
        self.variableFramesInPacket = variableFramesInPacket
        self.dataByteSize = dataByteSize
    }
}

/// A filled buffer as the queue hands it to its callback, the counterpart of the arguments of
/// `HandleInputBuffer`: the audio, its start time, its packet count and (for VBR) its packet
/// descriptions. The memory belongs to the queue and is valid only during the callback; the buffer
/// goes back to the pool when the callback returns.
public struct CapturedBuffer {
    /// The captured bytes, `packetCount * format.bytesPerPacket` of them for PCM.
    public let bytes: UnsafeRawBufferPointer
    /// When the first frame was captured.
    public let startTime: CaptureTimestamp
    /// Packets in the buffer; for PCM, frames.
    public let packetCount: Int
    /// Packet descriptions for VBR data; empty for CBR (PCM).
    public let packetDescriptions: UnsafeBufferPointer<PacketDescription>
    /// Frames lost (overrun) immediately before this buffer; its `startTime.sampleTime` already
    /// counts them.
    public let framesLostBefore: Int
    /// Frames of a pause immediately before this buffer (capture paused, then resumed): the time
    /// the pause lasted, at the format's rate. Its `startTime.sampleTime` already counts them, so
    /// the timeline keeps going through a pause and the recording keeps wall-clock positions.
    public let framesPausedBefore: Int

    public init(
        bytes: UnsafeRawBufferPointer, startTime: CaptureTimestamp, packetCount: Int,
        packetDescriptions: UnsafeBufferPointer<PacketDescription> = UnsafeBufferPointer(start: nil, count: 0),
        framesLostBefore: Int = 0, framesPausedBefore: Int = 0
    ) {
        self.framesPausedBefore = framesPausedBefore
        self.bytes = bytes
        self.startTime = startTime
        self.packetCount = packetCount
        self.packetDescriptions = packetDescriptions
        self.framesLostBefore = framesLostBefore
    }
}
