import Foundation

/// Sanitizes the parts of stream file names (`FileNameTemplate` names the files): always a plain
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
}
