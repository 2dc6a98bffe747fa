import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `syncfs(2)`: makes everything written to one file system durable in one call, the data of every
/// file on it (and its metadata). The receiver's sync rounds use it (docs/DURABILITY.md, "Group commit").
///
/// The folder stays open for the syncer's life: Linux reports a write-back error to `syncfs` only
/// when it happened after the descriptor was opened, so a folder opened afresh for each round would
/// miss an error the kernel hit between two rounds. Used from one thread (the pool's commit thread).
///
/// Sendability (`@unchecked Sendable`): used by one thread only (the pool's commit thread), as said above.
final class FileSystemSync: @unchecked Sendable {
    private typealias SyncFS = @convention(c) (Int32) -> Int32

    /// Glibc declares `syncfs` only for `_GNU_SOURCE`, which the Swift module does not see: look it up.
    private static let function: SyncFS? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: SyncFS.self)
    }()

    private var descriptors: [String: Int32] = [:]

    deinit {
        for descriptor in descriptors.values { close(descriptor) }
    }

    /// Syncs the file system holding `directory`; the errno when that failed (or syncfs is missing).
    func synchronize(directory: String) -> Int32? {
        guard let function = Self.function else { return ENOSYS }
        let descriptor: Int32
        if let open = descriptors[directory] {
            descriptor = open
        } else {
            descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { return errno }
            descriptors[directory] = descriptor
        }
        while true {
            if function(descriptor) == 0 { return nil }
            if errno != EINTR { return errno }
        }
    }
}
