import CaptureErrorText
import Foundation

/// The shared tokens a receiver accepts (or the one a sender presents), read from a token file:
/// one token a line, blank lines and lines starting with `#` ignored, surrounding spaces trimmed.
public struct AuthTokens: Sendable {
    /// The tokens, in file order.
    public let tokens: [String]
    /// Things the user should fix but that do not stop the program (a file others can read).
    public let warnings: [String]

    /// The longest token accepted, in bytes (the handshake carries it).
    public static let maximumTokenBytes = 1024

    public init(tokens: [String], warnings: [String] = []) {
        self.tokens = tokens
        self.warnings = warnings
    }

    /// Reads and parses a token file; warns when other users may read it.
    public static func load(path: String) throws(SecurityError) -> AuthTokens {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadableFile(path: path, reason: SystemErrorText.describe(error))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw .badToken(path: path, line: 1, reason: "is not UTF-8 text; write tokens as plain text")
        }
        let parsed = try parse(text, path: path)
        var warnings: [String] = []
        if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
           let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            warnings.append("the token file \(path) can be read by other users (mode \(String(mode & 0o777, radix: 8))); run chmod 600 \(path)")
        }
        return AuthTokens(tokens: parsed.tokens, warnings: warnings)
    }

    /// Parses the text of a token file (`path` only names it in errors).
    public static func parse(_ text: String, path: String) throws(SecurityError) -> AuthTokens {
        var tokens: [String] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.utf8.count > maximumTokenBytes {
                throw .badToken(path: path, line: index + 1, reason: "is longer than \(maximumTokenBytes) bytes; use a shorter token")
            }
            if line.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw .badToken(path: path, line: index + 1, reason: "contains control characters; use printable characters only")
            }
            tokens.append(line)
        }
        guard !tokens.isEmpty else { throw .emptyTokenFile(path: path) }
        return AuthTokens(tokens: tokens)
    }

    /// Whether `candidate` is one of the tokens. Compares against every token in constant time, so
    /// neither which token matched nor how much of a guess was right shows in the time taken.
    public func accepts(_ candidate: String) -> Bool {
        var matched = false
        for token in tokens {
            matched = ConstantTime.tokenEquals(candidate, token) || matched
        }
        return matched
    }
}
