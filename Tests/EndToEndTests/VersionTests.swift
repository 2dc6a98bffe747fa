import CAF
import Foundation
import TestSupport
import XCTest

/// Issue 31: `--version` on every command prints the package version (debian/changelog's first
/// entry, the one place it is written) and the git commit the executable was built from, exits 0,
/// and the version is what the sender and receiver announce in their handshakes.
final class VersionTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The version in debian/changelog's first line: `capture-streamer (0.1.0) unstable; …`.
    private func changelogVersion() throws -> String {
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("debian/changelog"), encoding: .utf8)
        let first = try XCTUnwrap(changelog.split(separator: "\n").first)
        let opening = try XCTUnwrap(first.firstIndex(of: "("))
        let closing = try XCTUnwrap(first.firstIndex(of: ")"))
        return String(first[first.index(after: opening)..<closing])
    }

    /// The commit the build was stamped with: this checkout's HEAD (the suite runs right after its
    /// build), or "unknown" without git.
    private func headCommit() throws -> String {
        let git = try ToolRunner.run("git", ["-C", Self.root.path, "rev-parse", "--short=12", "HEAD"])
        return git.exitStatus == 0 ? git.outputText.trimmingCharacters(in: .whitespacesAndNewlines) : "unknown"
    }

    func testEveryCommandPrintsThePackageVersionAndTheCommit() throws {
        let version = try changelogVersion()
        XCTAssertFalse(version.isEmpty)
        let commit = try headCommit()
        let commands: [(String, [String], String)] = [
            (Products.send, ["--version"], "capture-send"),
            (Products.send, ["spool", "list", "--version"], "capture-send"),
            (Products.recv, ["--version"], "capture-recv"),
            (Products.recv, ["export", "--version"], "capture-recv"),
            (Products.recv, ["gen-cert", "--version"], "capture-recv"),
            (Products.load, ["--version"], "capture-load"),
            (Products.load, ["verify", "--version"], "capture-load"),
        ]
        for (executable, arguments, name) in commands {
            let result = try ToolRunner.run(executable, arguments)
            XCTAssertEqual(result.exitStatus, 0, "\(name) \(arguments): \(result.errorText)")
            XCTAssertEqual(result.outputText, "\(name) \(version) (commit \(commit))\n", "\(name) \(arguments.joined(separator: " "))")
            XCTAssertEqual(result.errorText, "")
        }
    }

    /// The versions the sender and receiver announce reach the file: its `info` chunk names both.
    func testTheRecordingNamesTheSameVersions() throws {
        let version = try changelogVersion()
        let receiver = try ReceiverUnderTest()
        let (status, stderr) = try runSender([receiver.address, "--source", "tone", "--duration", "0.2", "--no-pace", "--stream-name", "versioned"])
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(receiver.stop(), 0)
        let file = try XCTUnwrap(receiver.files().first)
        let info = Dictionary(try CAFFile.read(path: file.path).info.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(info["encoding application"], "capture-send \(version), capture-recv \(version)")
    }

    // MARK: The stamp script (scripts/build-stamp.sh)

    /// scripts/build-stamp.sh with a changelog whose first entry has `version`, and `commit` as
    /// CAPTURE_COMMIT: its exit status, standard error and the Swift source it leaves at the output
    /// (written there beforehand as "earlier stamp", so that a refusal can be seen to leave it alone).
    private func stamp(version: String?, commit: String) throws -> (status: Int32, errors: String, output: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("build-stamp-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root.appendingPathComponent("debian"), withIntermediateDirectories: true)
        let firstLine = version.map { "capture-streamer (\($0)) unstable; urgency=medium" } ?? "not a changelog entry"
        try Data("\(firstLine)\n\n  * Entry.\n".utf8).write(to: root.appendingPathComponent("debian/changelog"))
        let output = root.appendingPathComponent("BuildStamp.swift")
        try Data("earlier stamp".utf8).write(to: output)
        let result = try ToolRunner.run("/bin/sh", [Self.root.appendingPathComponent("scripts/build-stamp.sh").path, root.path, output.path, commit])
        return (result.exitStatus, result.errorText, try String(contentsOf: output, encoding: .utf8))
    }

    /// What a version and a commit can hold reaches the Swift source as it is; outside a git
    /// checkout and without CAPTURE_COMMIT the commit reads "unknown", as does a changelog without
    /// a version.
    func testTheStampHoldsTheVersionAndTheCommit() throws {
        let stamped = try stamp(version: "1.2.3~rc1+deb12u1", commit: "0123456789ab")
        XCTAssertEqual(stamped.status, 0, stamped.errors)
        XCTAssertTrue(stamped.output.contains("    static let version = \"1.2.3~rc1+deb12u1\"\n    static let commit = \"0123456789ab\"\n"), stamped.output)
        let bare = try stamp(version: nil, commit: "")
        XCTAssertEqual(bare.status, 0, bare.errors)
        XCTAssertTrue(bare.output.contains("    static let version = \"unknown\"\n    static let commit = \"unknown\"\n"), bare.output)
    }

    /// A version or commit with a character a Debian version or a git commit cannot have (from a
    /// hostile CAPTURE_COMMIT or a damaged changelog) never reaches the generated Swift source: the
    /// build stops with a message naming both, and the earlier stamp is left as it was.
    func testAStampWithCharactersAVersionCannotHaveStopsTheBuild() throws {
        let cases: [(version: String, commit: String)] = [
            ("0.1.0", "abc\"; fatalError() //"),
            ("0.1.0", "abc\ndef"),
            ("0.1.0", "$(id)"),
            ("0.1.0", "abc def"),
            ("0.1.0", "abc\\u{0}"),
            ("0.1\"0", "0123456789ab"),
            ("0.1.0 #", "0123456789ab"),
        ]
        for (version, commit) in cases {
            let result = try stamp(version: version, commit: commit)
            XCTAssertEqual(result.status, 1, "\(version) \(commit): \(result.errors)")
            XCTAssertTrue(result.errors.hasPrefix("build-stamp: version '"), "\(version) \(commit): \(result.errors)")
            XCTAssertTrue(result.errors.contains("has characters a version cannot have"), "\(version) \(commit): \(result.errors)")
            XCTAssertEqual(result.output, "earlier stamp", "\(version) \(commit): nothing generated")
        }
    }
}
