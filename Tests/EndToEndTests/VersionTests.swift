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
}
