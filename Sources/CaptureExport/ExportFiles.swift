import CaptureErrorText
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The files of an export on disk: its output folder, made on demand as the receiver makes its
/// `--out`, and the finished file made durable (its bytes, then its name) before the export is
/// reported done, so that a power cut after "exported" never leaves an empty or missing file. A
/// failure is told in the system's words (`SystemErrorText`), never a library's own wording.
enum ExportFiles {
    /// Makes `folder` and any missing parent, like `mkdir -p`. Component by component with mkdir(2),
    /// not FileManager's createDirectory, whose error for a path through a file carries no errno
    /// ("the file could not be written" instead of "not a directory").
    static func makeFolder(_ folder: String) throws(ExportError) {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) {
            if isFolder.boolValue { return }
            throw .writeFailed("cannot export into \(folder): it is a file, not a folder")
        }
        var path = folder.hasPrefix("/") ? "" : "."
        for component in folder.split(separator: "/", omittingEmptySubsequences: true) {
            path += "/" + component
            if mkdir(path, 0o777) == 0 {
                // A folder made here is durable once its parent's entry for it is.
                let parent = (path as NSString).deletingLastPathComponent
                if let reason = syncFailure(parent.isEmpty ? "/" : parent) {
                    throw .writeFailed("cannot make the folder \(folder) for the export durable: \(reason)")
                }
            } else if errno != EEXIST {
                throw .writeFailed("cannot make the folder \(folder) for the export: \(SystemErrorText.errno(errno))")
            }
        }
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw .writeFailed("cannot export into \(folder): a part of that path is a file, not a folder")
        }
    }

    /// Makes the bytes of the finished file at `path` (its temporary name) durable before it is
    /// renamed into place, naming `destination` in the error.
    static func makeDurable(_ path: String, destination: String) throws(ExportError) {
        if let reason = syncFailure(path) { throw .writeFailed("cannot write \(destination): \(reason)") }
    }

    /// Makes the folder's entry for a file just renamed into it durable.
    static func makeNameDurable(in folder: String, destination: String) throws(ExportError) {
        if let reason = syncFailure(folder) {
            throw .writeFailed("\(destination) is written, but its name in \(folder) could not be made durable: \(reason)")
        }
    }

    /// fsync(2) of a file or folder: nil when it succeeded, else the system's reason.
    private static func syncFailure(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return SystemErrorText.errno(errno) }
        defer { close(descriptor) }
        return fsync(descriptor) == 0 ? nil : SystemErrorText.errno(errno)
    }
}
