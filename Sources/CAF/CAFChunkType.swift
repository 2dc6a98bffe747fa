/// The four-character chunk types this module writes or understands.
enum CAFChunkType {
    static let fileType: UInt32 = 0x6361_6666  // 'caff'
    static let description: UInt32 = 0x6465_7363  // 'desc'
    static let channelLayout: UInt32 = 0x6368_616E  // 'chan'
    static let information: UInt32 = 0x696E_666F  // 'info'
    static let magicCookie: UInt32 = 0x6B75_6B69  // 'kuki'
    static let packetTable: UInt32 = 0x7061_6B74  // 'pakt'
    static let audioData: UInt32 = 0x6461_7461  // 'data'
    static let marker: UInt32 = 0x6D61_726B  // 'mark'
    static let strings: UInt32 = 0x7374_7267  // 'strg'
    static let free: UInt32 = 0x6672_6565  // 'free'

    /// Bytes of a chunk header: type (4) and size (8).
    static let headerSize: Int64 = 12
    /// Bytes of the file header: 'caff', version (2), flags (2).
    static let fileHeaderSize: Int64 = 8
    /// Bytes of the audio description chunk's body.
    static let descriptionSize: Int64 = 32
    /// The chunk size that means "the data chunk runs to the end of the file".
    static let sizeUnknown: Int64 = -1

    /// The four characters of a chunk type, for messages.
    static func name(_ type: UInt32) -> String {
        let bytes = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: type >> $0) }
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return String(decoding: bytes, as: UTF8.self)
        }
        return "0x" + String(type, radix: 16)
    }

    /// A complete chunk: header and body.
    static func chunk(_ type: UInt32, body: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(type)
        writer.append(Int64(body.count))
        writer.append(contentsOf: body)
        return writer.bytes
    }
}

/// Audio channel layout tags for the CAF `chan` chunk, with Core Audio's values.
public enum CAFChannelLayoutTag {
    /// `kAudioChannelLayoutTag_Mono`: one channel, C.
    public static let mono: UInt32 = (100 << 16) | 1
    /// `kAudioChannelLayoutTag_Stereo`: two channels, L R.
    public static let stereo: UInt32 = (101 << 16) | 2
    /// `kAudioChannelLayoutTag_DiscreteInOrder` with `channels` channels: numbered channels, no roles.
    public static func discreteInOrder(channels: Int) -> UInt32 {
        (147 << 16) | UInt32(truncatingIfNeeded: channels & 0xFFFF)
    }
    /// `kAudioChannelLayoutTag_UseChannelDescriptions`: the layout is given channel by channel.
    public static let useChannelDescriptions: UInt32 = 0

    /// The layout the writer uses when none is given: mono, stereo, otherwise discrete in order.
    public static func `default`(channels: Int) -> UInt32 {
        switch channels {
        case 1: return mono
        case 2: return stereo
        default: return discreteInOrder(channels: channels)
        }
    }
}
