/// What `capture-recv export` (and `--export-on-finalize`) writes.
public enum ExportFormat: String, Sendable, CaseIterable, Equatable {
    /// Broadcast Wave: WAV with a `bext` chunk (origination date and time, time reference) and gap
    /// markers as `cue` points with `labl` labels.
    case wav
    /// The same as RF64, for recordings beyond WAV's 4 GiB.
    case rf64
    /// FLAC, the times as Vorbis comments.
    case flac
    /// Ogg Opus, for Opus recordings: the packets remuxed without re-encoding.
    case ogg

    /// The exported file's extension.
    public var fileExtension: String {
        switch self {
        case .wav: return "wav"
        case .rf64: return "rf64.wav"
        case .flac: return "flac"
        case .ogg: return "opus"
        }
    }
}

/// Why a recording could not be exported; each message says what to do.
public enum ExportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The recording cannot be read (not a CAF, damaged, unfinished).
    case unreadable(String)
    /// The recording's format cannot go to the asked format.
    case unsupported(String)
    /// The export already exists.
    case exists(String)
    /// Writing the export failed.
    case writeFailed(String)

    public var description: String {
        switch self {
        case .unreadable(let message), .unsupported(let message), .writeFailed(let message): return message
        case .exists(let path): return "\(path) exists already; remove it or pass --force to replace it"
        }
    }
}
