import CTimex

/// Whether this machine's clock is disciplined by a time service (NTP, PTP) right now, as the kernel
/// says (`adjtimex(2)`, a read-only query any user may make). A sender stamps each stream's start
/// with the wall clock and reports this beside it, so whoever reads a recording's timestamps knows
/// whether to trust them.
public enum ClockSynchronization: String, Sendable, Codable, Equatable {
    /// The kernel's clock is synchronized (adjtimex returns a state other than `TIME_ERROR`).
    case synchronized
    /// The clock runs free: its time may be off by any amount.
    case unsynchronized
    /// Not known: the query failed, or the stream predates the report.
    case unknown

    /// The clock's state now.
    public static func current() -> ClockSynchronization {
        var query = timex()
        query.modes = 0
        let state = adjtimex(&query)
        if state < 0 { return .unknown }
        return state == TIME_ERROR ? .unsynchronized : .synchronized
    }
}

/// What each channel of a stream carries, as Core Audio's `AudioChannelLayout` without channel
/// descriptions: `tag` 0x10000 (`kAudioChannelLayoutTag_UseChannelBitmap`) with `bitmap` naming the
/// channels present, in order (the bits of a WAVE_FORMAT_EXTENSIBLE channel mask: 0x1 front left,
/// 0x2 front right, 0x4 front center, 0x8 LFE, 0x10 back left, 0x20 back right, 0x200 side left,
/// 0x400 side right, ...), or a predefined Core Audio layout tag (low 16 bits: the channel count).
public struct ChannelLayout: Sendable, Codable, Equatable, Hashable {
    /// Core Audio's tag for a layout given by its bitmap.
    public static let bitmapTag: UInt32 = 0x10000

    public var tag: UInt32
    public var bitmap: UInt32

    public init(tag: UInt32, bitmap: UInt32 = 0) {
        self.tag = tag
        self.bitmap = bitmap
    }

    /// The layout of a WAVE_FORMAT_EXTENSIBLE channel mask; nil for a mask of no channels.
    public init?(channelMask: UInt32) {
        guard channelMask != 0 else { return nil }
        self.init(tag: Self.bitmapTag, bitmap: channelMask)
    }

    /// The channels it names: the bitmap's bits, or a predefined tag's low 16 bits.
    public var channelCount: Int { tag == Self.bitmapTag ? bitmap.nonzeroBitCount : Int(tag & 0xFFFF) }
}
