import CaptureCore
import CaptureWire

/// What is durable of a stream, in both of its counts: the wire's (a `StreamPosition`: sequence and
/// sample time) and the file's (packets). Sequences count AudioData and Gap messages, the CAF file
/// counts packets; this record ties them together so a restarted receiver resumes exactly where it
/// acknowledged.
public struct StreamPositionRecord: Sendable, Equatable {
    /// The highest sequence durably written (0: none) and the sample index just past the durable audio.
    public var position: StreamPosition
    /// Packets in the CAF file at that point.
    public var packets: Int64

    public init(position: StreamPosition, packets: Int64) {
        self.position = position
        self.packets = packets
    }
}

/// The position log kept beside a stream's CAF file while it records: `<file>.caf.position`.
///
/// Format: the 8-byte magic `CAPRPOS1`, then 32-byte records appended one after another: sequence
/// (UInt64), sample time (Int64), packets (Int64), `RecordChecksum` of the preceding 24 bytes
/// (UInt64), all big-endian. The receiver writes a record only after the CAF file and its journal are
/// durable up to the position it describes, makes the record durable, and only then sends the Ack: so
/// the last intact record is never behind what the sender was told, and never claims audio the file
/// lacks after a crash (the `WriterPool`'s sync round: data sync, records, record sync). A torn last record (a crash mid-write) fails its checksum and is
/// ignored. On reopening, the log is rewritten with its last record only.
///
/// The log holds no open file between records: a record is written by opening the log, writing and
/// closing it (the sync round's `syncfs` makes it durable), so a recording stream costs the receiver
/// three descriptors (its connection, its CAF file and the packet journal) instead of four.
public final class StreamPositionLog {
    /// The file name suffix.
    public static let suffix = ".position"
    static let magic: [UInt8] = Array("CAPRPOS1".utf8)
    static let recordSize = 32

    /// The log's path.
    public let path: String
    private var length: Int64

    private init(path: String, length: Int64) {
        self.path = path
        self.length = length
    }

    /// The position log's path for a CAF file.
    public static func path(for cafPath: String) -> String { cafPath + suffix }

    /// Creates (or replaces) the log for `cafPath` holding `initial`, durably.
    public static func create(cafPath: String, initial: StreamPositionRecord) throws(DurableFileError) -> StreamPositionLog {
        let path = path(for: cafPath)
        try DurableFile.replaceAtomically(path: path, with: magic + encode(initial))
        return StreamPositionLog(path: path, length: Int64(magic.count + recordSize))
    }

    /// Creates the log of a CAF file that was just created (none can exist), holding `initial`, and
    /// leaves it to the next sync round to make durable: until then the file holds nothing
    /// acknowledged, and a crash before the round leaves at most an empty recording.
    public static func createForNewFile(cafPath: String, initial: StreamPositionRecord) throws(DurableFileError) -> StreamPositionLog {
        let path = path(for: cafPath)
        let file = try DurableFile.open(path: path, create: true, truncate: true)
        defer { file.close() }
        try file.write(magic + encode(initial), at: 0)
        return StreamPositionLog(path: path, length: Int64(magic.count + recordSize))
    }

    /// The last intact record of the log beside `cafPath`; nil when there is no log or no intact record.
    public static func lastRecord(cafPath: String) throws(DurableFileError) -> StreamPositionRecord? {
        guard let file = try DurableFile.openForReading(path: path(for: cafPath)) else { return nil }
        defer { file.close() }
        return try lastRecord(length: try file.length()) { (count, offset) throws(DurableFileError) in try file.read(count: count, at: offset) }
    }

    /// The last intact record of a log `length` bytes long whose bytes `read(count, offset)` gives:
    /// the step the file's reader and the `spool` fuzz target (in memory) share. Walks back from the
    /// last whole record to the first that passes its checksum and holds sane values.
    public static func lastRecord<Failure: Error>(
        length: Int64, read: (Int, Int64) throws(Failure) -> [UInt8]
    ) throws(Failure) -> StreamPositionRecord? {
        guard length >= Int64(magic.count + recordSize) else { return nil }
        guard try read(magic.count, 0) == magic else { return nil }
        var offset = Int64(magic.count) + (length - Int64(magic.count)) / Int64(recordSize) * Int64(recordSize) - Int64(recordSize)
        while offset >= Int64(magic.count) {
            if let record = decode(try read(recordSize, offset)) { return record }
            offset -= Int64(recordSize)
        }
        return nil
    }

    /// The highest value a record's counts may hold (2^62, as the protocol's sequences): a record
    /// beyond is damage, and a resume point computed from it can never overflow.
    static let maximumCount: Int64 = 1 << 62

    /// Appends `record` and makes it durable.
    public func append(_ record: StreamPositionRecord) throws(DurableFileError) {
        try write(record)
        try synchronize()
    }

    /// Appends `record` without making it durable: a sync round makes many logs durable at once.
    /// Call it only once the audio the record describes is durable.
    public func write(_ record: StreamPositionRecord) throws(DurableFileError) {
        let file = try DurableFile.open(path: path, create: false)
        defer { file.close() }
        try file.write(Self.encode(record), at: length)
        length += Int64(Self.recordSize)
    }

    /// Makes the records written so far durable (fdatasync).
    public func synchronize() throws(DurableFileError) {
        let file = try DurableFile.open(path: path, create: false)
        defer { file.close() }
        try file.synchronize()
    }

    /// Removes the log beside `cafPath` (a finished file needs none).
    public static func remove(cafPath: String) throws(DurableFileError) {
        try DurableFile.remove(path(for: cafPath))
    }

    static func encode(_ record: StreamPositionRecord) -> [UInt8] {
        var writer = BinaryRecordWriter(reservingCapacity: recordSize)
        writer.append(record.position.lastSequence)
        writer.append(record.position.endSampleTime)
        writer.append(record.packets)
        writer.append(RecordChecksum.of(writer.bytes))
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) -> StreamPositionRecord? {
        guard bytes.count == recordSize else { return nil }
        var reader = BinaryRecordReader(bytes[...])
        guard let sequence = reader.readUInt64(), let sampleTime = reader.readInt64(), let packets = reader.readInt64(),
            let checksum = reader.readUInt64(), checksum == RecordChecksum.of(bytes[0..<24]),
            sequence <= UInt64(maximumCount), sampleTime >= 0, sampleTime <= maximumCount, packets >= 0, packets <= maximumCount
        else { return nil }
        return StreamPositionRecord(position: StreamPosition(lastSequence: sequence, endSampleTime: sampleTime), packets: packets)
    }
}
