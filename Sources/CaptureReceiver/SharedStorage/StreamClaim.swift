#if canImport(Glibc)
import Glibc
#endif
import CaptureCore

/// A receiver's exclusive hold on one stream: an open-file-description lock (`F_OFD_SETLK`) on the
/// stream's entry in the `StreamIndex`. While a claim is held no other receiver on the shared volume
/// (and no other connection in this one) can write the stream; the kernel releases it when the
/// claim is released, and when the process dies, even by SIGKILL, so another receiver can take the
/// stream over. OFD locks belong to the open file description, not the process: closing another
/// descriptor of the same file does not drop them, and NFSv4 (and CephFS) honour them across hosts.
///
/// Used on a `WriterPool` lane only.
///
/// Sendability (`@unchecked Sendable`): used on one `WriterPool` lane at a time (handed over with its stream, never shared).
final class StreamClaim: @unchecked Sendable {
    /// The index entry the claim locks.
    let entryPath: String
    private var descriptor: Int32

    init(entryPath: String, descriptor: Int32) {
        self.entryPath = entryPath
        self.descriptor = descriptor
    }

    deinit { closeDescriptor() }

    /// Why a claim could not be taken.
    enum Failure: Error, Equatable {
        /// Another receiver (or connection) holds the stream.
        case held
        /// The entry does not exist (or was removed while the claim was being taken).
        case missing
        /// The entry exists already (claiming a new stream).
        case exists
        /// The file system refused.
        case failed(DurableFileError)
    }

    /// Locks the open `descriptor` of `entryPath` for writing without waiting, then checks the
    /// entry is still the file at that path (a holder that finished the stream removes the entry
    /// while it holds the lock; a claim taken on the removed file would claim nothing).
    static func lock(descriptor: Int32, entryPath: String) -> Result<StreamClaim, Failure> {
        if let code = lockForWriting(descriptor) {
            _ = close(descriptor)
            if code == EAGAIN || code == EACCES { return .failure(.held) }
            return .failure(.failed(DurableFileError(operation: "locking", path: entryPath, code: code)))
        }
        var held = stat()
        var named = stat()
        guard fstat(descriptor, &held) == 0, held.st_nlink > 0, stat(entryPath, &named) == 0,
            named.st_ino == held.st_ino, named.st_dev == held.st_dev
        else {
            _ = close(descriptor)
            return .failure(.missing)
        }
        return .success(StreamClaim(entryPath: entryPath, descriptor: descriptor))
    }

    /// Takes the exclusive OFD lock on the whole of `descriptor`'s file without waiting; the errno
    /// when it could not (EAGAIN or EACCES: someone else holds it).
    static func lockForWriting(_ descriptor: Int32) -> Int32? {
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 0
        var result: Int32
        repeat { result = fcntl(descriptor, Self.setOFDLock, &lock) } while result == -1 && errno == EINTR
        return result == 0 ? nil : errno
    }

    /// `F_OFD_SETLK` (Linux 3.15+; the C library headers define it only with `_GNU_SOURCE`).
    static let setOFDLock: Int32 = 37

    /// What the entry holds (the stream file's path relative to the output folder); empty when the
    /// claim was taken before the file was named.
    func contents() throws(DurableFileError) -> String {
        var bytes = [UInt8](repeating: 0, count: 4_096)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { throw DurableFileError(operation: "reading", path: entryPath, code: errno) }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }

    /// Writes the entry: the stream file's path (relative to the output folder) and its owner. Not
    /// synced: the next sync round's `syncfs` makes it durable with the stream's new files.
    ///
    /// `synchronizing` (a segment cut moving a recording stream to its next file): the entry is
    /// overwritten in place, padded with empty lines (which a reader skips) to cover the old text,
    /// and synced, so a crash at any moment leaves either the old entry or the new one.
    func record(_ entry: StreamIndexEntry, synchronizing: Bool = false) throws(DurableFileError) {
        var bytes = Array(entry.text.utf8)
        if synchronizing {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { throw DurableFileError(operation: "reading", path: entryPath, code: errno) }
            if Int(status.st_size) > bytes.count { bytes += [UInt8](repeating: 0x0A, count: Int(status.st_size) - bytes.count) }
        } else {
            guard ftruncate(descriptor, 0) == 0 else { throw DurableFileError(operation: "writing", path: entryPath, code: errno) }
        }
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else { throw DurableFileError(operation: "writing", path: entryPath, code: errno) }
        if synchronizing, fdatasync(descriptor) != 0 { throw DurableFileError(operation: "syncing", path: entryPath, code: errno) }
    }

    /// Makes the entry's contents durable (fdatasync), for a file system where the commit log's
    /// creation sync cannot use syncfs.
    func synchronize() throws(DurableFileError) {
        if fdatasync(descriptor) != 0 { throw DurableFileError(operation: "syncing", path: entryPath, code: errno) }
    }

    /// Replaces the entry with the record of the finished stream, durably (written and synced)
    /// before the sender is told EndAccepted: after a crash the stream must still be known as
    /// finished, or a resume would store its audio again.
    func recordFinished(_ record: FinishedStreamRecord, owner: StreamOwner?) throws(DurableFileError) {
        let bytes = Array(StreamIndexEntry(stream: .finished(record), owner: owner).text.utf8)
        guard ftruncate(descriptor, 0) == 0 else { throw DurableFileError(operation: "writing", path: entryPath, code: errno) }
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else { throw DurableFileError(operation: "writing", path: entryPath, code: errno) }
        guard fdatasync(descriptor) == 0 else { throw DurableFileError(operation: "syncing", path: entryPath, code: errno) }
    }

    /// Lets go of the stream; with `removingEntry` (the stream is finished, or was never made) the
    /// entry is removed first, while the claim still excludes everyone else.
    func release(removingEntry: Bool) {
        if removingEntry, descriptor >= 0 { _ = unlink(entryPath) }
        closeDescriptor()
    }

    private func closeDescriptor() {
        if descriptor >= 0 {
            _ = close(descriptor)
            descriptor = -1
        }
    }
}
