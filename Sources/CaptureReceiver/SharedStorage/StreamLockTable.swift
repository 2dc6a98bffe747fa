#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import Crypto
import Foundation
import Synchronization

/// The claims on one output folder's streams, all in one file: `OUT/.streams/.locks`. A stream is
/// claimed by an open-file-description lock (`F_OFD_SETLK`) on one byte of that file, at an offset
/// drawn from the stream id, so a receiver spends one descriptor on all its claims instead of one
/// per stream (10,000 streams must fit beside their sockets in 20,000 descriptors).
///
/// - **Across receivers** (processes, hosts sharing the volume) the kernel excludes: each process
///   locks through its own open file description, and OFD locks of different descriptions conflict.
///   The kernel releases them when the process dies, even by SIGKILL, so another receiver can take
///   the stream over. NFSv4, CephFS and GlusterFS honour them across hosts.
/// - **Inside one process**, locks through one description never conflict with each other, so the
///   table also keeps the set of streams this process holds.
///
/// The offset is the first 62 bits of HMAC-SHA-256 of the stream id under a random key kept in the
/// file's header (written once, by the first receiver to use the folder). Keyed, so a sender cannot
/// choose a stream id whose byte collides with another stream's to hold that stream hostage; 62 bits,
/// so two of 10,000 streams share a byte with odds of about 1 in 10^10 (they would then only take
/// turns, never write one file together).
///
/// The file: magic `CSLK`, version (UInt32 big-endian, 1), the 16-byte key, 8 reserved zero bytes.
/// Every receiver sharing a folder must use this scheme: receivers of the version before it locked
/// each stream's index entry instead, and do not exclude these (upgrade them together).
///
/// A table's descriptor stays open while this process holds any claim in the folder and is closed
/// with the last one.
enum StreamLockTable {
    /// The lock file's name inside the stream index folder (not a stream id, so never listed as one).
    static let fileName = ".locks"
    static let headerSize = 32
    private static let magic: [UInt8] = Array("CSLK".utf8)
    private static let version: [UInt8] = [0, 0, 0, 1]

    /// One folder's open lock file and the streams this process holds in it.
    private struct OpenTable {
        var descriptor: Int32
        var key: SymmetricKey
        var held: Set<UUID>
    }

    /// The open tables, by the index folder's path. Two spellings of one folder get two descriptions,
    /// which the kernel then excludes from each other, so keying by path is safe.
    private static let tables = Mutex<[String: OpenTable]>([:])

    /// Claims `stream` in the index folder `directory` without waiting. `.held` when this process or
    /// another receiver holds it.
    static func lock(_ stream: UUID, in directory: String) -> Result<Void, StreamClaim.Failure> {
        tables.withLock { tables -> Result<Void, StreamClaim.Failure> in
            var table: OpenTable
            if let open = tables[directory] {
                table = open
            } else {
                switch openTable(directory: directory) {
                case .success(let opened): table = opened
                case .failure(let error): return .failure(.failed(error))
                }
            }
            guard !table.held.contains(stream) else { return .failure(.held) }
            if let code = setLock(table.descriptor, type: F_WRLCK, at: offset(of: stream, key: table.key)) {
                if table.held.isEmpty { _ = close(table.descriptor) }
                if code == EAGAIN || code == EACCES { return .failure(.held) }
                return .failure(.failed(DurableFileError(operation: "locking stream \(stream) in", path: lockFilePath(directory), code: code)))
            }
            table.held.insert(stream)
            tables[directory] = table
            return .success(())
        }
    }

    /// Lets go of `stream`'s claim; the file is closed with the process's last claim in the folder.
    static func unlock(_ stream: UUID, in directory: String) {
        tables.withLock { tables in
            guard var table = tables[directory], table.held.remove(stream) != nil else { return }
            if table.held.isEmpty {
                // Closing the description drops its last lock.
                _ = close(table.descriptor)
                tables[directory] = nil
            } else {
                _ = setLock(table.descriptor, type: F_UNLCK, at: offset(of: stream, key: table.key))
                tables[directory] = table
            }
        }
    }

    static func lockFilePath(_ directory: String) -> String {
        (directory as NSString).appendingPathComponent(fileName)
    }

    /// The byte that stands for `stream`.
    static func offset(of stream: UUID, key: SymmetricKey) -> Int64 {
        let code = HMAC<SHA256>.authenticationCode(for: stream.wireBytes, using: key)
        let value = code.withUnsafeBytes { bytes in bytes.prefix(8).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) } }
        return Int64(value & 0x3FFF_FFFF_FFFF_FFFF)
    }

    private static func setLock(_ descriptor: Int32, type: Int32, at offset: Int64) -> Int32? {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(offset)
        lock.l_len = 1
        var result: Int32
        repeat { result = fcntl(descriptor, StreamClaim.setOFDLock, &lock) } while result == -1 && errno == EINTR
        return result == 0 ? nil : errno
    }

    /// Opens the folder's lock file, creating it (with a fresh key, atomically) when it is missing.
    private static func openTable(directory: String) -> Result<OpenTable, DurableFileError> {
        let path = lockFilePath(directory)
        var descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        if descriptor < 0, errno == ENOENT {
            if let error = create(path: path, directory: directory) { return .failure(error) }
            descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        }
        guard descriptor >= 0 else { return .failure(DurableFileError(operation: "opening the stream lock file", path: path, code: errno)) }
        var header = [UInt8](repeating: 0, count: headerSize)
        let count = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count == headerSize, Array(header[0..<4]) == magic, Array(header[4..<8]) == version else {
            _ = close(descriptor)
            return .failure(DurableFileError(
                operation: "reading the stream lock file (it is not one, or it is damaged: stop every receiver writing to this folder, then remove it)",
                path: path, code: count < 0 ? errno : EINVAL))
        }
        return .success(OpenTable(descriptor: descriptor, key: SymmetricKey(data: header[8..<24]), held: []))
    }

    /// Writes a new lock file under a temporary name and links it into place (so no receiver ever
    /// reads a half-written key; of two creating it at once, one key wins and both use it).
    private static func create(path: String, directory: String) -> DurableFileError? {
        let temporary = path + "-new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var descriptor = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o644))
        if descriptor < 0, errno == ENOENT {
            // The index folder was removed (or never made, for an output folder prepared by hand).
            guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
                return DurableFileError(operation: "creating the stream index folder", path: directory, code: errno)
            }
            descriptor = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o644))
        }
        guard descriptor >= 0 else { return DurableFileError(operation: "creating", path: temporary, code: errno) }
        defer { _ = unlink(temporary) }
        var generator = SystemRandomNumberGenerator()
        let key = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let bytes = magic + version + key + [UInt8](repeating: 0, count: 8)
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        let synced = written == bytes.count && fsync(descriptor) == 0
        let code = errno
        _ = close(descriptor)
        guard synced else { return DurableFileError(operation: "writing", path: temporary, code: code) }
        guard link(temporary, path) == 0 || errno == EEXIST else {
            return DurableFileError(operation: "creating", path: path, code: errno)
        }
        do throws(DurableFileError) {
            try DurableFile.synchronizeDirectory(directory)
        } catch {
            return error
        }
        return nil
    }
}
