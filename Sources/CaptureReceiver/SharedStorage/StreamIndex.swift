#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import Foundation

/// The index of unfinished and recently finished streams on the output volume: `OUT/.streams/<stream id>` names the
/// stream's CAF file by its path relative to `OUT`. Every receiver writing to the same folder (one
/// server, or several behind a load balancer on shared storage) finds any stream it is asked to
/// resume through it, without scanning, and claims the stream by locking its byte in the folder's
/// lock file (`StreamClaim`, `StreamLockTable`).
///
/// An entry exists from the moment a stream is accepted until its resume window has passed after
/// it finished (then it holds a `FinishedStreamRecord`), or until its file is finalized after its
/// resume window; a stream without an entry is unknown. Entries appear atomically:
/// the stream is claimed first, then its entry is written under a temporary name and linked into
/// place (`link(2)` fails if the name is taken). Its contents are read only under the claim.
public struct StreamIndex: Sendable {
    /// The index's folder name inside the output folder.
    public static let folderName = ".streams"

    /// The output folder the relative paths start from.
    public let outputDirectory: String
    /// `OUT/.streams`.
    public let directory: String

    public init(outputDirectory: String) {
        self.outputDirectory = outputDirectory
        directory = (outputDirectory as NSString).appendingPathComponent(Self.folderName)
    }

    /// Creates the index folder if needed.
    public func prepare() throws(DurableFileError) {
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw DurableFileError(operation: "creating the stream index folder", path: directory, code: errno)
        }
    }

    /// The entry of `stream`.
    func entryPath(_ stream: UUID) -> String {
        (directory as NSString).appendingPathComponent(stream.uuidString.lowercased())
    }

    /// The absolute path of a file named relative to the output folder; nil for a path that would
    /// leave it (an entry is trusted no further than the folder).
    func absolutePath(relative: String) -> String? {
        guard !relative.isEmpty, !relative.hasPrefix("/"), !relative.split(separator: "/").contains("..") else { return nil }
        return (outputDirectory as NSString).appendingPathComponent(relative)
    }

    /// The path of `absolute` relative to the output folder.
    func relativePath(of absolute: String) -> String {
        let prefix = outputDirectory.hasSuffix("/") ? outputDirectory : outputDirectory + "/"
        return absolute.hasPrefix(prefix) ? String(absolute.dropFirst(prefix.count)) : absolute
    }

    /// Claims a stream that has no entry yet: the entry appears, claimed, naming `relativePath`
    /// (empty: named later with `StreamClaim.record`). `.exists` when the stream has an entry.
    func claimNew(_ stream: UUID, relativePath: String = "") -> Result<StreamClaim, StreamClaim.Failure> {
        let entry = entryPath(stream)
        let claim: StreamClaim
        switch StreamClaim.take(stream, entryPath: entry, indexDirectory: directory) {
        case .success(let taken): claim = taken
        case .failure(let failure): return .failure(failure)
        }
        // Written under a temporary name and linked into place, so a reader never sees it half written.
        let temporary = (directory as NSString).appendingPathComponent(".new-\(stream.uuidString.lowercased())-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        let descriptor = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o644))
        guard descriptor >= 0 else {
            let code = errno
            claim.release(removingEntry: false)
            return .failure(.failed(DurableFileError(operation: "creating", path: temporary, code: code)))
        }
        defer { _ = unlink(temporary) }
        let bytes = Array(relativePath.utf8)
        let written = bytes.isEmpty ? 0 : bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        let code = errno
        _ = close(descriptor)
        guard written == bytes.count else {
            claim.release(removingEntry: false)
            return .failure(.failed(DurableFileError(operation: "writing", path: temporary, code: code)))
        }
        guard link(temporary, entry) == 0 else {
            let code = errno
            claim.release(removingEntry: false)
            return .failure(code == EEXIST ? .exists : .failed(DurableFileError(operation: "creating", path: entry, code: code)))
        }
        return .success(claim)
    }

    /// Claims a stream that has an entry. `.missing` when it has none (or it went away while being
    /// claimed: the stream finished), `.held` when another receiver or connection holds it.
    func claimExisting(_ stream: UUID) -> Result<StreamClaim, StreamClaim.Failure> {
        let entry = entryPath(stream)
        var status = stat()
        guard lstat(entry, &status) == 0 else {
            return errno == ENOENT ? .failure(.missing) : .failure(.failed(DurableFileError(operation: "examining", path: entry, code: errno)))
        }
        switch StreamClaim.take(stream, entryPath: entry, indexDirectory: directory) {
        case .success(let claim):
            // A holder that finished the stream removes the entry while it holds the claim.
            guard lstat(entry, &status) == 0 else {
                let code = errno
                claim.release(removingEntry: false)
                return code == ENOENT ? .failure(.missing) : .failure(.failed(DurableFileError(operation: "examining", path: entry, code: code)))
            }
            return .success(claim)
        case .failure(let failure):
            return .failure(failure)
        }
    }

    /// The file a claimed entry names, when it names one inside the output folder that can still be
    /// continued (unfinished, or finalized at a shutdown and resumable); nil otherwise.
    func unfinishedFile(of claim: StreamClaim) -> String? {
        guard case .recording(let relative)? = entry(of: claim)?.stream,
              let path = absolutePath(relative: relative), ResumableFiles.isUnfinished(path)
        else { return nil }
        return path
    }

    /// The record of a finished stream a claimed entry holds; nil for any other entry.
    func finishedRecord(of claim: StreamClaim) -> FinishedStreamRecord? {
        guard case .finished(let record)? = entry(of: claim)?.stream, absolutePath(relative: record.relativePath) != nil else { return nil }
        return record
    }

    /// A claimed entry, parsed; nil when it cannot be read or is damaged.
    func entry(of claim: StreamClaim) -> StreamIndexEntry? {
        (try? claim.contents()).flatMap { StreamIndexEntry(text: $0) }
    }

    /// When the entry of `stream` was last written (for a finished stream: when it finished).
    func entryModified(_ stream: UUID) -> Date? {
        var status = stat()
        guard lstat(entryPath(stream), &status) == 0 else { return nil }
        return Date(timeIntervalSince1970: Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9)
    }

    /// The streams that have an entry.
    func streams() -> [UUID] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { UUID(uuidString: $0) }
    }
}
