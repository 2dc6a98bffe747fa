/// Reads and adjusts an Opus identification header (RFC 7845 §5.1) for a listener's Ogg stream.
///
/// A listener joins mid-stream, so its decoder starts cold: the stream it gets begins with a
/// pre-roll of recent packets, and the header's pre-skip is raised to cover at least that pre-roll
/// (RFC 7845 §4.2: 80 ms), so that the first sample the listener hears decodes cleanly.
struct ListenOpusHead: Equatable, Sendable {
    /// The header as the stream declared it (its magic cookie).
    let bytes: [UInt8]

    /// Output channels the header declares.
    var channelCount: Int { Int(bytes[9]) }
    /// The declared pre-skip, in 48 kHz samples.
    var preSkip: Int { Int(bytes[10]) | Int(bytes[11]) << 8 }

    /// Checks `bytes` is an OpusHead: the magic, version 1, 1 to 8 channels, and the mapping table
    /// when the mapping family needs one.
    init(_ bytes: [UInt8]) throws(ListenError) {
        guard bytes.count >= 19, Array(bytes[0..<8]) == Array("OpusHead".utf8) else {
            throw .unsupportedStream("its Opus configuration (magic cookie) is not an Opus identification header, so it cannot be played")
        }
        guard bytes[8] & 0xF0 == 0 else {
            throw .unsupportedStream("its Opus identification header has version \(bytes[8]), which this receiver does not know")
        }
        let channels = Int(bytes[9])
        guard (1...8).contains(channels) else {
            throw .unsupportedStream("its Opus identification header declares \(channels) channels; 1 to 8 can be played")
        }
        if bytes[18] != 0 {
            guard bytes.count >= 21 + channels else {
                throw .unsupportedStream("its Opus identification header is cut short (no channel mapping table)")
            }
        }
        self.bytes = bytes
    }

    /// The same header with pre-skip raised to at least `minimumPreSkip` samples.
    func withPreSkip(atLeast minimumPreSkip: Int) -> [UInt8] {
        let value = UInt16(clamping: max(preSkip, minimumPreSkip))
        var out = bytes
        out[10] = UInt8(truncatingIfNeeded: value)
        out[11] = UInt8(truncatingIfNeeded: value >> 8)
        return out
    }
}
