import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `syncfs(2)`: makes everything written to one file system durable in one call, the data of every
/// file on it (and its metadata). The receiver's sync rounds use it (docs/DURABILITY.md, "Group commit").
///
/// The folder stays open for the syncer's life: Linux reports a write-back error to `syncfs` only
/// when it happened after the descriptor was opened, so a folder opened afresh for each round would
/// miss an error the kernel hit between two rounds. The pool's commit thread (new streams' files)
/// and its checkpoint thread both sync through it, possibly at once.
///
/// Sendability: the open folders are in a `Mutex`, taken to look a folder up (and open it the first
/// time); the `syncfs` itself runs outside it, so the two threads' syncs never wait for each other.
final class FileSystemSync: Sendable {
    private typealias SyncFS = @convention(c) (Int32) -> Int32

    /// Glibc declares `syncfs` only for `_GNU_SOURCE`, which the Swift module does not see: look it up.
    private static let function: SyncFS? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: SyncFS.self)
    }()

    /// The folders opened so far, by path, kept open for the syncer's life.
    private let descriptors = Mutex<[String: Int32]>([:])

    deinit {
        descriptors.withLock { descriptors in
            for descriptor in descriptors.values { close(descriptor) }
        }
    }

    /// Syncs the file system holding `directory`; the errno when that failed (or syncfs is missing).
    func synchronize(directory: String) -> Int32? {
        guard let function = Self.function else { return ENOSYS }
        let opened: Result<Int32, OpenFailure> = descriptors.withLock { descriptors in
            if let known = descriptors[directory] { return .success(known) }
            let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { return .failure(OpenFailure(code: errno)) }
            descriptors[directory] = descriptor
            return .success(descriptor)
        }
        let descriptor: Int32
        switch opened {
        case .success(let folder): descriptor = folder
        case .failure(let failure): return failure.code
        }
        while true {
            if function(descriptor) == 0 { return nil }
            if errno != EINTR { return errno }
        }
    }

    /// Why a folder could not be opened: its errno.
    private struct OpenFailure: Error {
        let code: Int32
    }
}

/// How the receiver makes its recordings durable at a checkpoint (and a new stream's files before
/// its first Ack): one `syncfs` of the file system, or an `fdatasync` of each file where `syncfs`
/// does not reach the storage. docs/DURABILITY.md lists the file systems known to need the latter.
public enum RecordingSyncMethod: Sendable, Equatable {
    /// `syncfs(2)` of the file system holding the output folder: one call for every file.
    case fileSystem
    /// `fdatasync(2)` of every file written (a FUSE file system: the kernel's `syncfs` sends the
    /// FUSE server nothing, so GlusterFS, CephFS through ceph-fuse, JuiceFS or MooseFS would keep
    /// the data in their caches).
    case eachFile

    /// FUSE's `statfs` magic number (linux/magic.h `FUSE_SUPER_MAGIC`).
    static let fuseMagic = 0x6573_5546

    /// The method for the file system holding `directory`: `eachFile` on FUSE (or when the file
    /// system cannot be told), else `fileSystem`.
    public static func detect(directory: String) -> RecordingSyncMethod {
        guard let type = fileSystemType(directory) else { return .eachFile }
        return type == fuseMagic ? .eachFile : .fileSystem
    }

    private typealias StatFS = @convention(c) (UnsafePointer<CChar>, UnsafeMutableRawPointer) -> Int32

    /// Glibc declares `statfs` in <sys/vfs.h>, which the Swift module does not import: look it up.
    private static let statfsFunction: StatFS? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "statfs") else { return nil }
        return unsafeBitCast(symbol, to: StatFS.self)
    }()

    /// `statfs(2)`'s `f_type` for `directory`: the first field of `struct statfs` on every Linux
    /// architecture (a word); the buffer is larger than the structure anywhere (120 bytes on x86-64).
    static func fileSystemType(_ directory: String) -> Int? {
        guard let function = statfsFunction else { return nil }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 512, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: 512)
        guard function(directory, buffer) == 0 else { return nil }
        return buffer.load(as: Int.self)
    }
}
