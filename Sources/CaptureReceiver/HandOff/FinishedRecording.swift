#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import Crypto
import Foundation

/// A finished recording file, as its hand-off (`--on-finalize`) sees it: where it is and what it holds.
public struct FinishedRecording: Sendable, Codable, Equatable {
    /// The file's path relative to the output folder.
    public var relativePath: String
    public var streamName: String
    public var streamID: String
    public var sourceHost: String
    /// UTC time of the file's first valid sample, ISO 8601.
    public var firstSampleTime: String
    public var frames: Int64
    /// False for a file finalized without its stream's end (its sender did not come back in time).
    public var complete: Bool

    public init(relativePath: String, streamName: String, streamID: String, sourceHost: String, firstSampleTime: String, frames: Int64, complete: Bool) {
        self.relativePath = relativePath
        self.streamName = streamName
        self.streamID = streamID
        self.sourceHost = sourceHost
        self.firstSampleTime = firstSampleTime
        self.frames = frames
        self.complete = complete
    }

    /// What a finished file's `info` chunk says of it (the receiver wrote it there).
    static func describing(info: [(key: String, value: String)], relativePath: String, frames: Int64, complete: Bool) -> FinishedRecording {
        func value(_ key: String) -> String { info.first(where: { $0.key == key })?.value ?? "" }
        return FinishedRecording(
            relativePath: relativePath, streamName: value("title"), streamID: value("stream id"), sourceHost: value("source host"),
            firstSampleTime: value("first sample time").isEmpty ? value("recorded date") : value("first sample time"),
            frames: frames, complete: complete)
    }
}

/// The journal of hand-offs not yet done: `OUT/.handoff/<digest of the file's path>.json`, one entry
/// per finished file, written durably before the step that makes the file's finishing final, and
/// removed once its hand-off succeeded. Replayed at start, so a hand-off runs at least once even when
/// the receiver crashes between finishing a file and running (or completing) its hand-off.
///
/// Each run holds the entry's lock (`lock(_:)`): an open-file-description lock on
/// `<digest>.lock` beside the entry, which the command inherits, so it lasts as long as the command
/// runs, also when the receiver that started it was killed. Receivers sharing `--out` (and a
/// restarted receiver) see it taken and leave the hand-off alone while it runs.
struct HandOffJournal: Sendable {
    /// The journal's folder name inside the output folder.
    static let folderName = ".handoff"
    let folder: String

    init(outputDirectory: String) {
        folder = (outputDirectory as NSString).appendingPathComponent(Self.folderName)
    }

