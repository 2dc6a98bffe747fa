import CSndFile

/// Between libsndfile's channel maps (`SF_CHANNEL_MAP_*` per channel) and channel masks (the bits
/// of WAVE_FORMAT_EXTENSIBLE, which are Core Audio's `AudioChannelBitmap` bits): bit n is the n-th
/// position below.
public enum SndFileChannelMask {
    /// libsndfile's positions in mask bit order.
    public static let positions: [Int32] = [
        Int32(SF_CHANNEL_MAP_LEFT), Int32(SF_CHANNEL_MAP_RIGHT), Int32(SF_CHANNEL_MAP_CENTER), Int32(SF_CHANNEL_MAP_LFE),
        Int32(SF_CHANNEL_MAP_REAR_LEFT), Int32(SF_CHANNEL_MAP_REAR_RIGHT), Int32(SF_CHANNEL_MAP_FRONT_LEFT_OF_CENTER),
        Int32(SF_CHANNEL_MAP_FRONT_RIGHT_OF_CENTER), Int32(SF_CHANNEL_MAP_REAR_CENTER), Int32(SF_CHANNEL_MAP_SIDE_LEFT),
        Int32(SF_CHANNEL_MAP_SIDE_RIGHT), Int32(SF_CHANNEL_MAP_TOP_CENTER), Int32(SF_CHANNEL_MAP_TOP_FRONT_LEFT),
        Int32(SF_CHANNEL_MAP_TOP_FRONT_CENTER), Int32(SF_CHANNEL_MAP_TOP_FRONT_RIGHT), Int32(SF_CHANNEL_MAP_TOP_REAR_LEFT),
        Int32(SF_CHANNEL_MAP_TOP_REAR_CENTER), Int32(SF_CHANNEL_MAP_TOP_REAR_RIGHT),
    ]

    /// The mask of a channel map; nil when it names a position a mask cannot, or not in the mask's
    /// ascending order (a mask cannot reorder channels).
    public static func mask(of map: [Int32]) -> UInt32? {
        var mask: UInt32 = 0
        var lastBit = -1
        for position in map {
            guard let bit = positions.firstIndex(of: position), bit > lastBit else { return nil }
            mask |= 1 << UInt32(bit)
            lastBit = bit
        }
        return mask == 0 ? nil : mask
    }

    /// The channel map of a mask: its set bits' positions, in ascending order.
    public static func map(of mask: UInt32) -> [Int32] {
        positions.enumerated().filter { mask & (1 << UInt32($0.offset)) != 0 }.map(\.element)
    }
}
