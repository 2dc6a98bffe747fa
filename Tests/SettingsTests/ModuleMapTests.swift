import Foundation
import XCTest

/// The module map cannot drift (issue 32, item 4): every module a target imports is one it
/// declares in Package.swift (a target, or a product of a package), or one of the toolchain's; and
/// docs/DESIGN.md's module table lists every library module of Sources/. Read from
/// `swift package dump-package`, the manifest as SwiftPM itself sees it.
final class ModuleMapTests: XCTestCase {
    /// A target as the manifest declares it.
    private struct Target {
        var name: String
        var type: String
        var directory: URL
        /// The modules it may import: its target dependencies and the products it names.
        var declared: Set<String>
    }

    /// Modules every target may import without declaring them: the toolchain's.
    private static let toolchain: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization",
        "XCTest", "Testing", "_Concurrency", "PackagePlugin", "SwiftShims",
    ]

    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func targets() throws -> [Target] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // A scratch path of its own: the running `swift test` holds the package's `.build` lock.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dump-package-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.arguments = ["swift", "package", "--package-path", Self.root.path, "--scratch-path", scratch.path, "dump-package"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "swift package dump-package")
        let manifest = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let list = try XCTUnwrap(manifest["targets"] as? [[String: Any]])
        return list.compactMap { target in
            guard let name = target["name"] as? String, let type = target["type"] as? String else { return nil }
            let path = (target["path"] as? String) ?? (type == "test" ? "Tests/\(name)" : "Sources/\(name)")
            var declared: Set<String> = []
            for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                for key in ["byName", "target", "product"] {
                    // A target's module name has `_` for each `-` (`capture-send` is `capture_send`).
                    if let values = dependency[key] as? [Any], let first = values.first as? String { declared.insert(first.replacingOccurrences(of: "-", with: "_")) }
                }
            }
            return Target(name: name, type: type, directory: Self.root.appendingPathComponent(path), declared: declared)
        }
    }

    /// The modules a Swift file imports (`import X`, `@testable import X`, `import struct X.Y`).
    private static func imports(in text: String) -> Set<String> {
        var modules: Set<String> = []
        var inMultilineString = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            // Lines inside a multi-line string literal (a script a test writes) are not Swift.
            if line.components(separatedBy: "\"\"\"").count % 2 == 0 { inMultilineString.toggle(); continue }
            if inMultilineString { continue }
            var words = line.split(separator: " ").map(String.init)
            while let first = words.first, first.hasPrefix("@") { words.removeFirst() }
            guard words.first == "import", words.count >= 2 else { continue }
            var module = words[1]
            if ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"].contains(module), words.count >= 3 { module = words[2] }
            if let dot = module.firstIndex(of: ".") { module = String(module[..<dot]) }
            modules.insert(module)
        }
        return modules
    }

    func testEveryImportIsDeclared() throws {
        let all = try targets()
        let directories = all.map { $0.directory.standardizedFileURL.path }
        var undeclared: [String] = []
        for target in all where ["regular", "executable", "test"].contains(target.type) {
            let base = target.directory.standardizedFileURL.path
            // Another target's folder inside this one (`Main/`) is that target's.
            let nested = directories.filter { $0 != base && $0.hasPrefix(base + "/") }
            guard let files = FileManager.default.enumerator(atPath: base) else { continue }
            for case let relative as String in files where relative.hasSuffix(".swift") {
                let path = base + "/" + relative
                if nested.contains(where: { path.hasPrefix($0 + "/") }) { continue }
                let text = try String(contentsOfFile: path, encoding: .utf8)
                for module in Self.imports(in: text).subtracting(target.declared).subtracting(Self.toolchain) where module != target.name.replacingOccurrences(of: "-", with: "_") {
                    undeclared.append("\(target.name): \(relative) imports \(module)")
                }
            }
        }
        XCTAssertEqual(undeclared, [], "declare each in Package.swift:\n" + undeclared.joined(separator: "\n"))
    }

    func testTheDesignDocumentListsEveryLibraryModule() throws {
        let design = try String(contentsOf: Self.root.appendingPathComponent("docs/DESIGN.md"), encoding: .utf8)
        guard let start = design.range(of: "## Modules"), let end = design.range(of: "\n## ", range: start.upperBound..<design.endIndex) else {
            return XCTFail("docs/DESIGN.md has a Modules section")
        }
        let table = design[start.upperBound..<end.lowerBound]
        let listed = Set(table.split(separator: "\n").compactMap { row -> [String]? in
            guard row.hasPrefix("| `") else { return nil }
            let cell = row.split(separator: "|").first.map(String.init) ?? ""
            return cell.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        }.flatMap { $0 })
        let all = try targets()
        let modules = all.filter { $0.type == "regular" && $0.directory.path.hasPrefix(Self.root.appendingPathComponent("Sources").path + "/") }.map(\.name)
        XCTAssertFalse(modules.isEmpty)
        XCTAssertEqual(modules.filter { !listed.contains($0) }, [], "docs/DESIGN.md's module table lacks these")
        XCTAssertEqual(listed.filter { !$0.contains("/") }.subtracting(all.map(\.name)).sorted(), [], "docs/DESIGN.md's module table lists modules that do not exist")
    }
}