    private func digest(_ relativePath: String) -> String {
        SHA256.hash(data: Data(relativePath.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    private func entryPath(_ relativePath: String) -> String {
        (folder as NSString).appendingPathComponent(digest(relativePath) + ".json")
    }

    private func lockPath(_ relativePath: String) -> String {
        (folder as NSString).appendingPathComponent(digest(relativePath) + ".lock")
    }

    /// Records `recording` durably (replacing an entry of the same file).
    func record(_ recording: FinishedRecording) throws(DurableFileError) {
        if mkdir(folder, 0o755) == 0 {
            try DurableFile.synchronizeDirectory(DurableFile.folder(of: folder))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(recording)).map { [UInt8]($0) } ?? []
        try DurableFile.replaceAtomically(path: entryPath(recording.relativePath), with: bytes)
    }

    /// What `lock(_:)` found.
    enum LockResult {
        /// The entry is this process's to run: `entry` is what it says now.
        case locked(HandOffLock, entry: FinishedRecording?)
        /// Another process holds it (another receiver runs the hand-off, or a command started by a
        /// receiver that was killed still runs).
        case busy
        /// The entry is gone: another receiver completed the hand-off.
        case gone
        /// The file system refused.
        case failed(DurableFileError)
    }

    /// Takes the lock of the entry of `relativePath` without waiting (an OFD write lock on its lock
    /// file, created when missing), then checks the lock file is still the one at its path (a
    /// holder that completed the hand-off removes it while it holds it) and reads the entry.
    func lock(_ relativePath: String) -> LockResult {
        let path = lockPath(relativePath)
        let entry = entryPath(relativePath)
        for _ in 0..<8 {
            var descriptor: Int32
            repeat { descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600) } while descriptor < 0 && errno == EINTR
            guard descriptor >= 0 else {
                if errno == ENOENT { return .gone }
                return .failed(DurableFileError(operation: "opening", path: path, code: errno))
            }
            if let code = StreamClaim.lockForWriting(descriptor) {
                _ = close(descriptor)
                if code == EAGAIN || code == EACCES { return .busy }
                return .failed(DurableFileError(operation: "locking", path: path, code: code))
            }
            var held = stat()
            var named = stat()
            guard fstat(descriptor, &held) == 0, held.st_nlink > 0, stat(path, &named) == 0, named.st_ino == held.st_ino, named.st_dev == held.st_dev else {
                // Removed (or replaced) while it was being locked: take the one there now.
                _ = close(descriptor)
                continue
            }
            var status = stat()
            guard stat(entry, &status) == 0 else {
                // Completed elsewhere: the lock file is this process's to remove.
                _ = unlink(path)
                _ = close(descriptor)
                return .gone
            }
            let recorded = FileManager.default.contents(atPath: entry).flatMap { try? JSONDecoder().decode(FinishedRecording.self, from: $0) }
            let lock = HandOffLock(descriptor: descriptor, lockPath: path, entryPath: entry, entryDevice: UInt64(status.st_dev), entryInode: UInt64(status.st_ino))
            return .locked(lock, entry: recorded)
        }
        return .busy
    }

    /// Every entry, oldest first; unreadable ones are skipped (and named in `damaged`).
    func entries() -> (recordings: [FinishedRecording], damaged: [String]) {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".json") }
        var found: [(Date, FinishedRecording)] = []
        var damaged: [String] = []
        for name in names {
            let path = (folder as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path), let recording = try? JSONDecoder().decode(FinishedRecording.self, from: data) else {
                damaged.append(path)
                continue
            }
            let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
            found.append((modified, recording))
        }
        return (found.sorted { $0.0 < $1.0 }.map(\.1), damaged)
    }
}

/// A run's hold on its journal entry (`HandOffJournal.lock`). The descriptor is close-on-exec in
/// the receiver and handed to the command as descriptor `HandOffLock.commandDescriptor`, so the lock
/// lasts until both the receiver has let go and every process of the command has ended.
///
/// Sendability (`@unchecked Sendable`): used by the one thread that runs the hand-off.
final class HandOffLock: @unchecked Sendable {
    /// Where the command finds the lock (above the descriptors `sh` redirections can name, 0-9).
    static let commandDescriptor: Int32 = 10

    private(set) var descriptor: Int32
    private let lockPath: String
    private let entryPath: String
    /// The entry the lock was taken for: recording the file again replaces it (a new file).
    private let entryDevice: UInt64
    private let entryInode: UInt64

    init(descriptor: Int32, lockPath: String, entryPath: String, entryDevice: UInt64, entryInode: UInt64) {
        self.descriptor = descriptor
        self.lockPath = lockPath
        self.entryPath = entryPath
        self.entryDevice = entryDevice
        self.entryInode = entryInode
    }

    deinit { release() }

    /// The hand-off succeeded: removes its entry (unless the file was finished again meanwhile and
    /// its entry replaced: that one runs again) and the lock file, then lets go.
    func complete() {
        var status = stat()
        if stat(entryPath, &status) == 0, UInt64(status.st_dev) == entryDevice, UInt64(status.st_ino) == entryInode {
            try? DurableFile.remove(entryPath)
            _ = unlink(lockPath)
        }
        release()
    }

    /// Lets go (the entry stays: the hand-off runs again).
    func release() {
        if descriptor >= 0 {
            _ = close(descriptor)
            descriptor = -1
        }
    }
}
