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
struct HandOffJournal: Sendable {
    /// The journal's folder name inside the output folder.
    static let folderName = ".handoff"
    let folder: String

    init(outputDirectory: String) {
        folder = (outputDirectory as NSString).appendingPathComponent(Self.folderName)
    }

    private func entryPath(_ relativePath: String) -> String {
        let digest = SHA256.hash(data: Data(relativePath.utf8)).map { String(format: "%02x", $0) }.joined()
        return (folder as NSString).appendingPathComponent(digest + ".json")
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

    /// Removes the entry of the file at `relativePath` (its hand-off is done).
    func remove(_ relativePath: String) {
        try? DurableFile.remove(entryPath(relativePath))
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
