import CaptureCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Names recordings from a template (`--name-template`): strftime fields (`%Y`, `%m`, `%d`, `%H`,
/// `%M`, `%S`, `%j`, ...) of the file's start time in UTC, and `{stream}` (the stream's name),
/// `{stream_id}` (its id), `{host}` (the sender's host). `/` makes folders. Every folder and file name
/// is sanitized on its own (`StreamFileNaming.sanitize`: no `..`, no leading dot, no control or path
/// characters), so a name never leaves the output folder whatever the template or the sender sends.
/// `.caf` is appended, and when that name is taken a `NameVariant` tells the file apart.
public struct FileNameTemplate: Sendable, Equatable, CustomStringConvertible {
    /// Today's names: `NAME_YYYYMMDDTHHMMSSZ.caf`.
    public static let standard = FileNameTemplate(unchecked: "{stream}_%Y%m%dT%H%M%SZ")

    /// The template as given.
    public let text: String
    public var description: String { text }

    /// The values of a file's placeholders.
    public struct Fields: Sendable, Equatable {
        public var stream: String
        public var streamID: UUID
        public var host: String
        /// The file's start: its first valid sample's UTC time, in ns since 1970.
        public var start: Int64

        public init(stream: String, streamID: UUID, host: String, start: Int64) {
            self.stream = stream
            self.streamID = streamID
            self.host = host
            self.start = start
        }
    }

    /// Why a template cannot be used.
    public enum TemplateError: Error, Equatable, CustomStringConvertible {
        case empty
        case absolute(String)
        case unknownPlaceholder(String)

        public var description: String { message(naming: LibrarySettingNames()) }

        /// The error's text, naming the output folder as `naming` does.
        public func message(naming: any SettingNaming) -> String {
            switch self {
            case .empty: return "the file name template is empty; give one such as '{stream}/%Y-%m-%d/{stream}_%H%M%SZ'"
            case .absolute(let text): return "the file name template '\(text)' starts with '/'; names are relative to \(naming.name(of: .outputFolder))"
            case .unknownPlaceholder(let name): return "the file name template uses {\(name)}; the placeholders are {stream}, {stream_id} and {host}"
            }
        }
    }

    private static let placeholders: Set<String> = ["stream", "stream_id", "host"]

    /// A template, checked: not empty, not absolute, only known `{...}` placeholders.
    public init(_ text: String) throws(TemplateError) {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw .empty }
        guard !text.hasPrefix("/") else { throw .absolute(text) }
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { break }
            let name = String(rest[rest.index(after: open)..<close])
            guard Self.placeholders.contains(name) else { throw .unknownPlaceholder(name) }
            rest = rest[rest.index(after: close)...]
        }
        self.text = text
    }

    private init(unchecked text: String) { self.text = text }

    /// How a file's name differs from its natural name (the template's), when that is taken.
    /// Sanitized names hold only letters, digits, `-`, `_` and `.`, so a name with a `+` is never
    /// another stream's natural or numbered name: `+` followed by the stream id cannot clash with
    /// any other stream's file (a stream id is unique and only the stream's owner writes it).
    public enum NameVariant: Sendable, Equatable {
        /// The template's name.
        case natural
        /// `-N` before `.caf` (N ≥ 2).
        case numbered(Int)
        /// `+STREAM-ID` before `.caf`.
        case streamID
        /// `+STREAM-ID+FIRST-SAMPLE` before `.caf`, and `-N` after it for N ≥ 2: the stream's own
        /// files of one natural name told apart (segments of a template without time fields, or a
        /// file made again after a crash).
        case streamIDAndFirstSample(Int64, attempt: Int)

        /// What goes before `.caf`.
        func suffix(streamID: UUID) -> String {
            switch self {
            case .natural: return ""
            case .numbered(let number): return "-\(number)"
            case .streamID: return "+" + streamID.uuidString.lowercased()
            case .streamIDAndFirstSample(let first, let attempt):
                return "+" + streamID.uuidString.lowercased() + "+\(first)" + (attempt > 1 ? "-\(attempt)" : "")
            }
        }
    }

    /// The file's path relative to the output folder, told apart from its natural name by `variant`.
    public func relativePath(_ fields: Fields, variant: NameVariant = .natural) -> String {
        let expanded = Self.strftime(
            text.replacingOccurrences(of: "{stream_id}", with: fields.streamID.uuidString.lowercased())
                .replacingOccurrences(of: "{stream}", with: StreamFileNaming.sanitize(fields.stream))
                .replacingOccurrences(of: "{host}", with: fields.host.isEmpty ? "unknown-host" : StreamFileNaming.sanitize(fields.host)),
            at: fields.start)
        let components = expanded.split(separator: "/").map { StreamFileNaming.sanitize(String($0)) }
        let folders = components.dropLast()
        let file = (components.last ?? "stream") + variant.suffix(streamID: fields.streamID) + ".caf"
        return (folders + [file]).joined(separator: "/")
    }

    /// `format` with its strftime fields filled in for `time` (ns since 1970) in UTC.
    static func strftime(_ format: String, at time: Int64) -> String {
        // Seconds rounded down, for every Int64 (a time before 1970 included) without overflow.
        let (quotient, remainder) = time.quotientAndRemainder(dividingBy: 1_000_000_000)
        var seconds = time_t(remainder < 0 ? quotient - 1 : quotient)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 4_096)
        let count = Glibc.strftime(&buffer, buffer.count, format, &parts)
        guard count > 0 || format.isEmpty else { return format }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
