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

extension FinishedRecording: HookJournalEntry {
    /// One entry per finished file: its path relative to the output folder.
    var journalKey: String { relativePath }
}
