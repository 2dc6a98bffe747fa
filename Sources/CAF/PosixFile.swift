import CaptureCore

#if canImport(Glibc)
import CWriteback
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open file descriptor with the few operations the CAF module needs, each retrying on `EINTR`,
/// completing short reads and writes, and turning failures into `CAFError`s that name the file.
///
/// Writes go straight to the descriptor with `pwrite` at explicit offsets: there is no user-space
/// buffer, so a failed write can simply be repeated at the same offset.
final class PosixFile {
    var path: String
    private(set) var descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        if descriptor >= 0 { _ = closeDescriptor(descriptor) }
    }

    /// Creates a new file: never an existing one, never through a symbolic link.
    static func createNew(path: String, mode: mode_t = 0o644) throws(CAFError) -> PosixFile {
        let flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        let descriptor = retryingOnInterrupt { open(path, flags, mode) }
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { throw .directoryMissing(directory: CAFError.directory(of: path)) }
            throw CAFError.system(code, operation: "creating the file", path: path)
        }
        return PosixFile(path: path, descriptor: descriptor)
    }

    /// Opens an existing file, refusing symbolic links.
    static func openExisting(path: String, writable: Bool) throws(CAFError) -> PosixFile {
        let flags = (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC
        let descriptor = retryingOnInterrupt { open(path, flags) }
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { throw .fileMissing(path: path) }
            throw CAFError.system(code, operation: "opening the file", path: path)
        }
        let file = PosixFile(path: path, descriptor: descriptor)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw CAFError.system(errno, operation: "examining the file", path: path)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw .io(operation: "opening the file (it is not a regular file)", path: path, errno: EINVAL)
        }
        return file
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(CAFError) {
        try write(bytes, UnsafeRawBufferPointer(start: nil, count: 0), at: offset)
    }

    /// Writes all of `first` and then all of `second` at `offset`, with `pwritev` (no copy of either).
    func write(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, at offset: Int64) throws(CAFError) {
        let failure = PositionalWrite.write(first, second, to: descriptor, at: offset)
        guard failure == 0 else { throw CAFError.system(failure, operation: "writing", path: path) }
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws(CAFError) {
        let result: Result<Void, CAFError> = bytes.withUnsafeBytes { raw in
            do throws(CAFError) {
                try write(raw, at: offset)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(count: Int, at offset: Int64) throws(CAFError) -> [UInt8] {
        guard count > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        let path = self.path
        let descriptor = self.descriptor
        let failure: Int32? = buffer.withUnsafeMutableBytes { raw -> Int32? in
            guard let base = raw.baseAddress else { return nil }
            while filled < count {
                let result = pread(descriptor, base + filled, count - filled, off_t(offset) + off_t(filled))
                if result < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if result == 0 { break }
                filled += result
            }
            return nil
        }
        if let failure { throw CAFError.system(failure, operation: "reading", path: path) }
        buffer.removeSubrange(filled...)
        return buffer
    }

    /// The file's current length in bytes.
    func length() throws(CAFError) -> Int64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw CAFError.system(errno, operation: "examining the file", path: path)
        }
        return Int64(status.st_size)
    }

    func truncate(to length: Int64) throws(CAFError) {
        let result = retryingOnInterrupt { ftruncate(descriptor, off_t(length)) }
        guard result == 0 else { throw CAFError.system(errno, operation: "truncating", path: path) }
    }

    /// Makes the file's data (and the metadata needed to read it back) durable.
    func synchronizeData() throws(CAFError) {
        #if canImport(Glibc)
        let result = retryingOnInterrupt { fdatasync(descriptor) }
        #else
        let result = retryingOnInterrupt { fsync(descriptor) }
        #endif
        guard result == 0 else { throw CAFError.system(errno, operation: "flushing to disk", path: path) }
    }

    /// Makes the file's data and all its metadata durable.
    func synchronizeAll() throws(CAFError) {
        let result = retryingOnInterrupt { fsync(descriptor) }
        guard result == 0 else { throw CAFError.system(errno, operation: "flushing to disk", path: path) }
    }

    /// Asks the kernel to start writing `length` bytes at `offset` to the storage, without waiting
    /// (Linux `sync_file_range` with `SYNC_FILE_RANGE_WRITE`; nothing elsewhere). A hint: it makes
    /// nothing durable, and a failure (a file system without it) changes nothing.
    func startWriteback(at offset: Int64, length: Int) {
        #if os(Linux)
        _ = retryingOnInterrupt { sync_file_range(descriptor, off_t(offset), off_t(length), CAPTURE_SYNC_FILE_RANGE_WRITE) }
        #endif
    }

    /// Tells the kernel that `length` bytes at `offset` will not be read again, so that their clean
    /// pages in the page cache can be freed now (`POSIX_FADV_DONTNEED`; pages still dirty or being
    /// written out are kept). A hint: its failure changes nothing.
    func releaseCachedPages(at offset: Int64, length: Int) {
        #if os(Linux)
        _ = posix_fadvise(descriptor, off_t(offset), off_t(length), POSIX_FADV_DONTNEED)
        #endif
    }

    func close() {
        if descriptor >= 0 {
            _ = closeDescriptor(descriptor)
            descriptor = -1
        }
    }

    /// Makes a directory entry change (a created, renamed or removed file) in `path`'s directory durable.
    static func synchronizeDirectory(containing path: String) throws(CAFError) {
        let directory = CAFError.directory(of: path)
        let descriptor = retryingOnInterrupt { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else {
            throw CAFError.system(errno, operation: "opening the directory", path: directory)
        }
        defer { _ = closeDescriptor(descriptor) }
        let result = retryingOnInterrupt { fsync(descriptor) }
        // Some file systems cannot fsync a directory (EINVAL); the entry is then as durable as it gets.
        guard result == 0 || errno == EINVAL else {
            throw CAFError.system(errno, operation: "flushing the directory to disk", path: directory)
        }
    }

    /// Removes a file; a file that is already gone is not an error.
    static func remove(path: String) throws(CAFError) {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw CAFError.system(errno, operation: "removing", path: path)
        }
    }

    /// Whether anything (a file, a link, a directory) exists at `path`, without following links.
    static func exists(path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }
}

/// Calls a system function again while it fails with `EINTR`.
func retryingOnInterrupt<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result == -1 && errno == EINTR { continue }
        return result
    }
}

/// `close(2)` under a name that does not clash with the methods called `close`.
private func closeDescriptor(_ descriptor: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(descriptor)
    #else
    return Darwin.close(descriptor)
    #endif
}
