import CAF
import Foundation

/// Fuzz target 2: arbitrary bytes as a CAF file (or an unfinished one, with its packet-table journal
/// when the input carries one after a separator), read and then recovered as after a crash.
/// Invariants: reading never claims more audio bytes than the file holds; a recovered file reads
/// back finalized with the packets and frames recovery reported.
public enum CAFChecks {
    /// Splits the input into the CAF bytes and the journal bytes at the first `JRNL` marker.
    static let separator = Array("\nJRNL\n".utf8)

    public static func check(_ data: Data) {
        let bytes = Array(data)
        var caf = bytes
        var journal: [UInt8]?
        if let range = bytes.firstRange(of: separator) {
            caf = Array(bytes[..<range.lowerBound])
            journal = Array(bytes[range.upperBound...])
        }
        let folder = FuzzScratch.folder()
        let path = folder + "/fuzz.caf"
        FuzzScratch.write(caf, to: path)
        if let journal { FuzzScratch.write(journal, to: path + ".pakt-journal") }
        defer { FuzzScratch.remove(folder) }
        if let file = try? CAFFile.read(path: path) {
            precondition(file.dataOffset >= 0 && file.dataSize >= 0, "negative data chunk")
            precondition(file.dataOffset + file.dataSize <= Int64(caf.count) || file.dataSize == 0 || !file.isFinalized,
                         "a finalized file claims more audio than it holds")
            _ = try? file.readAudioData()
        }
        guard let report = try? CAFRecovery.recover(path: path) else { return }
        guard let recovered = try? CAFFile.read(path: path) else {
            preconditionFailure("recovery reported success but the file does not read back: \(report)")
        }
        precondition(recovered.isFinalized, "recovery left the file unfinalized")
        if let packets = recovered.packetCount {
            precondition(packets == report.packetCount, "recovery reported \(report.packetCount) packets, the file says \(packets)")
        }
        precondition(recovered.dataOffset + recovered.dataSize <= Int64((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0),
                     "the recovered file claims more audio than it holds")
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
        FileManager.default.createFile(atPath: path, contents: Data(bytes))
    }

    static func remove(_ folder: String) {
        try? FileManager.default.removeItem(atPath: folder)
    }
}
