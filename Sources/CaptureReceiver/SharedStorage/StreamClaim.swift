#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import Foundation

/// A receiver's exclusive hold on one stream: its byte in the index folder's lock file
/// (`StreamLockTable`). While a claim is held no other receiver on the shared volume (and no other
/// connection in this one) can write the stream; it is released with `release`, and by the kernel
/// when the process dies, even by SIGKILL, so another receiver can take the stream over.
///
/// A claim holds no descriptor of its own: the stream's index entry (`OUT/.streams/<id>`) is opened
/// for each read or write of it, which happen when the stream starts, cuts a segment and ends.
///
/// Used on a `WriterPool` lane only.
///
/// Sendability (`@unchecked Sendable`): `held` is read and written only by the thread that holds the
/// claim: its stream's `WriterPool` lane (a claim is handed over with its stream, never shared), or
/// the thread that sweeps the index at start-up or shut-down; the compiler cannot see that
/// ownership.
final class StreamClaim: @unchecked Sendable {
    /// The index entry the claim covers.
    let entryPath: String
    /// The stream claimed.
    let stream: UUID
    /// The index folder whose lock file holds the claim.
    private let indexDirectory: String
    private var held = true

    private init(stream: UUID, entryPath: String, indexDirectory: String) {
        self.stream = stream
        self.entryPath = entryPath
        self.indexDirectory = indexDirectory
    }

    deinit { unlock() }

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

    /// Claims `stream`, whose entry is `entryPath` in `indexDirectory`, without waiting. The entry
    /// itself is not looked at.
    static func take(_ stream: UUID, entryPath: String, indexDirectory: String) -> Result<StreamClaim, Failure> {
        StreamLockTable.lock(stream, in: indexDirectory).map { StreamClaim(stream: stream, entryPath: entryPath, indexDirectory: indexDirectory) }
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
        let descriptor = try openEntry(flags: O_RDONLY)
        defer { _ = close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4_096)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { throw DurableFileError(operation: "reading", path: entryPath, code: errno) }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }

    /// Opens the entry (never through a symbolic link); the caller closes it.
    private func openEntry(flags: Int32) throws(DurableFileError) -> Int32 {
        var descriptor: Int32
        repeat { descriptor = open(entryPath, flags | O_NOFOLLOW | O_CLOEXEC) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { throw DurableFileError(operation: "opening", path: entryPath, code: errno) }
        return descriptor
    }

    /// Writes the entry: the stream file's path (relative to the output folder) and its owner. Not
    /// synced: the next sync round's `syncfs` makes it durable with the stream's new files.
    ///
    /// `synchronizing` (a segment cut moving a recording stream to its next file): the entry is
    /// overwritten in place, padded with empty lines (which a reader skips) to cover the old text,
    /// and synced, so a crash at any moment leaves either the old entry or the new one.
    func record(_ entry: StreamIndexEntry, synchronizing: Bool = false) throws(DurableFileError) {
        let descriptor = try openEntry(flags: O_RDWR)
        defer { _ = close(descriptor) }
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
        let descriptor = try openEntry(flags: O_RDWR)
        defer { _ = close(descriptor) }
        if fdatasync(descriptor) != 0 { throw DurableFileError(operation: "syncing", path: entryPath, code: errno) }
    }

    /// Replaces the entry with the record of the finished stream, durably (written and synced)
    /// before the sender is told EndAccepted: after a crash the stream must still be known as
    /// finished, or a resume would store its audio again.
    func recordFinished(_ record: FinishedStreamRecord, owner: StreamOwner?) throws(DurableFileError) {
        let descriptor = try openEntry(flags: O_RDWR)
        defer { _ = close(descriptor) }
        let bytes = Array(StreamIndexEntry(stream: .finished(record), owner: owner).text.utf8)
        guard ftruncate(descriptor, 0) == 0 else { throw DurableFileError(operation: "writing", path: entryPath, code: errno) }
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else { throw DurableFileError(operation: "writing", path: entryPath, code: errno) }
        guard fdatasync(descriptor) == 0 else { throw DurableFileError(operation: "syncing", path: entryPath, code: errno) }
    }

    /// Lets go of the stream; with `removingEntry` (the stream is finished, or was never made) the
    /// entry is removed first, while the claim still excludes everyone else.
    func release(removingEntry: Bool) {
        if removingEntry, held { _ = unlink(entryPath) }
        unlock()
    }

    private func unlock() {
        if held {
            StreamLockTable.unlock(stream, in: indexDirectory)
            held = false
        }
    }
}
