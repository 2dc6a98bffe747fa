import CAF
import CaptureCore
import CaptureWire
import Foundation
import Logging

/// The receiver's unfinalized stream files on disk: found at start-up (so that files without an
/// entry in the `StreamIndex` get one), and finalized once their resume window has passed.
enum ResumableFiles {
    /// The file at `path` can still be continued: it is unfinished (a packet journal beside it), or
    /// was finalized at a shutdown and kept its position log.
    static func isUnfinished(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)) || FileManager.default.fileExists(atPath: StreamPositionLog.path(for: path))
    }

    /// When the file was last made durable (its position log's modification time, else the file's).
    static func lastDurable(_ path: String) -> Date? {
        let attributes = (try? FileManager.default.attributesOfItem(atPath: StreamPositionLog.path(for: path)))
            ?? (try? FileManager.default.attributesOfItem(atPath: path))
        return attributes?[.modificationDate] as? Date
    }

    /// A file a stream can resume.
    struct Found: Equatable {
        var stream: UUID
        var path: String
        /// When the file was last made durable (its position log's modification time).
        var since: Date
    }

    /// The CAF files in `directory` and its folders (a `--name-template` makes folders), not in
    /// hidden folders (the receiver's own, such as the stream index), sorted.
    static func cafFiles(in directory: String) -> [String] {
        var paths: [String] = []
        var folders = [directory]
        while let folder = folders.popLast() {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where !name.hasPrefix(".") {
                let path = (folder as NSString).appendingPathComponent(name)
                if name.hasSuffix(".caf") {
                    paths.append(path)
                } else if (try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType) == .typeDirectory {
                    // Not a symbolic link's target (attributesOfItem does not follow links): no loops.
                    folders.append(path)
                }
            }
        }
        return paths.sorted()
    }

    /// The resumable CAF files in `directory` and its folders: unfinished ones (a journal beside them) and
    /// finished ones that kept their position log (finalized when a receiver shut down, or a crash
    /// between finalizing and removing the log), with the stream each belongs to (its `info` chunk's
    /// "stream id"). Files that cannot be read are logged and left alone for `capture-recv recover`.
    static func scan(directory: String, logger: Logger) -> [Found] {
        var found: [UUID: Found] = [:]
        for path in cafFiles(in: directory) {
            // Unfinished files have a journal; files finalized at a shutdown keep their position log.
            guard isUnfinished(path) else { continue }
            let file: CAFFile
            do throws(CAFError) {
                file = try CAFFile.read(path: path)
            } catch {
                logger.error("an unfinished file cannot be read; finish it with `capture-recv recover`", metadata: [
                    "path": "\(path)", "error": "\(error.description)",
                ])
                continue
            }
            guard let idText = file.info.first(where: { $0.key == "stream id" })?.value, let stream = UUID(uuidString: idText) else {
                logger.warning("an unfinished file has no stream id; it cannot be resumed; finish it with `capture-recv recover`", metadata: ["path": "\(path)"])
                continue
            }
            let since = lastDurable(path) ?? Date()
            let candidate = Found(stream: stream, path: path, since: since)
            if let earlier = found[stream], earlier.since > since {
                logger.warning("two unfinished files belong to one stream; the newer one will be resumed", metadata: [
                    "kept": "\(earlier.path)", "other": "\(path)",
                ])
                continue
            }
            found[stream] = candidate
        }
        return found.values.sorted { $0.path < $1.path }
    }

    /// How an abandoned stream's file was finalized: its frames and packets, and, when its position
    /// log named it, the last sequence and the sample index the file ends at (where a stream that
    /// continues it must begin, PROTOCOL.md §8.1).
    struct AbandonedFile {
        var frames: Int64
        var packets: Int64
        var end: StreamPosition?
    }

    /// Finalizes the file of a stream whose sender did not come back within the resume window, and
    /// removes its position log. The file ends at the last acknowledged (durable) position its
    /// position log records: audio written after it was never acknowledged, so its sender still
    /// holds it and delivers it in the stream that continues this one, which then joins it exactly.
    /// Without a position log everything the file holds is kept (`CAFRecovery`). Nil when it could not
    /// be finalized (the file stays as it is).
    @discardableResult
    ///
    /// `beforeRemovingLog` is told of the finalized file (path, frames) before its position log goes:
    /// the hand-off journal records it there, so a crash in between leaves it resumable, not lost.
    static func finalizeAbandoned(path: String, logger: Logger, beforeRemovingLog: (@Sendable (String, Int64) -> Void)? = nil) -> AbandonedFile? {
        do throws(CAFError) {
            let finished: AbandonedFile
            if let record = try? StreamPositionLog.lastRecord(cafPath: path) {
                let writer = try CAFWriter.resume(path: path, keepingPackets: record.packets)
                try writer.finalize()
                finished = AbandonedFile(frames: writer.frameCount, packets: writer.packetCount, end: record.position)
            } else {
                let report = try CAFRecovery.recover(path: path)
                finished = AbandonedFile(frames: report.frameCount, packets: Int64(report.packetCount), end: nil)
            }
            beforeRemovingLog?(path, finished.frames)
            try? StreamPositionLog.remove(cafPath: path)
            logger.notice("the stream's sender did not come back within the resume window; file finalized", metadata: [
                "path": "\(path)", "frames": "\(finished.frames)", "packets": "\(finished.packets)",
            ])
            return finished
        } catch {
            logger.error("cannot finalize an abandoned stream file; run `capture-recv recover` on it", metadata: [
                "path": "\(path)", "error": "\(error.description)",
            ])
            return nil
        }
    }
}
