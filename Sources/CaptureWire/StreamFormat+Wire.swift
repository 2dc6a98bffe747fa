import CaptureCore

extension Capture_V1_StreamFormat {
    /// The wire form of a stream format, field for field.
    public init(_ format: StreamFormat) {
        self.init()
        sampleRate = format.sampleRate
        formatID = format.formatID.rawValue
        formatFlags = format.formatFlags.rawValue
        bytesPerPacket = format.bytesPerPacket
        framesPerPacket = format.framesPerPacket
        bytesPerFrame = format.bytesPerFrame
        channelsPerFrame = format.channelsPerFrame
        bitsPerChannel = format.bitsPerChannel
    }
}

extension StreamFormat {
    /// The stream format a wire message describes, validated: an invalid or unsupported format
    /// throws `WireError.badFormat` with the `StreamFormatError` that says why.
    public init(wire: Capture_V1_StreamFormat) throws(WireError) {
        self.init(
            sampleRate: wire.sampleRate, formatID: AudioFormatID(rawValue: wire.formatID),
            formatFlags: AudioFormatFlags(rawValue: wire.formatFlags), bytesPerPacket: wire.bytesPerPacket,
            framesPerPacket: wire.framesPerPacket, bytesPerFrame: wire.bytesPerFrame,
            channelsPerFrame: wire.channelsPerFrame, bitsPerChannel: wire.bitsPerChannel
        )
        do throws(StreamFormatError) {
            try validate()
        } catch {
            throw .badFormat(error)
        }
    }
}

extension Capture_V1_ClockState {
    /// The wire value of a clock state.
    public init(_ clock: ClockSynchronization) {
        switch clock {
        case .synchronized: self = .synchronized
        case .unsynchronized: self = .unsynchronized
        case .unknown: self = .unknown
        }
    }

    /// The clock state a wire value says (an unknown future value: unknown).
    public var clockSynchronization: ClockSynchronization {
        switch self {
        case .synchronized: return .synchronized
        case .unsynchronized: return .unsynchronized
        default: return .unknown
        }
    }
}

extension ValidatedHello {
    /// The channel layout the Hello gives (checked against the format); nil when it gives none.
    public var channelLayout: ChannelLayout? {
        message.hasChannelLayout ? ChannelLayout(tag: message.channelLayout.tag, bitmap: message.channelLayout.bitmap) : nil
    }
}
