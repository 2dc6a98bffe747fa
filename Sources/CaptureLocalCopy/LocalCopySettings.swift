import CaptureCore
import Foundation

/// What `capture-send --record PATH` asks for: a safety copy of the capture, in full quality, written
/// on the field unit while the stream goes out (`LocalCopy`).
public struct LocalCopySettings: Sendable, Equatable {
    /// The file kinds a local copy can be.
    public enum Container: String, Sendable, Equatable {
        /// Core Audio Format through the project's crash-safe writer: readable up to the last buffer
        /// after a crash, with gap markers.
        case caf
        /// Broadcast Wave through libsndfile, its header rewritten with every write.
        case wav
        /// FLAC through libsndfile (16- or 24-bit integers).
        case flac
    }

    /// The file, or with `segmentLength` the pattern of the files: `take.caf` becomes
    /// `take_20261128T041500Z.caf`, named by the UTC time of each file's first sample.
    public var path: String
    /// The container, from the path's extension.
    public var container: Container
    /// Cut the copy into files of this length (whole seconds, 1 s to 24 h) at UTC boundaries of the
    /// capture's timeline, counted from each UTC midnight, as the receiver's `--segment` does; nil:
    /// one file.
    public var segmentLength: Duration?
    /// Audio that may wait in memory for the disk before the copy is given up (30 s by default; the
    /// capture is never held up by it).
    public var backlog: Duration

    /// The settings for `path`; its extension says the container (`.caf`, `.wav`, `.flac`).
    public init(path: String, segmentLength: Duration? = nil, backlog: Duration = .seconds(30)) throws(LocalCopyError) {
        let suffix = (path as NSString).pathExtension.lowercased()
        guard let container = Container(rawValue: suffix) else {
            throw .unsupportedContainer(path: path)
        }
        if let segmentLength, !LocalCopySegments.allowedLengths.contains(segmentLength) || segmentLength.components.attoseconds != 0 {
            throw .invalidSegment(segmentLength)
        }
        self.path = path
        self.container = container
        self.segmentLength = segmentLength
        self.backlog = backlog
    }

    /// Refuses a capture format the container cannot hold.
    public func check(_ format: StreamFormat) throws(LocalCopyError) {
        guard let sample = format.pcmSampleFormat else { throw .unsupportedFormat("the local copy takes linear PCM from the capture, not \(format)") }
        if container == .flac {
            guard sample == .s16 || sample == .s24 else {
                throw .unsupportedFormat("FLAC holds 16- or 24-bit integers and the capture is \(sample): record to .caf or .wav, or capture s16 or s24")
            }
            guard format.channelCount <= 8 else { throw .unsupportedFormat("FLAC holds at most 8 channels: record to .caf or .wav") }
        }
    }
}

/// Why a local copy cannot be made or went wrong; each message says what to do, naming the
/// settings through a `SettingNaming` (`message(naming:)`).
public enum LocalCopyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path's extension names no container the copy can write.
    case unsupportedContainer(path: String)
    /// The segment length is not a whole number of seconds from 1 s to 24 h.
    case invalidSegment(Duration)
    /// The capture's format does not fit the container.
    case unsupportedFormat(String)
    /// The file could not be created.
    case cannotCreate(path: String, reason: String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        let localCopy = naming.name(of: .localCopy)
        switch self {
        case .unsupportedContainer(let path):
            return "\(localCopy) \(path): the file must end in .caf, .wav or .flac"
        case .invalidSegment(let length):
            return "\(naming.name(of: .localCopySegment)) is \(length.secondsText) s: use whole seconds from 1 s to 24 h (1s, 15m, 1h)"
        case .unsupportedFormat(let reason):
            return "\(localCopy): \(reason)"
        case .cannotCreate(let path, let reason):
            return "\(localCopy): cannot create \(path): \(reason); choose a folder the user can write to, with room"
        }
    }
}
