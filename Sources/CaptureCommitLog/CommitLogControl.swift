import CaptureCore

/// The commit log's control file: which log this is, how it is cut into segments, which opening
/// writes now, and where replay starts (the last checkpoint). Like PostgreSQL's `pg_control`, it is
/// small, checksummed, and replaced atomically (temporary file, fdatasync, rename, folder fsync), so
/// a crash leaves the old one or the new one.
///
/// Layout (little-endian, 56 bytes): magic "CLC1", format version, segment size, log id, epoch,
/// checkpoint position, the epoch of the batch that ends at the checkpoint, checksum of the rest.
public struct CommitLogControl: Equatable, Sendable {
    /// The log's identity, random at creation; every batch carries it.
    public var logID: UInt64
    /// How the log is cut into segments (fixed when the log is created).
    public var geometry: LogGeometry
    /// The latest opening of the log; batches carry the epoch that wrote them.
    public var epoch: UInt64
    /// Where replay starts: everything before it is in the recordings, durably.
    public var checkpoint: LogPosition
    /// The epoch of the batch that ends at `checkpoint` (0 at the log's start).
    public var checkpointEpoch: UInt64

    public init(logID: UInt64, geometry: LogGeometry, epoch: UInt64, checkpoint: LogPosition, checkpointEpoch: UInt64) {
        self.logID = logID
        self.geometry = geometry
        self.epoch = epoch
        self.checkpoint = checkpoint
        self.checkpointEpoch = checkpointEpoch
    }

    static let fileName = "control"
    static let size = 56
    private static let magic: UInt32 = 0x3143_4C43  // "CLC1"
    private static let version: UInt32 = 1

    /// The file's bytes.
    public var encoded: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Self.size)
        let fields: [(UInt64, Int)] = [(geometry.segmentSize, 8), (logID, 16), (epoch, 24), (checkpoint.offset, 32), (checkpointEpoch, 40)]
        LittleEndianFields.put(Self.magic, into: &bytes, at: 0)
        LittleEndianFields.put(Self.version, into: &bytes, at: 4)
        for (value, offset) in fields { LittleEndianFields.put(value, into: &bytes, at: offset) }
        LittleEndianFields.put(RecordChecksum.of(bytes[0..<48]), into: &bytes, at: 48)
        return bytes
    }

    /// Decodes the file's bytes; the reason when they are not a control file of this version.
    public static func decode(_ bytes: [UInt8]) -> Result<CommitLogControl, ControlDamage> {
        guard bytes.count == size else { return .failure(.wrongSize(bytes.count)) }
        func get<Value: FixedWidthInteger>(_ type: Value.Type, _ offset: Int) -> Value { LittleEndianFields.get(type, bytes[...], offset) }
        guard get(UInt32.self, 0) == magic else { return .failure(.notAControlFile) }
        guard get(UInt64.self, 48) == RecordChecksum.of(bytes[0..<48]) else { return .failure(.checksumMismatch) }
        let version = get(UInt32.self, 4)
        guard version == Self.version else { return .failure(.unknownVersion(version)) }
        guard let geometry = LogGeometry(segmentSize: get(UInt64.self, 8)) else { return .failure(.impossibleSegmentSize(get(UInt64.self, 8))) }
        let control = CommitLogControl(
            logID: get(UInt64.self, 16), geometry: geometry, epoch: get(UInt64.self, 24),
            checkpoint: LogPosition(get(UInt64.self, 32)), checkpointEpoch: get(UInt64.self, 40))
        guard control.checkpointEpoch <= control.epoch, control.checkpoint.offset % LogGeometry.alignment == 0 else {
            return .failure(.inconsistent)
        }
        return .success(control)
    }

    /// Why bytes are not a control file.
    public enum ControlDamage: Error, Equatable, Sendable, CustomStringConvertible {
        case wrongSize(Int)
        case notAControlFile
        case checksumMismatch
        case unknownVersion(UInt32)
        case impossibleSegmentSize(UInt64)
        case inconsistent

        public var description: String {
            switch self {
            case .wrongSize(let count): return "\(count) bytes instead of \(CommitLogControl.size)"
            case .notAControlFile: return "not a commit log control file"
            case .checksumMismatch: return "its checksum does not match"
            case .unknownVersion(let version): return "format version \(version), which this receiver does not know: use a newer receiver"
            case .impossibleSegmentSize(let size): return "a segment size of \(size) bytes"
            case .inconsistent: return "its checkpoint does not fit the rest"
            }
        }
    }
}
