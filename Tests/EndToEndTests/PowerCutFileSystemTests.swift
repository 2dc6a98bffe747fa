import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The power-cut file system (issue 28, item 5) loses exactly what a power cut loses, so that the
/// durability tests built on it mean something: bytes an fsync or fdatasync of their file covered
/// survive a cut; bytes only written, closed, or covered by syncfs(2) do not (the kernel never
/// sends syncfs to a FUSE server, the fact that makes `syncfs` useless on GlusterFS and its kin).
/// Before the cut, everything written reads back, as from any cache.
final class PowerCutFileSystemTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("powercut-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// Writes `bytes` at `offset` of `path` (created if missing) through one descriptor, then
    /// `after(descriptor)` (a sync, a truncation, nothing), then closes it.
    private func write(_ path: URL, _ text: String, at offset: off_t = 0, then after: (Int32) -> Int32 = { _ in 0 }) throws {
        let descriptor = open(path.path, O_WRONLY | O_CREAT, 0o644)
        guard descriptor >= 0 else { throw TestFailure("cannot open \(path.path): errno \(errno)") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, offset) }
        XCTAssertEqual(written, bytes.count, path.lastPathComponent)
        XCTAssertEqual(after(descriptor), 0, "\(path.lastPathComponent): errno \(errno)")
        XCTAssertEqual(close(descriptor), 0)
    }

    private func contents(_ path: URL) throws -> String {
        String(decoding: try Data(contentsOf: path), as: UTF8.self)
    }

    func testOnlyWhatAnFsyncOrFdatasyncCoveredSurvivesTheCut() throws {
        let backing = work.appendingPathComponent("disk")
        let mountpoint = work.appendingPathComponent("mnt")
        var fileSystem: PowerCutFileSystem? = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        let file = { (name: String) in mountpoint.appendingPathComponent(name) }

        try write(file("fsynced"), "durable|", then: fsync)
        try write(file("fsynced"), "written after the fsync", at: 8)
        try write(file("fdatasynced"), "durable by fdatasync", then: fdatasync)
        try write(file("syncfs-only"), "syncfs never reaches FUSE")
        // coreutils' `sync -f FILE` is syncfs(2) of the file system holding FILE.
        let syncfs = try ToolRunner.run("sync", ["-f", file("syncfs-only").path])
        XCTAssertTrue(syncfs.succeeded, "syncfs on FUSE returns success: \(syncfs.errorText)")
        try write(file("closed-only"), "closed, never synced")
        try write(file("shrunk-unsynced"), "one hundred bytes? no, these", then: fsync)
        try write(file("shrunk-unsynced"), "", then: { ftruncate($0, 3) })
        try FileManager.default.createDirectory(at: file("folder"), withIntermediateDirectories: false)
        try write(file("folder/synced"), "in a folder", then: fsync)

        // Before the cut the cache serves every byte written, as any cache would.
        XCTAssertEqual(try contents(file("fsynced")), "durable|written after the fsync")
        XCTAssertEqual(try contents(file("syncfs-only")), "syncfs never reaches FUSE")
        XCTAssertEqual(try contents(file("closed-only")), "closed, never synced")
        XCTAssertEqual(try contents(file("shrunk-unsynced")), "one")

        fileSystem?.cut()
        XCTAssertEqual(try contents(backing.appendingPathComponent("fsynced")), "durable|")
        XCTAssertEqual(try contents(backing.appendingPathComponent("fdatasynced")), "durable by fdatasync")
        XCTAssertEqual(try contents(backing.appendingPathComponent("syncfs-only")), "", "syncfs made nothing durable")
        XCTAssertEqual(try contents(backing.appendingPathComponent("closed-only")), "", "close made nothing durable")
        XCTAssertEqual(try contents(backing.appendingPathComponent("shrunk-unsynced")), "one hundred bytes? no, these", "the unsynced truncation is lost")
        XCTAssertEqual(try contents(backing.appendingPathComponent("folder/synced")), "in a folder")

        // Restarted on the surviving bytes, the mount shows them and nothing more.
        fileSystem = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        XCTAssertEqual(try contents(file("fsynced")), "durable|")
        XCTAssertEqual(try contents(file("syncfs-only")), "")
        try write(file("syncfs-only"), "now fsynced", then: fsync)
        fileSystem?.cut()
        XCTAssertEqual(try contents(backing.appendingPathComponent("syncfs-only")), "now fsynced")
        XCTAssertEqual(fileSystem?.output ?? "", "", "the file system reported no error")
    }

    /// The receiver runs as an unprivileged user: what it creates on the mount is its own, and the
    /// kernel checks modes (another user's file stays closed to it).
    func testFilesAreOwnedByTheirCreatorAndModesAreChecked() throws {
        guard Unprivileged.isActive else { throw XCTSkip("needs root to act as another user") }
        let backing = work.appendingPathComponent("disk")
        let mountpoint = work.appendingPathComponent("mnt")
        let fileSystem = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        defer { fileSystem.cut() }
        let folder = mountpoint.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        Unprivileged.handOver(folder.path)
        let created = folder.appendingPathComponent("made-by-the-user")
        let touch = Unprivileged.command("/usr/bin/touch", [created.path])
        XCTAssertTrue(try ToolRunner.run(touch.executable, touch.arguments).succeeded)
        var info = stat()
        XCTAssertEqual(stat(created.path, &info), 0)
        XCTAssertEqual(info.st_uid, Unprivileged.userID)
        XCTAssertEqual(info.st_gid, Unprivileged.groupID)

        let rootsFile = mountpoint.appendingPathComponent("roots")
        try write(rootsFile, "root's", then: { fchmod($0, 0o600) })
        let peek = Unprivileged.command("/bin/cat", [rootsFile.path])
        let refused = try ToolRunner.run(peek.executable, peek.arguments)
        XCTAssertFalse(refused.succeeded, "another user's 0600 file stays closed")
        XCTAssertTrue(refused.errorText.contains("Permission denied"), refused.errorText)
    }
}
