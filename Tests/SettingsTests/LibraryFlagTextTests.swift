import Foundation
import XCTest

/// The library modules name no command-line flag in their texts (issue: "leaky modules"): a
/// message that points to a setting names it through a `SettingNaming`, which the executables
/// spell as their flags. Reads every Swift file of Sources/ except the executables' and
/// CaptureCLISupport, and looks in its string literals (not its comments) for a `--flag`.
final class LibraryFlagTextTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Modules whose texts are the command line's own.
    private static let commandLineModules: Set<String> = ["capture-send", "capture-recv", "CaptureCLISupport"]
    /// Files whose literals name flags by design: the capture-recv HTTP API's OpenAPI document,
    /// which documents capture-recv's console (`--http-token-file`, `--out`) as served by it.
    private static let documents: Set<String> = ["CaptureConsole/OpenAPIDocument.swift"]

    /// The contents of the string literals of Swift `source`, one entry a literal (or a segment of
    /// one between interpolations), with comments skipped.
    static func stringLiterals(in source: String) -> [String] {
        let characters = Array(source)
        var literals: [String] = []
        var index = 0
        func at(_ offset: Int) -> Character? { index + offset < characters.count ? characters[index + offset] : nil }
        while index < characters.count {
            let character = characters[index]
            if character == "/", at(1) == "/" {
                while index < characters.count, characters[index] != "\n" { index += 1 }
            } else if character == "/", at(1) == "*" {
                index += 2
                while index < characters.count, !(characters[index] == "*" && at(1) == "/") { index += 1 }
                index += 2
            } else if character == "\"" || (character == "#" && at(1) == "\"") {
                var hashes = 0
                while at(0) == "#" { hashes += 1; index += 1 }
                let multiline = at(0) == "\"" && at(1) == "\"" && at(2) == "\""
                index += multiline ? 3 : 1
                let closing = String(repeating: "\"", count: multiline ? 3 : 1) + String(repeating: "#", count: hashes)
                var text = ""
                while index < characters.count {
                    if String(characters[index..<min(characters.count, index + closing.count)]) == closing {
                        index += closing.count
                        break
                    }
                    if characters[index] == "\\", hashes == 0 {
                        // An escape, or an interpolation: skip to its matching parenthesis.
                        if at(1) == "(" {
                            var depth = 0
                            index += 1
                            repeat {
                                if characters[index] == "(" { depth += 1 } else if characters[index] == ")" { depth -= 1 }
                                index += 1
                            } while depth > 0 && index < characters.count
                            text += " "
                            continue
                        }
                        text.append(characters[index])
                        index += 1
                    }
                    if index < characters.count { text.append(characters[index]) }
                    index += 1
                }
                literals.append(text)
            } else {
                index += 1
            }
        }
        return literals
    }

    /// A flag in a text: two dashes and a letter, at the start or after a space, a backtick or a
    /// parenthesis; not a CSS custom property of the console's page (`--ok: …`, `var(--ok)`).
    static func containsFlag(_ text: String) -> Bool {
        let flag = #"(^|[\s`(])--[a-z][a-z0-9-]*"#
        var searched = text.startIndex..<text.endIndex
        while let found = text.range(of: flag, options: .regularExpression, range: searched) {
            let declaration = text[found.upperBound...].hasPrefix(":")
            if !declaration, !text[text.startIndex..<found.lowerBound].hasSuffix("var") { return true }
            searched = found.upperBound..<text.endIndex
        }
        return false
    }

    func testTheLiteralScannerFindsFlagsOnlyInLiterals() {
        let source = #"""
            /// A comment with --out in it.
            let a = "choose another with --listen HOST:PORT" // and --here
            let b = "\(x) is fine"
            let c = #"raw --raw"#
            let d = """
                multi --line
                """
            """#
        let flagged = Self.stringLiterals(in: source).filter(Self.containsFlag)
        XCTAssertEqual(flagged.count, 3, "\(flagged)")
        XCTAssertFalse(Self.containsFlag("a-b --"))
        XCTAssertFalse(Self.containsFlag(":root { --ok: #2e9e4f; } .live { color: var(--ok); }"))
        XCTAssertTrue(Self.containsFlag("the spool's limit (--spool-max)"))
    }

    func testNoLibraryTextNamesAFlag() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        var found: [String] = []
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { !Self.commandLineModules.contains($0) }
        for module in modules.sorted() {
            let folder = sources.appendingPathComponent(module)
            guard let files = FileManager.default.enumerator(atPath: folder.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let relative = "\(module)/\(file)"
                guard !Self.documents.contains(relative) else { continue }
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for literal in Self.stringLiterals(in: text) where Self.containsFlag(literal) {
                    found.append("\(relative): \(literal)")
                }
            }
        }
        XCTAssertEqual(found, [], "library texts that name a flag; name the setting through a SettingNaming instead")
    }
}
