/// The Opus identification header of RFC 7845 §5.1 ("OpusHead"), which `OpusEncoder` vends as its
/// magic cookie: everything a decoder needs to set itself up (channels, pre-skip, channel mapping).
///
/// Layout, little-endian: "OpusHead" (8 bytes), version 1, channel count, pre-skip (u16, 48 kHz
/// frames), input sample rate (u32, informational), output gain (i16, Q7.8 dB, 0 here), mapping
/// family (u8); for a family other than 0, stream count, coupled stream count and one mapping byte
/// per channel follow. 19 bytes for mono and stereo, 21 + channels for surround.
public struct OpusHead: Equatable, Sendable {
    /// Output channels.
    public var channelCount: Int
    /// Frames at 48 kHz to drop from the start of the decoded stream (the encoder's priming).
    public var preSkip: Int
    /// The sample rate of the encoder's input, for information (decoders run at 48 kHz or any rate).
    public var inputSampleRate: Int
    /// RFC 7845 channel mapping family: 0 (mono/stereo, one stream) or 1 (Vorbis order, up to 8).
    public var mappingFamily: UInt8
    /// Streams per packet (family 1 only).
    public var streamCount: Int
    /// Coupled (stereo) streams among them (family 1 only).
    public var coupledStreamCount: Int
    /// The channel mapping table (family 1 only).
    public var channelMapping: [UInt8]

    public init(
        channelCount: Int, preSkip: Int, inputSampleRate: Int, mappingFamily: UInt8 = 0,
        streamCount: Int = 1, coupledStreamCount: Int = 0, channelMapping: [UInt8] = []
    ) {
        self.channelCount = channelCount
        self.preSkip = preSkip
        self.inputSampleRate = inputSampleRate
        self.mappingFamily = mappingFamily
        self.streamCount = streamCount
        self.coupledStreamCount = coupledStreamCount
        self.channelMapping = channelMapping
    }

    /// The header's bytes.
    public var bytes: [UInt8] {
        var out = Array("OpusHead".utf8)
        out.append(1)  // version
        out.append(UInt8(truncatingIfNeeded: channelCount))
        appendLittleEndian(UInt16(truncatingIfNeeded: preSkip), to: &out)
        appendLittleEndian(UInt32(truncatingIfNeeded: inputSampleRate), to: &out)
        appendLittleEndian(UInt16(0), to: &out)  // output gain
        out.append(mappingFamily)
        if mappingFamily != 0 {
            out.append(UInt8(truncatingIfNeeded: streamCount))
            out.append(UInt8(truncatingIfNeeded: coupledStreamCount))
            out.append(contentsOf: channelMapping)
        }
        return out
    }

    private func appendLittleEndian<Value: FixedWidthInteger>(_ value: Value, to out: inout [UInt8]) {
        for shift in stride(from: 0, to: Value.bitWidth, by: 8) {
            out.append(UInt8(truncatingIfNeeded: value >> shift))
        }
    }
}
