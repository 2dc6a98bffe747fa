/// A place in a receiver's commit log: the byte offset in the endless log that its fixed-size
/// segment files cut into pieces (PostgreSQL calls it an LSN). Positions only grow; a segment file
/// recycled for a later stretch of the log holds positions that no longer match, which is how a
/// reader tells old bytes from new ones.
public struct LogPosition: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The byte offset from the log's beginning.
    public var offset: UInt64

    public init(_ offset: UInt64) { self.offset = offset }

    /// The log's first byte.
    public static let start = LogPosition(0)

    public static func < (lhs: LogPosition, rhs: LogPosition) -> Bool { lhs.offset < rhs.offset }

    public var description: String { "log position \(offset)" }
}

/// How the endless log is cut into segment files of one size: which segment holds a position,
/// where it begins, and how much room is left in it.
public struct LogGeometry: Sendable, Equatable {
    /// Bytes in each segment file (a multiple of `LogGeometry.alignment`).
    public let segmentSize: UInt64

    /// Batches start on this alignment (and so every header lies whole within a segment).
    public static let alignment: UInt64 = 8
    /// The smallest segment allowed: room for a batch of modest records.
    public static let minimumSegmentSize: UInt64 = 64 << 10
    /// The largest: a segment is zero-filled when made, and a position stays far from overflow.
    public static let maximumSegmentSize: UInt64 = 1 << 32

    /// A geometry of `segmentSize` bytes per segment, or nil when that size is out of range or
    /// not aligned.
    public init?(segmentSize: UInt64) {
        guard segmentSize >= Self.minimumSegmentSize, segmentSize <= Self.maximumSegmentSize, segmentSize % Self.alignment == 0 else { return nil }
        self.segmentSize = segmentSize
    }

    /// The number of the segment holding `position`.
    public func segment(of position: LogPosition) -> UInt64 { position.offset / segmentSize }

    /// Where segment `number` begins.
    public func start(ofSegment number: UInt64) -> LogPosition { LogPosition(number * segmentSize) }

    /// `position`'s offset inside its segment file.
    public func offsetInSegment(_ position: LogPosition) -> Int64 { Int64(position.offset % segmentSize) }

    /// Bytes from `position` to the end of its segment.
    public func room(at position: LogPosition) -> UInt64 { segmentSize - position.offset % segmentSize }
}
