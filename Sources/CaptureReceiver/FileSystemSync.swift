import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `syncfs(2)`: makes everything written to one file system durable in one call, the data of every
/// file on it (and its metadata). The receiver's sync rounds use it (docs/DURABILITY.md, "Group commit").
enum FileSystemSync {
    private typealias SyncFS = @convention(c) (Int32) -> Int32

    /// Glibc declares `syncfs` only for `_GNU_SOURCE`, which the Swift module does not see: look it up.
    private static let function: SyncFS? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: SyncFS.self)
    }()

    /// Syncs the file system holding `directory`; the errno when that failed (or syncfs is missing).
    static func synchronize(directory: String) -> Int32? {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        guard let function else { return ENOSYS }
        while true {
            if function(descriptor) == 0 { return nil }
            if errno != EINTR { return errno }
        }
    }
}
