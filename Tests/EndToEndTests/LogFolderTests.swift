import Foundation
import XCTest

/// What a receiver finds in its commit log folder (`--log-dir`, by default `OUT/.commit-log`) that is
/// not a log is left alone, and a damaged log stops it with what to do, before it acknowledges
/// anything, rather than being skipped (it may hold acknowledged audio).
final class LogFolderTests: XCTestCase {
    func testWhatIsNotALogIsLeftAloneAndADamagedLogStopsTheReceiverWithWhatToDo() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("log-folder-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: out) }
        let logs = out.appendingPathComponent(".commit-log")
        let operatorsFolder = logs.appendingPathComponent("notes")
        try FileManager.default.createDirectory(at: operatorsFolder, withIntermediateDirectories: true)
        try Data("kept\n".utf8).write(to: logs.appendingPathComponent("README.txt"))
        try Data("kept\n".utf8).write(to: operatorsFolder.appendingPathComponent("keep.txt"))

        let receiver = try ReceiverUnderTest(outputDirectory: out)
        let sent = try runSender([receiver.address, "--source", "tone", "--duration", "0.5", "--no-pace", "--stream-name", "beside-junk"])
        XCTAssertEqual(sent.status, 0, sent.stderr)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: operatorsFolder.path), ["keep.txt"], "no log was made in it")
        XCTAssertEqual(try String(contentsOf: logs.appendingPathComponent("README.txt"), encoding: .utf8), "kept\n")
        let logFolders = try FileManager.default.contentsOfDirectory(atPath: logs.path).filter { UUID(uuidString: $0) != nil }
        XCTAssertEqual(logFolders.count, 1, "the receiver's own log, named by a UUID")

        // Its control file damaged (by hand, a disk, a bad copy): the next start stops at once.
        let control = logs.appendingPathComponent(try XCTUnwrap(logFolders.first)).appendingPathComponent("control")
        var bytes = try Data(contentsOf: control)
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: control)
        let damaged = try ChildProcess(Products.recv, ["--out", out.path, "--listen", "127.0.0.1:0"])
        XCTAssertEqual(damaged.wait(seconds: 30), 1)
        let lines = damaged.standardError.split(separator: "\n").filter { $0.hasPrefix("Error:") }
        XCTAssertEqual(lines.count, 1, damaged.standardError)
        let line = lines.first.map(String.init) ?? ""
        XCTAssertTrue(line.contains(control.path) && line.contains("damaged"), line)
        XCTAssertTrue(line.contains("move the log's folder aside"), "says what to do: \(line)")
        XCTAssertFalse(damaged.standardError.contains("listening"), "it never listened: \(damaged.standardError)")
    }
}
