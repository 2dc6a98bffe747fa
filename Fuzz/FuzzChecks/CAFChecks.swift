import CAF
import Foundation

/// Fuzz target 2: arbitrary bytes as a CAF file (or an unfinished one, with its packet-table journal
/// when the input carries one after a separator), read and then recovered as after a crash, all in
/// memory: `CAFFile.read(bytes:name:)` and `CAFRecovery.recover(bytes:journal:name:)` run the same
/// parsing, recovery decisions and writes as on disk, against a buffer.
/// Invariants: reading never claims more audio, packets or frames than the file holds; a recovered
/// file reads back finalized with the packets, frames and bytes recovery reported, and recovering
/// it again changes nothing.
public enum CAFChecks {
    /// Splits the input into the CAF bytes and the journal bytes at the first `JRNL` marker.
    static let separator = Array("\nJRNL\n".utf8)
    static let name = "fuzz.caf"

    public static func check(_ data: Data) {
        let bytes = Array(data)
        var caf = bytes
        var journal: [UInt8]?
        if let start = firstIndex(of: separator, in: bytes) {
            caf = Array(bytes[..<start])
            journal = Array(bytes[(start + separator.count)...])
        }
        if let file = try? CAFFile.read(bytes: caf, name: name) {
            checkHoldsWhatItClaims(file, length: caf.count)
        }
        var recovered = caf
        guard let report = try? CAFRecovery.recover(bytes: &recovered, journal: journal, name: name) else { return }
        guard let file = try? CAFFile.read(bytes: recovered, name: name) else {
            preconditionFailure("recovery reported success but the file does not read back: \(report)")
        }
        precondition(file.isFinalized, "recovery left the file unfinalized")
        checkHoldsWhatItClaims(file, length: recovered.count)
        precondition(file.packetCount ?? 0 == report.packetCount, "recovery reported \(report.packetCount) packets, the file says \(String(describing: file.packetCount))")
        precondition(file.totalFrames ?? 0 == report.frameCount, "recovery reported \(report.frameCount) frames, the file says \(String(describing: file.totalFrames))")
        precondition(file.dataSize == report.dataByteCount, "recovery reported \(report.dataByteCount) bytes of audio, the file holds \(file.dataSize)")
        precondition(file.markers.count == report.markerCount, "recovery reported \(report.markerCount) markers, the file has \(file.markers.count)")
        var again = recovered
        guard let second = try? CAFRecovery.recover(bytes: &again, journal: nil, name: name) else {
            preconditionFailure("a recovered file cannot be recovered again: \(report)")
        }
        precondition(second.wasAlreadyFinalized && again == recovered, "recovering a recovered file changed it")
    }

    /// Where `pattern` first occurs in `bytes` (a plain scan: Foundation's `firstRange` costs a
    /// tenth of an execution).
    static func firstIndex(of pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        for start in 0...(bytes.count - pattern.count) where bytes[start] == pattern[0] {
            if bytes[start..<(start + pattern.count)].elementsEqual(pattern) { return start }
        }
        return nil
    }

    /// The data lies inside the file; packets and frames fit in the data; a packet table's frames
    /// fit in its packets; every packet reads back at its size.
    static func checkHoldsWhatItClaims(_ file: CAFFile, length: Int) {
        precondition(file.dataOffset >= 0 && file.dataSize >= 0, "negative data chunk")
        precondition(file.dataOffset + file.dataSize <= Int64(length), "the file claims more audio than it holds")
        let format = file.format
        if let packets = file.packetCount {
            precondition(packets >= 0, "a negative packet count")
            if format.bytesPerPacket > 0 {
                precondition(packets * Int64(format.bytesPerPacket) <= file.dataSize, "more packets than the data holds")
            }
            if let frames = file.totalFrames {
                precondition(frames >= 0, "a negative frame count")
                if format.framesPerPacket > 0 {
                    precondition(frames == packets * Int64(format.framesPerPacket), "frames are not packets times frames per packet")
                }
            }
        }
        if let table = file.packetTable, let frames = file.totalFrames {
            precondition(table.validFrames + Int64(table.primingFrames) + Int64(table.remainderFrames) <= frames,
                         "the packet table claims more frames than its packets hold")
        }
        guard let audio = try? file.readAudioData() else { preconditionFailure("the audio the file claims does not read") }
        precondition(Int64(audio.count) == file.dataSize, "the audio read back is not the data's size")
        if let packets = file.packetCount, packets > 0 {
            guard let last = try? file.readPacket(packets - 1) else { preconditionFailure("the last packet does not read") }
            if format.bytesPerPacket > 0 {
                precondition(last.count == Int(format.bytesPerPacket), "a packet reads back at another size")
            } else if let size = file.packetTable?.packetSizes.last {
                precondition(last.count == Int(size), "a packet reads back at another size")
            }
        }
    }
}

/// Temporary folders for fuzz inputs that must be files.
enum FuzzScratch {
    static func folder() -> String {
        let path = NSTemporaryDirectory() + "fuzz-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func write(_ bytes: [UInt8], to path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    }

    static func remove(_ folder: String) {
        try? FileManager.default.removeItem(atPath: folder)
    }
}
