#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import Crypto
import Foundation

/// What a hook journal (`HookJournal`) keeps: one job of a hook, named by its key.
protocol HookJournalEntry: Codable, Sendable, Equatable {
    /// The job's name in its journal, unique among the jobs not yet done.
    var journalKey: String { get }
}

/// The journal of a hook's jobs not yet done (`--on-finalize`: `OUT/.handoff/`, one entry per
/// finished file; `--on-alarm`: `OUT/.alarm-hook/`, one per alarm raised or cleared):
/// `<digest of the job's key>.json`, written durably before the step that makes the job's cause
/// final, and removed once its run succeeded. Replayed at start, so a job runs at least once even
/// when the receiver crashes between its cause and running (or completing) it.
///
/// Each run holds the entry's lock (`lock(_:)`): an open-file-description lock on
/// `<digest>.lock` beside the entry, which the command inherits, so it lasts as long as the command
/// runs, also when the receiver that started it was killed. Receivers sharing `--out` (and a
/// restarted receiver) see it taken and leave the hand-off alone while it runs.
struct HookJournal<Entry: HookJournalEntry>: Sendable {
    let folder: String

    /// The journal in `folderName` inside the output folder.
    init(outputDirectory: String, folderName: String) {
        folder = (outputDirectory as NSString).appendingPathComponent(folderName)
    }

    private func digest(_ key: String) -> String {
        SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    private func entryPath(_ key: String) -> String {
        (folder as NSString).appendingPathComponent(digest(key) + ".json")
    }

    private func lockPath(_ key: String) -> String {
        (folder as NSString).appendingPathComponent(digest(key) + ".lock")
    }

    /// Records `entry` durably (replacing an entry of the same key).
    func record(_ entry: Entry) throws(DurableFileError) {
        if mkdir(folder, 0o755) == 0 {
            try DurableFile.synchronizeDirectory(DurableFile.folder(of: folder))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(entry)).map { [UInt8]($0) } ?? []
        try DurableFile.replaceAtomically(path: entryPath(entry.journalKey), with: bytes)
    }

    /// What `lock(_:)` found.
    enum LockResult {
        /// The entry is this process's to run: `entry` is what it says now.
        case locked(HandOffLock, entry: Entry?)
        /// Another process holds it (another receiver runs the hand-off, or a command started by a
        /// receiver that was killed still runs).
        case busy
        /// The entry is gone: another receiver completed the job.
        case gone
        /// The file system refused.
        case failed(DurableFileError)
    }

    /// Takes the lock of the entry of `key` without waiting (an OFD write lock on its lock
    /// file, created when missing), then checks the lock file is still the one at its path (a
    /// holder that completed the hand-off removes it while it holds it) and reads the entry.
    func lock(_ key: String) -> LockResult {
        let path = lockPath(key)
        let entry = entryPath(key)
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
            let recorded = FileManager.default.contents(atPath: entry).flatMap { try? JSONDecoder().decode(Entry.self, from: $0) }
            let lock = HandOffLock(descriptor: descriptor, lockPath: path, entryPath: entry, entryDevice: UInt64(status.st_dev), entryInode: UInt64(status.st_ino))
            return .locked(lock, entry: recorded)
        }
        return .busy
    }

    /// Every entry, oldest first (by when it was written, then by key); unreadable ones are skipped
    /// (and named in `damaged`).
    func entries() -> (entries: [Entry], damaged: [String]) {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".json") }
        var found: [(Date, Entry)] = []
        var damaged: [String] = []
        for name in names {
            let path = (folder as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path), let entry = try? JSONDecoder().decode(Entry.self, from: data) else {
                damaged.append(path)
                continue
            }
            let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
            found.append((modified, entry))
        }
        return (found.sorted { ($0.0, $0.1.journalKey) < ($1.0, $1.1.journalKey) }.map(\.1), damaged)
    }
}

/// A run's hold on its journal entry (`HookJournal.lock`). The descriptor is close-on-exec in
/// the receiver and handed to the command as descriptor `HandOffLock.commandDescriptor`, so the lock
/// lasts until both the receiver has let go and every process of the command has ended.
///
/// Sendability (`@unchecked Sendable`): `descriptor` is read, released and closed only by the thread
/// that runs the hand-off (a run of `HookQueue`, on a thread of its own), which takes the lock
/// (`HookJournal.lock`) and lets it go; the compiler cannot see that ownership.
final class HandOffLock: @unchecked Sendable {
    /// Where the command finds the lock (above the descriptors `sh` redirections can name, 0-9).
    static let commandDescriptor: Int32 = 10

    private(set) var descriptor: Int32
    private let lockPath: String
    private let entryPath: String
    /// The entry the lock was taken for: recording the job again replaces it (a new job).
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

/// The journal of finished files' hand-offs (`--on-finalize`): `OUT/.handoff/`.
typealias HandOffJournal = HookJournal<FinishedRecording>

extension HookJournal where Entry == FinishedRecording {
    /// The journal's folder name inside the output folder.
    static var folderName: String { ".handoff" }

    init(outputDirectory: String) {
        self.init(outputDirectory: outputDirectory, folderName: Self.folderName)
    }
}
