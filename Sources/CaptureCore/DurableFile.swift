#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a `DurableFile` operation failed: the operation, the file and the system's reason.
public struct DurableFileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was being done ("writing", "fdatasync"...).
    public var operation: String
    /// The file.
    public var path: String
    /// The `errno` value.
    public var code: Int32

    public init(operation: String, path: String, code: Int32) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    /// True when the disk (or quota) is full.
    public var isNoSpace: Bool { code == ENOSPC || code == EDQUOT }

    public var description: String {
        let reason = String(cString: strerror(code))
        var text = "\(operation) \(path) failed: \(reason)"
        if isNoSpace { text += "; free some space on that disk" }
        if code == EACCES || code == EPERM { text += "; check the folder's permissions" }
        return text
    }
}

/// A file descriptor for small journals and spools that must survive a crash: writes at explicit
/// offsets (no user-space buffer), `fdatasync`, and directory syncs, each retrying on `EINTR` and
/// completing short reads and writes. Used by the receiver's stream position log and the sender's
/// spool. Not thread-safe: use it from one thread or serial queue at a time.
public final class DurableFile {
    /// The file's path (changed by `rename(to:)`).
    public private(set) var path: String
    private var descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit { close() }

    /// Opens `path` for reading and writing, creating it when `create` (refusing symbolic links).
    /// With `truncate` the file is emptied.
    public static func open(path: String, create: Bool, truncate: Bool = false) throws(DurableFileError) -> DurableFile {
        var flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC
        if create { flags |= O_CREAT }
        if truncate { flags |= O_TRUNC }
        let descriptor = retrying { Glibc.open(path, flags, mode_t(0o644)) }
        guard descriptor >= 0 else { throw DurableFileError(operation: "opening", path: path, code: errno) }
        return DurableFile(path: path, descriptor: descriptor)
    }

    /// Opens an existing file read-only; nil when it does not exist.
    public static func openForReading(path: String) throws(DurableFileError) -> DurableFile? {
        let descriptor = retrying { Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw DurableFileError(operation: "opening", path: path, code: errno)
        }
        return DurableFile(path: path, descriptor: descriptor)
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(DurableFileError) {
        try write(bytes, UnsafeRawBufferPointer(start: nil, count: 0), at: offset)
    }

    /// Writes `head` and then `tail` at `offset` with one `pwritev`, so that a payload can be written
    /// behind its header without first being copied next to it.
    public func write(_ head: UnsafeRawBufferPointer, _ tail: UnsafeRawBufferPointer, at offset: Int64) throws(DurableFileError) {
        let failure = PositionalWrite.write(head, tail, to: descriptor, at: offset)
        guard failure == 0 else { throw DurableFileError(operation: "writing", path: path, code: failure) }
    }

    /// Writes `head` and then `tail` at `offset` with one `pwritev` (no copy of either).
    public func write(_ head: [UInt8], _ tail: [UInt8], at offset: Int64) throws(DurableFileError) {
        let result: Result<Void, DurableFileError> = head.withUnsafeBytes { headBytes in
            tail.withUnsafeBytes { tailBytes in
                do throws(DurableFileError) {
                    try write(headBytes, tailBytes, at: offset)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
        }
        try result.get()
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: [UInt8], at offset: Int64) throws(DurableFileError) {
        try write(bytes, [], at: offset)
    }

    /// Reads up to `count` bytes at `offset` (fewer at the end of the file).
    public func read(count: Int, at offset: Int64) throws(DurableFileError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let result = bytes.withUnsafeMutableBytes { raw in
                retrying { pread(descriptor, raw.baseAddress.map { $0 + filled }, count - filled, off_t(offset) + off_t(filled)) }
            }
            if result == 0 { break }
            guard result > 0 else { throw DurableFileError(operation: "reading", path: path, code: errno) }
            filled += result
        }
        bytes.removeLast(count - filled)
        return bytes
    }

    /// The file's length in bytes.
    public func length() throws(DurableFileError) -> Int64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw DurableFileError(operation: "examining", path: path, code: errno) }
        return Int64(status.st_size)
    }

    /// Cuts the file to `length` bytes.
    public func truncate(to length: Int64) throws(DurableFileError) {
        guard retrying({ ftruncate(descriptor, off_t(length)) }) == 0 else {
            throw DurableFileError(operation: "truncating", path: path, code: errno)
        }
    }

    /// `fdatasync`: everything written so far survives a crash or a power loss.
    public func synchronize() throws(DurableFileError) {
        guard retrying({ fdatasync(descriptor) }) == 0 else {
            throw DurableFileError(operation: "fdatasync of", path: path, code: errno)
        }
    }

