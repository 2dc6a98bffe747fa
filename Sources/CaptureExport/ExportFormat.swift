import CaptureCore

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

/// Why a recording could not be exported; each message says what to do, naming settings through a
/// `SettingNaming` (`message(naming:)`).
public enum ExportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The recording cannot be read (not a CAF, damaged, unfinished).
    case unreadable(String)
    /// The recording's format cannot go to the asked format.
    case unsupported(String)
    /// An Ogg export was asked of a recording that is not Opus (`packetTable`: said of an Opus
    /// export's need for a packet table, when the recording has none).
    case oggNeedsOpus(path: String, packetTable: Bool)
    /// The export already exists.
    case exists(String)
    /// Writing the export failed.
    case writeFailed(String)

    /// One line: control characters (a file name or an `info` value can hold any) are escaped.
    public var description: String { message(naming: LibrarySettingNames()) }

    /// One line, naming the settings as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        let text: String
        switch self {
        case .unreadable(let message), .unsupported(let message), .writeFailed(let message): text = message
        case .oggNeedsOpus(let path, packetTable: true):
            text = "cannot export \(path): it is not an Opus recording with a packet table: \(naming.name(of: .exportFormat, value: "ogg")) remuxes finished Opus recordings"
        case .oggNeedsOpus(let path, packetTable: false):
            text = "cannot export \(path): it is not an Opus recording: \(naming.name(of: .exportFormat, value: "ogg")) remuxes Opus; export linear PCM as flac, wav or rf64"
        case .exists(let path): text = "\(path) exists already; remove it or pass \(naming.name(of: .replaceExport)) to replace it"
        }
        return ExportError.oneLine(text)
    }

    /// `text` with control characters escaped (`\n`, `\u{7}`), cut to `limit` characters when given.
    static func oneLine(_ text: String, limit: Int? = nil) -> String {
        var line = ""
        for (index, character) in text.unicodeScalars.enumerated() {
            if let limit, index >= limit {
                line += "…"
                break
            }
            line += character.properties.generalCategory == .control ? character.escaped(asASCII: true) : String(character)
        }
        return line
    }
}
