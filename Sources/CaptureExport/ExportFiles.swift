import CaptureErrorText
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The output folder of an export, made on demand as the receiver makes its `--out`; a failure
/// is told in the system's words (`SystemErrorText`), never a library's own wording.
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
            if mkdir(path, 0o777) != 0, errno != EEXIST {
                throw .writeFailed("cannot make the folder \(folder) for the export: \(SystemErrorText.errno(errno))")
            }
        }
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw .writeFailed("cannot export into \(folder): a part of that path is a file, not a folder")
        }
    }
}