    /// Takes an exclusive advisory lock without waiting; false when another process holds it. The
    /// lock is released when the file is closed or the process ends (even by SIGKILL).
    public func tryLock() -> Bool {
        flock(descriptor, LOCK_EX | LOCK_NB) == 0
    }

    /// Gives the open file another name in the same file system (`rename(2)`, replacing whatever
    /// `newPath` named); the descriptor stays open and keeps its contents.
    public func rename(to newPath: String) throws(DurableFileError) {
        guard Glibc.rename(path, newPath) == 0 else { throw DurableFileError(operation: "renaming", path: path, code: errno) }
        path = newPath
    }

    /// Closes the descriptor (also done on deinit).
    public func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    /// Makes the directory entries of `directory` (creations, renames, removals) durable.
    public static func synchronizeDirectory(_ directory: String) throws(DurableFileError) {
        let descriptor = retrying { Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw DurableFileError(operation: "opening the folder", path: directory, code: errno) }
        defer { _ = Glibc.close(descriptor) }
        guard retrying({ fsync(descriptor) }) == 0 else {
            throw DurableFileError(operation: "fsync of the folder", path: directory, code: errno)
        }
    }

    /// Writes `bytes` to `path` through a temporary file, fdatasync and a rename, so a crash leaves
    /// either the old or the new contents; then syncs the folder.
    public static func replaceAtomically(path: String, with bytes: [UInt8]) throws(DurableFileError) {
        let temporary = path + ".tmp"
        let file = try open(path: temporary, create: true, truncate: true)
        try file.write(bytes, at: 0)
        try file.synchronize()
        file.close()
        guard Glibc.rename(temporary, path) == 0 else { throw DurableFileError(operation: "renaming into", path: path, code: errno) }
        try synchronizeDirectory(folder(of: path))
    }

    /// Removes `path`; a missing file is not an error.
    public static func remove(_ path: String) throws(DurableFileError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw DurableFileError(operation: "removing", path: path, code: errno) }
    }

    /// The folder part of `path` ("." when there is none).
    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func retrying<T: BinaryInteger>(_ call: () -> T) -> T {
        while true {
            let result = call()
            if result == -1, errno == EINTR { continue }
            return result
        }
    }

    private func retrying<T: BinaryInteger>(_ call: () -> T) -> T { Self.retrying(call) }
}

/// A 64-bit checksum for detecting torn or corrupted records in journals and spools: FNV-1a's
/// offset basis and prime, applied to the bytes taken 8 at a time as little-endian 64-bit words
/// (then to the 0 to 7 bytes left one by one), so that hashing audio payloads stays cheap.
public enum RecordChecksum {
    static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    static let prime: UInt64 = 0x0000_0100_0000_01B3

    /// The checksum of `bytes`.
    public static func of<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
        if let hash = bytes.withContiguousStorageIfAvailable({ of(UnsafeRawBufferPointer($0)) }) { return hash }
        return Array(bytes).withUnsafeBytes { of($0) }
    }

    /// The checksum of the bytes in `raw`.
    public static func of(_ raw: UnsafeRawBufferPointer) -> UInt64 {
        var running = Running()
        running.add(raw)
        return running.value
    }

    /// The checksum of bytes that arrive in pieces (a record's header, then its payload where it
    /// already lies): the same value as `of` over the pieces joined, without joining them.
    public struct Running: Sendable {
        private var hash = RecordChecksum.offsetBasis
        /// Bytes of an unfinished 8-byte word, little-endian, and how many there are (0 to 7).
        private var partial: UInt64 = 0
        private var partialCount = 0

        public init() {}

        /// Adds the next piece.
        public mutating func add(_ raw: UnsafeRawBufferPointer) {
            var index = 0
            while partialCount > 0, index < raw.count {
                addToPartial(raw[index])
                index += 1
            }
            // The running value stays in a local: updating the stored property in the loop made the
            // compiler store and reload it on every word, which doubled the loop's dependency chain.
            var words = hash
            while index + 8 <= raw.count {
                words = (words ^ UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))) &* RecordChecksum.prime
                index += 8
            }
            hash = words
            while index < raw.count {
                addToPartial(raw[index])
                index += 1
            }
        }

        /// Adds the next piece.
        public mutating func add(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { add($0) }
        }

        private mutating func addToPartial(_ byte: UInt8) {
            partial |= UInt64(byte) << (8 * UInt64(partialCount))
            partialCount += 1
            if partialCount == 8 {
                hash = (hash ^ partial) &* RecordChecksum.prime
                partial = 0
                partialCount = 0
            }
        }

        /// The checksum of everything added: whole words as they came, then the 0 to 7 bytes left
        /// one by one.
        public var value: UInt64 {
            var result = hash
            for index in 0..<partialCount {
                result = (result ^ ((partial >> (8 * UInt64(index))) & 0xFF)) &* RecordChecksum.prime
            }
            return result
        }
    }
}
