import Foundation

/// Names stream files: a sanitized stream name and the stream's UTC start time, always a plain file
/// name inside the output folder (no path separators, no leading dot, no control characters).
public enum StreamFileNaming {
    /// Longest sanitized name, in characters.
    public static let maximumNameLength = 64

    /// Keeps ASCII letters, digits, `-`, `_` and `.`; anything else becomes `_`; a leading run of dots
    /// and dashes is dropped; runs of `_` collapse; an empty result becomes `stream`.
    public static func sanitize(_ name: String) -> String {
        var result = ""
        var lastWasReplacement = false
        for scalar in name.unicodeScalars {
            let allowed = scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "-" || scalar == "_" || scalar == ".")
            if allowed && scalar != "_" {
                result.unicodeScalars.append(scalar)
                lastWasReplacement = false
            } else if !lastWasReplacement {
                result.append("_")
                lastWasReplacement = true
            }
        }
        while let first = result.first, first == "." || first == "-" || first == "_" { result.removeFirst() }
        while result.contains("..") { result = result.replacingOccurrences(of: "..", with: ".") }
        if result.count > maximumNameLength { result = String(result.prefix(maximumNameLength)) }
        while let last = result.last, last == "." || last == "_" { result.removeLast() }
        return result.isEmpty ? "stream" : result
    }

    /// `NAME_YYYYMMDDTHHMMSSZ.caf`, or with `-N` before the extension for the N-th file of that name.
    public static func fileName(streamName: String, start: Date, attempt: Int = 1) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let suffix = attempt > 1 ? "-\(attempt)" : ""
        return "\(sanitize(streamName))_\(formatter.string(from: start))\(suffix).caf"
    }
}
