#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CaptureCore

/// Everything that can go wrong writing, reading or recovering a CAF file.
///
/// Each message names the file and says what to do about it.
public enum CAFError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file already exists; the writer never overwrites.
    case fileExists(path: String)
    /// The path is a symbolic link, which the writer and recovery refuse to follow.
    case symbolicLink(path: String)
    /// The directory that should hold the file does not exist.
    case directoryMissing(directory: String)
    /// The disk (or the user's quota) is full.
    case diskFull(directory: String)
    /// The process may not create, read or write the file.
    case permissionDenied(path: String)
    /// The file system is mounted read-only.
    case readOnlyFileSystem(path: String)
    /// The file does not exist.
    case fileMissing(path: String)
    /// Any other system call failure, with its `errno`.
    case io(operation: String, path: String, errno: Int32)
    /// The stream format cannot be written to a CAF file.
    case invalidFormat(StreamFormatError)
    /// A caller passed something the writer cannot accept.
    case invalidArgument(String)
    /// The writer was finalized or closed and can do no more.
    case writerClosed(path: String)
    /// The file is finalized (its data size is known), so there is nothing to resume.
    case alreadyFinalized(path: String)
    /// The file does not start with a CAF header.
    case notCAF(path: String)
    /// The file's CAF version is not 1.
    case unsupportedVersion(path: String, version: UInt16)
    /// A chunk runs past the end of the file.
    case truncatedChunk(path: String, chunk: String, offset: Int64)
    /// A chunk's contents contradict the specification or each other.
    case malformedChunk(path: String, chunk: String, reason: String)
    /// A required chunk is absent.
    case missingChunk(path: String, chunk: String)
    /// The audio description chunk describes something that cannot be audio.
    case unsupportedDescription(path: String, reason: String)
    /// A packet table entry is not a valid variable-length integer.
    case badVarint(path: String, packetIndex: Int64)
    /// A variable bit rate file was left unfinalized and its packet-size journal is gone.
    case journalMissing(path: String)
    /// The packet-size journal is not one this module wrote.
    case journalCorrupt(path: String, reason: String)
    /// `resume(keepingPackets:)` asked for packets the file does not hold.
    case packetsUnavailable(path: String, requested: Int64, available: Int64)
    /// A packet index past the end of the packet table.
    case packetOutOfRange(index: Int64, count: Int64)

    public var description: String {
        switch self {
        case .fileExists(let path):
            return "\(path) already exists: the CAF writer never overwrites a file; choose another name or move the old file away"
        case .symbolicLink(let path):
            return "\(path) is a symbolic link: CAF files are never written through links; use the real path"
        case .directoryMissing(let directory):
            return "the directory \(directory) does not exist: create it or choose another output directory"
        case .diskFull(let directory):
            return "the disk is full: free space in \(directory) (or raise the quota), then resume the recording"
        case .permissionDenied(let path):
            return "permission denied for \(path): give this user write access to \(CAFError.directory(of: path)) or choose another directory"
        case .readOnlyFileSystem(let path):
            return "\(path) is on a read-only file system: remount it read-write or choose another directory"
        case .fileMissing(let path):
            return "\(path) does not exist: check the path"
        case .io(let operation, let path, let code):
            return "\(operation) failed for \(path): \(String(cString: strerror(code))) (errno \(code)); check the disk and the file system"
        case .invalidFormat(let error):
            return "cannot write this stream format to CAF: \(error)"
        case .invalidArgument(let why):
            return "invalid CAF writer call: \(why)"
        case .writerClosed(let path):
            return "the CAF writer for \(path) is already finalized or closed; resume the file with CAFWriter.resume to write more"
        case .alreadyFinalized(let path):
            return "\(path) is already finalized: there is nothing to resume; record into a new file"
        case .notCAF(let path):
            return "\(path) is not a CAF file (no 'caff' header): check that you opened the right file"
        case .unsupportedVersion(let path, let version):
            return "\(path) is CAF version \(version); only version 1 exists: the file is damaged or not CAF"
        case .truncatedChunk(let path, let chunk, let offset):
            return "\(path) is truncated: the '\(chunk)' chunk at byte \(offset) runs past the end of the file; if it was being recorded, run recovery on it"
        case .malformedChunk(let path, let chunk, let reason):
            return "\(path) has a malformed '\(chunk)' chunk: \(reason); the file is damaged"
        case .missingChunk(let path, let chunk):
            return "\(path) has no '\(chunk)' chunk, which every CAF file needs: the file is damaged"
        case .unsupportedDescription(let path, let reason):
            return "\(path) has an audio description ('desc') that cannot be read: \(reason)"
        case .badVarint(let path, let index):
            return "\(path) has a bad packet table: the size of packet \(index) is not a valid variable-length integer; the file is damaged"
        case .journalMissing(let path):
            return "\(path) was not finalized and its packet-size journal \(path)\(CAFJournal.suffix) is missing, so its packet table cannot be rebuilt; restore the journal file next to it"
        case .journalCorrupt(let path, let reason):
            return "the packet-size journal \(path) cannot be used: \(reason); restore it from a backup or move it away to recover what the CAF file alone holds"
        case .packetsUnavailable(let path, let requested, let available):
            return "\(path) holds \(available) complete packets, fewer than the \(requested) to keep: resume from packet \(available) instead"
        case .packetOutOfRange(let index, let count):
            return "packet \(index) does not exist: the file has \(count) packets"
        }
    }

    /// The directory part of `path` ("." when there is none).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Maps a failed system call's `errno` to the error a user can act on.
    static func system(_ code: Int32, operation: String, path: String) -> CAFError {
        switch code {
        case ENOSPC, EDQUOT: return .diskFull(directory: directory(of: path))
        case EACCES, EPERM: return .permissionDenied(path: path)
        case EROFS: return .readOnlyFileSystem(path: path)
        case EEXIST: return .fileExists(path: path)
        case ELOOP: return .symbolicLink(path: path)
        default: return .io(operation: operation, path: path, errno: code)
        }
    }
}
