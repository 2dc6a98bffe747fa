import Foundation

/// The hex files of proto/vectors: `#` comment lines, then hexadecimal bytes with any whitespace.
public enum WireHexFile {
    /// Why a hex file cannot be read.
    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The bytes of a hex file's text (comments and whitespace ignored).
    public static func parse(_ text: String) throws(ParseError) -> [UInt8] {
        var bytes: [UInt8] = []
        var pendingNibble: UInt8?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("#") { continue }
            for character in line where !character.isWhitespace {
                guard let nibble = character.hexDigitValue.map(UInt8.init) else {
                    throw ParseError(description: "'\(character)' is not a hexadecimal digit")
                }
                if let high = pendingNibble {
                    bytes.append(high << 4 | nibble)
                    pendingNibble = nil
                } else {
                    pendingNibble = nibble
                }
            }
        }
        guard pendingNibble == nil else { throw ParseError(description: "odd number of hexadecimal digits") }
        return bytes
    }

    /// The comment lines of a hex file, without their `#` and leading space.
    public static func comments(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("#") else { return nil }
            return String(trimmed.dropFirst()).trimmingCharacters(in: .whitespaces)
        }
    }

    /// A hex file's text: the comments, then the bytes in lines of 16, uppercase, space separated.
    /// `firstLineBytes` puts that many bytes alone on the first line (a frame's 5-byte header).
    public static func format(_ bytes: [UInt8], comments: [String], firstLineBytes: Int? = nil) -> String {
        var lines = comments.map { "# " + $0 }
        var rest = bytes[...]
        if let first = firstLineBytes, first < bytes.count {
            lines.append(hex(rest.prefix(first)))
            rest = rest.dropFirst(first)
        }
        while !rest.isEmpty {
            lines.append(hex(rest.prefix(16)))
            rest = rest.dropFirst(16)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Bytes as uppercase hex pairs separated by spaces.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String(format: "%02X", $0) }.joined(separator: " ")
    }
}
