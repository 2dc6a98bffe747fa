import CaptureWire
import Foundation

/// What the stream index keeps of a finished stream for its resume window, so that a sender whose
/// EndAccepted was lost with its connection gets the same EndAccepted again when it comes back,
/// instead of its audio being stored a second time (issue 19, item 1).
///
/// Stored as the stream's index entry, in place of the unfinished file's path:
/// ```
/// finished
/// RELATIVE/PATH.caf
/// frames=N packets=N last-sequence=N end-sample=N [complete=0]
/// ```
/// The entry's modification time is when the stream finished; the sweep removes it after the
/// resume window.
public struct FinishedStreamRecord: Sendable, Equatable {
    /// The file, relative to the output folder.
    public var relativePath: String
    /// Frames in the file.
    public var frames: Int64
    /// Packets in the file.
    public var packets: Int64
    /// Where the stream ends: EndOfStream's `last_sequence` and `end_sample_time` (for an abandoned
    /// stream: where its file ends).
    public var end: StreamPosition
    /// True when the stream ended with its EndOfStream; false when its file was finalized because its
    /// sender did not come back within the resume window (then `end` is where the file ends, and a
    /// stream that continues it begins after it).
    public var complete: Bool

    static let marker = "finished"

    /// The entry's text.
    var entryText: String {
        "\(Self.marker)\n\(relativePath)\nframes=\(frames) packets=\(packets) last-sequence=\(end.lastSequence) end-sample=\(end.endSampleTime)\(complete ? "" : " complete=0")\n"
    }

    /// The record an entry's text holds; nil when the entry names an unfinished file (one line, a
    /// path) or is damaged.
    init?(entryText text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 3, lines[0] == Self.marker, !lines[1].isEmpty else { return nil }
        var fields: [Substring: Substring] = [:]
        for field in lines[2].split(separator: " ") {
            let parts = field.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            fields[parts[0]] = parts[1]
        }
        guard let frames = fields["frames"].flatMap({ Int64($0) }), let packets = fields["packets"].flatMap({ Int64($0) }),
              let last = fields["last-sequence"].flatMap({ UInt64($0) }), let endSample = fields["end-sample"].flatMap({ Int64($0) }),
              frames >= 0, packets >= 0, last <= WireProtocol.maximumSequence, endSample >= 0
        else { return nil }
        self.init(
            relativePath: String(lines[1]), frames: frames, packets: packets, end: StreamPosition(lastSequence: last, endSampleTime: endSample),
            complete: fields["complete"] != "0")
    }

    public init(relativePath: String, frames: Int64, packets: Int64, end: StreamPosition, complete: Bool = true) {
        self.complete = complete
        self.relativePath = relativePath
        self.frames = frames
        self.packets = packets
        self.end = end
    }

    /// Whether an entry's text is a finished record (damaged or not): such an entry never names a
    /// file to continue.
    static func marksFinished(_ text: String) -> Bool {
        text.hasPrefix(marker + "\n")
    }
}
