import CaptureCommitLog
import CaptureCore
import CaptureWire
import Foundation

/// One change a round made to a stream's file, as the commit log carries it: replayed in order
/// onto the file as it was before the round (`LoggedRound.packetsBefore`), it writes the same bytes
/// at the same offsets, however often it is replayed.
enum FileOperation: Equatable, Sendable {
    /// Audio appended: the bytes, the packet sizes (variable bit rate; empty for linear PCM) and
    /// the frames they hold.
    case audio(payload: [UInt8], packetSizes: [UInt32], frameCount: Int)
    /// Linear PCM silence appended over a gap (a hole in the file).
    case silence(frames: Int64)
    /// A marker added at a frame position of the file.
    case marker(framePosition: Int64, name: String)
}

/// What one round appended to one stream's file: the file's packets before it, the operations, and
/// the stream position they bring the file to (the position the round acknowledges).
struct LoggedRound: Equatable, Sendable {
    /// Packets the file held before the round's first operation.
    var packetsBefore: Int64
    /// The stream position after the round (sequence, sample time, and the file's packets).
    var position: StreamPositionRecord
    var operations: [FileOperation]
}

/// Names the file that a stream number's later rounds are about: the stream's id (to claim it in
/// the stream index at replay) and the file's path relative to the output folder. The receiver
/// writes it before a stream's first round after each checkpoint and whenever the stream moves to
/// another file (a segment cut), so replay from a checkpoint never needs a record before it.
struct LoggedFile: Equatable, Sendable {
    var stream: UUID
    var relativePath: String
}

/// The receiver's records in its commit log (docs/DURABILITY.md, "The commit log"): the log knows
/// kinds, subjects and bodies; this says what they mean. The subject is the stream's number in this
/// receiver's run.
///
/// Bodies (integers big-endian):
/// - kind 1, file: stream id (16 bytes), then the relative path's UTF-8 bytes.
/// - kind 2, round: packets before (Int64); position after: sequence (UInt64), sample time (Int64),
///   packets (Int64); operation count (UInt32); then each operation: a tag byte and
///   - `A` audio: frame count (UInt32), packet count (UInt32), the sizes (UInt32 each), payload
///     length (UInt32), payload;
///   - `S` silence: frames (Int64);
///   - `M` marker: frame position (Int64), name length (UInt32), the name's UTF-8 bytes.
enum ReceiverLogRecord: Equatable, Sendable {
    case file(LoggedFile)
    case round(LoggedRound)

    static let fileKind: UInt8 = 1
    static let roundKind: UInt8 = 2
    static let audioTag = UInt8(ascii: "A")
    static let silenceTag = UInt8(ascii: "S")
    static let markerTag = UInt8(ascii: "M")

    /// The log record for `subject`.
    func encoded(subject: UInt64) -> CommitLogRecord {
        switch self {
        case .file(let file):
            var writer = BinaryRecordWriter(reservingCapacity: 16 + file.relativePath.utf8.count)
            writer.append(contentsOf: file.stream.wireBytes)
            writer.append(contentsOf: file.relativePath.utf8)
            return CommitLogRecord(kind: Self.fileKind, subject: subject, body: writer.bytes)
        case .round(let round):
            var body = RoundRecordBody()
            for operation in round.operations { body.append(operation) }
            return CommitLogRecord(kind: Self.roundKind, subject: subject, body: body.take(packetsBefore: round.packetsBefore, position: round.position))
        }
    }

    /// The record a log record holds; nil when it is not one of the receiver's (or is malformed:
    /// the log's checksum passed, so that would be a bug, and replay reports it).
    init?(_ record: CommitLogRecord) {
        var reader = BinaryRecordReader(record.body[...])
        switch record.kind {
        case Self.fileKind:
            guard let id = reader.readBytes(16), let stream = UUID(wireBytes: Data(id)),
                  let path = String(validating: reader.readRest(), as: UTF8.self), !path.isEmpty
            else { return nil }
            self = .file(LoggedFile(stream: stream, relativePath: path))
        case Self.roundKind:
            guard let before = reader.readInt64(), let sequence = reader.readUInt64(), let sampleTime = reader.readInt64(),
                  let packets = reader.readInt64(), let count = reader.readUInt32(), before >= 0, packets >= before
            else { return nil }
            var operations: [FileOperation] = []
            for _ in 0..<count {
                switch reader.readUInt8() {
                case Self.audioTag:
                    guard let frames = reader.readUInt32(), let sizeCount = reader.readUInt32() else { return nil }
                    var sizes: [UInt32] = []
                    sizes.reserveCapacity(Int(min(sizeCount, 4096)))
                    for _ in 0..<sizeCount {
                        guard let size = reader.readUInt32() else { return nil }
                        sizes.append(size)
                    }
                    guard let length = reader.readUInt32(), let payload = reader.readBytes(Int(length)) else { return nil }
                    operations.append(.audio(payload: Array(payload), packetSizes: sizes, frameCount: Int(frames)))
                case Self.silenceTag:
                    guard let frames = reader.readInt64(), frames > 0 else { return nil }
                    operations.append(.silence(frames: frames))
                case Self.markerTag:
                    guard let position = reader.readInt64(), let length = reader.readUInt32(), let bytes = reader.readBytes(Int(length)),
                          let name = String(validating: bytes, as: UTF8.self)
                    else { return nil }
                    operations.append(.marker(framePosition: position, name: name))
                default:
                    return nil
                }
            }
            guard reader.readRest().isEmpty else { return nil }
            self = .round(LoggedRound(
                packetsBefore: before, position: StreamPositionRecord(position: StreamPosition(lastSequence: sequence, endSampleTime: sampleTime), packets: packets), operations: operations))
        default:
            return nil
        }
    }
}
