import CaptureCore
import CaptureReceiver
import CaptureSender
import Foundation

/// Fuzz target 3: arbitrary bytes as what a crash left on disk: a sender's spool segment (and its
/// `acked` file) and a receiver's position log. Invariants: the spool's recovery scan keeps a
/// contiguous run of sequences that each read back, with payloads inside the segment, and never
/// reports more acknowledged than it holds entries for beyond; a position log yields at most one
/// last record, whose values are the ones written in a whole record.
public enum SpoolChecks {
    public static func check(_ data: Data) {
        let bytes = Array(data)
        let half = bytes.isEmpty ? 0 : Int(bytes[0]) * bytes.count / 256
        checkSpool(segment: Array(bytes[..<half]), acked: Array(bytes.prefix(8)))
        checkPositionLog(Array(bytes[half...]))
    }

    private static func checkSpool(segment: [UInt8], acked: [UInt8]) {
        let root = FuzzScratch.folder()
        defer { FuzzScratch.remove(root) }
        let id = UUID(uuid: (1, 2, 3, 4, 5, 6, 0x40, 8, 0x80, 10, 11, 12, 13, 14, 15, 16))
        let meta = SpoolMeta(
            streamID: id, streamName: "fuzz", destination: SpoolDestination(address: "127.0.0.1:7373"),
            description: StreamDescription(format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 0)),
            resumeSecret: Array(repeating: 1, count: 32))
        let directory = root + "/" + id.uuidString.lowercased()
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard let json = try? JSONEncoder().encode(meta) else { return }
        FuzzScratch.write(Array(json), to: directory + "/meta.json")
        FuzzScratch.write(segment, to: directory + "/seg-00000000000000000001.spool")
        if acked.count == 8 { FuzzScratch.write(acked, to: directory + "/acked") }
        guard let spool = StreamSpool.inspect(directory: directory), let contents = try? spool.contents() else { return }
        var expected: UInt64?
        for entry in contents.entries {
            if let expected { precondition(entry.sequence == expected, "the recovered sequences are not contiguous") }
            expected = entry.sequence + 1
            precondition(entry.bytes >= 0 && entry.bytes <= segment.count, "an entry claims more bytes than the segment holds")
            guard let packet = try? spool.read(entry.location, sequence: entry.sequence) else {
                preconditionFailure("a recovered entry does not read back")
            }
            precondition(packet.sequence == entry.sequence, "an entry reads back as another sequence")
            precondition(packet.byteCount == entry.bytes, "an entry reads back with another size")
        }
    }

    private static func checkPositionLog(_ bytes: [UInt8]) {
        let folder = FuzzScratch.folder()
        defer { FuzzScratch.remove(folder) }
        let caf = folder + "/stream.caf"
        FuzzScratch.write(bytes, to: StreamPositionLog.path(for: caf))
        guard let record = try? StreamPositionLog.lastRecord(cafPath: caf) else { return }
        precondition(record.packets >= 0, "a position record with a negative packet count")
    }
}
