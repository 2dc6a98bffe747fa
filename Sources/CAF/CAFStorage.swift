#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the CAF code reads and rewrites a file through: a file on disk (`PosixFile`) or its bytes
/// in memory (`CAFMemoryFile`, for `CAFFile.read(bytes:name:)` and `CAFRecovery.recover(bytes:…)`).
/// Parsing, recovery and finishing run the same code on both; only the disk has something to
/// make durable.
protocol CAFStorage: AnyObject {
    /// The name errors give: the file's path, or the name a buffer was given.
    var path: String { get }
    /// Where a `CAFFile` parsed from this storage reads its audio later.
    var origin: CAFFile.Origin { get }
    func length() throws(CAFError) -> Int64
    /// Up to `count` bytes at `offset`; fewer only at the end.
    func read(count: Int, at offset: Int64) throws(CAFError) -> [UInt8]
    func write(_ bytes: [UInt8], at offset: Int64) throws(CAFError)
    func truncate(to length: Int64) throws(CAFError)
    func synchronizeData() throws(CAFError)
    func synchronizeAll() throws(CAFError)
    func close()
}

extension PosixFile: CAFStorage {
    var origin: CAFFile.Origin { .file }
}

/// A CAF file's bytes in memory, read and rewritten as `PosixFile` reads and rewrites a file.
final class CAFMemoryFile: CAFStorage {
    let path: String
    private(set) var bytes: [UInt8]

    init(path: String, bytes: [UInt8]) {
        self.path = path
        self.bytes = bytes
    }

    var origin: CAFFile.Origin { .memory(bytes) }

    func length() -> Int64 { Int64(bytes.count) }

    func read(count: Int, at offset: Int64) throws(CAFError) -> [UInt8] {
        guard offset >= 0, count >= 0 else { throw .io(operation: "reading", path: path, errno: EINVAL) }
        guard offset < Int64(bytes.count) else { return [] }
        let start = Int(offset)
        return Array(bytes[start..<(start + min(count, bytes.count - start))])
    }

    func write(_ new: [UInt8], at offset: Int64) throws(CAFError) {
        // Like pwrite, a write past the end fills the gap with zeros; the CAF code writes only
        // within the file or at its end.
        guard offset >= 0, offset <= Int64(bytes.count) else { throw .io(operation: "writing", path: path, errno: EINVAL) }
        let start = Int(offset)
        let overlap = min(new.count, bytes.count - start)
        bytes.replaceSubrange(start..<(start + overlap), with: new[0..<overlap])
        bytes.append(contentsOf: new[overlap...])
    }

    func truncate(to length: Int64) throws(CAFError) {
        // Recovery and resume only ever cut a file short.
        guard length >= 0, length <= Int64(bytes.count) else { throw .io(operation: "truncating", path: path, errno: EINVAL) }
        bytes.removeSubrange(Int(length)...)
    }

    func synchronizeData() {}
    func synchronizeAll() {}
    func close() {}
}
