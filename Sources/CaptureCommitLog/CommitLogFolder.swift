import CaptureCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The commit log's folder on disk: the control file and the segment files
/// (`segment-<16 hex digits>`, numbered by the part of the endless log they hold), how segments are
/// made (zero-filled to their full size and synced, as PostgreSQL makes WAL segments, so that a
/// round's fdatasync never has to allocate blocks) and listed. Used from one thread at a time, and by
/// `SegmentPreparer`'s thread for a segment the log has not reached.
struct CommitLogFolder {
    let directory: String

    var controlPath: String { directory + "/" + CommitLogControl.fileName }

    func segmentPath(_ number: UInt64) -> String {
        let digits = String(number, radix: 16)
        return directory + "/segment-" + String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }

    /// The numbers of the segment files present, ascending.
    func segmentNumbers() throws(CommitLogError) -> [UInt64] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw .unreadable(path: directory, reason: "the folder cannot be listed")
        }
        return names.compactMap { name -> UInt64? in
            guard name.hasPrefix("segment-"), name.count == 24 else { return nil }
            return UInt64(name.dropFirst(8), radix: 16)
        }.sorted()
    }

    /// Reads the control file; nil when there is none.
    func readControl() throws(CommitLogError) -> CommitLogControl? {
        let file: DurableFile?
        do {
            file = try DurableFile.openForReading(path: controlPath)
        } catch {
            throw .unreadable(path: controlPath, reason: error.description)
        }
        guard let file else { return nil }
        defer { file.close() }
        let bytes: [UInt8]
        do {
            bytes = try file.read(count: CommitLogControl.size + 1, at: 0)
        } catch {
            throw .unreadable(path: controlPath, reason: error.description)
        }
        switch CommitLogControl.decode(bytes) {
        case .success(let control): return control
        case .failure(let damage): throw .damagedControl(path: controlPath, reason: damage.description)
        }
    }

    /// Replaces the control file atomically.
    func writeControl(_ control: CommitLogControl) throws(CommitLogError) {
        do {
            try DurableFile.replaceAtomically(path: controlPath, with: control.encoded)
        } catch {
            throw error.isNoSpace ? .logVolumeFull(directory: directory, segmentSize: control.geometry.segmentSize) : .writeFailed(error)
        }
    }

    /// Opens segment `number` for reading and writing; nil when it does not exist.
    func openSegment(_ number: UInt64) throws(CommitLogError) -> DurableFile? {
        let path = segmentPath(number)
        guard access(path, F_OK) == 0 else { return nil }
        do {
            return try DurableFile.open(path: path, create: false)
        } catch {
            throw .unreadable(path: path, reason: error.description)
        }
    }

    /// Makes segment `number`: `size` zero bytes, synced, under a temporary name renamed into place,
    /// then the folder synced. A full volume removes the partial file and says so.
    func makeSegment(_ number: UInt64, size: UInt64) throws(CommitLogError) -> DurableFile {
        let path = segmentPath(number)
        let partial = path + ".partial"
        do {
            let file = try DurableFile.open(path: partial, create: true, truncate: true)
            let chunk = [UInt8](repeating: 0, count: 1 << 20)
            var offset: UInt64 = 0
            while offset < size {
                let count = Int(min(UInt64(chunk.count), size - offset))
                try file.write(count == chunk.count ? chunk : [UInt8](repeating: 0, count: count), at: Int64(offset))
                offset += UInt64(count)
            }
            try file.synchronize()
            try file.rename(to: path)
            try DurableFile.synchronizeDirectory(directory)
            return file
        } catch {
            try? DurableFile.remove(partial)
            if error.isNoSpace { throw .logVolumeFull(directory: directory, segmentSize: size) }
            throw .writeFailed(error)
        }
    }

    /// Gives segment `old` the number `new` (recycling it for a later part of the log).
    func renameSegment(_ old: UInt64, to new: UInt64) throws(CommitLogError) {
        guard rename(segmentPath(old), segmentPath(new)) == 0 else {
            throw .writeFailed(DurableFileError(operation: "renaming", path: segmentPath(old), code: errno))
        }
    }

    /// Removes segment `number`.
    func removeSegment(_ number: UInt64) throws(CommitLogError) {
        do {
            try DurableFile.remove(segmentPath(number))
        } catch {
            throw .writeFailed(error)
        }
    }

    /// Makes renames and removals in the folder durable.
    func synchronize() throws(CommitLogError) {
        do {
            try DurableFile.synchronizeDirectory(directory)
        } catch {
            throw .writeFailed(error)
        }
    }
}
