import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A test file system that loses what a power cut loses (PowerCut/powercut_fs.py, on FUSE): it
/// passes `backing` through at `mountpoint`, but keeps file data in its memory until an fsync or
/// fdatasync of that file covers it. `cut()` is the power cut: the file system's process is killed,
/// so that `backing` holds exactly what survived, and the dead mount is detached. Mount a new one over
/// the same backing folder to restart on the surviving bytes.
///
/// Needs root (a FUSE mount for other users), /dev/fuse and Debian's python3-fusepy
/// (scripts/install-deps.sh installs it); without them the tests that use it skip, saying which.
final class PowerCutFileSystem {
    let backing: URL
    let mountpoint: URL
    private let process = Process()
    private let log: URL

    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("PowerCut/powercut_fs.py").path
    /// Debian's interpreter, which has python3-fusepy (a `python3` earlier on PATH may not).
    private static let python = "/usr/bin/python3"

    /// Mounts the file system over `backing` (made if missing) at `mountpoint` (made if missing) and
    /// returns once the kernel lists the mount.
    init(backing: URL, mountpoint: URL) throws {
        guard geteuid() == 0 else { throw XCTSkip("the power-cut file system mounts FUSE for other users: needs root") }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { throw XCTSkip("no /dev/fuse here: the power-cut file system needs FUSE") }
        let probe = try ToolRunner.run(Self.python, ["-c", "import fusepy"])
        guard probe.succeeded else {
            throw TestFailure("python3-fusepy is missing (\(probe.errorText.trimmingCharacters(in: .whitespacesAndNewlines))): scripts/install-deps.sh installs it")
        }
        self.backing = backing
        self.mountpoint = mountpoint
        log = backing.deletingLastPathComponent().appendingPathComponent("\(backing.lastPathComponent).powercut-\(UUID().uuidString).log")
        try FileManager.default.createDirectory(at: backing, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: mountpoint, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [Self.script, backing.path, mountpoint.path]
        process.standardOutput = FileHandle(forWritingAtPath: log.path)
        process.standardError = FileHandle(forWritingAtPath: log.path)
        try process.run()
        guard waitFor(30, { self.isMounted || !self.process.isRunning }), isMounted else {
            if process.isRunning { process.terminate() }
            throw TestFailure("the power-cut file system did not mount at \(mountpoint.path): \(output)")
        }
    }

    deinit {
        if process.isRunning { cut() }
        try? FileManager.default.removeItem(at: log)
    }

    /// What the file system's process printed (its errors, if any).
    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// Whether the kernel lists this mount (fstype `fuse.powercut` at the mountpoint).
    var isMounted: Bool {
        let table = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[4] == mountpoint.path && line.contains(" - fuse.powercut ")
        }
    }

    /// The power cut: the file system dies with every byte no fsync covered; the dead mount is
    /// detached (lazily: a process still holding a file there gets errors, as after a crash).
    func cut() {
        process.signal(SIGKILL)
        process.waitUntilExit()
        _ = try? ToolRunner.run("umount", ["-l", mountpoint.path])
        _ = waitFor(30) { !self.isMounted }
    }
}

extension Process {
    fileprivate func signal(_ number: Int32) {
        if isRunning { kill(processIdentifier, number) }
    }
}
