import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The end-to-end tests run capture-send and capture-recv as an unprivileged user, as the shipped
/// systemd units (`User=capture`) and the Docker image (`USER capture`) do, so that a privilege the
/// product does not have (a root-only socket option, a root-owned key) can never pass the tests.
///
/// When the test process is root, every executable is started through `setpriv` as `nobody`
/// (uid and gid 65534, no supplementary groups). What the tests prepare for the executables
/// (output folders, spools, keys, token files) is handed over to that user with `handOver`, as an
/// operator would `chown` it. When the tests already run as an ordinary user, the executables run
/// as that user and `handOver` does nothing.
enum Unprivileged {
    /// The user and group id the executables run as when the tests are root: `nobody`.
    static let userID: uid_t = 65_534
    static let groupID: gid_t = 65_534

    /// Whether the executables are started as `nobody` (the tests run as root).
    static var isActive: Bool { geteuid() == 0 }

    /// The executable and arguments that run `executable` as the unprivileged user.
    static func command(_ executable: String, _ arguments: [String]) -> (executable: String, arguments: [String]) {
        guard isActive else { return (executable, arguments) }
        return (setprivPath, [
            "--reuid=\(userID)", "--regid=\(groupID)", "--clear-groups", "--inh-caps=-all", "--", executable,
        ] + arguments)
    }

    /// Gives `path` (and, for a folder, everything in it) to the unprivileged user, so the
    /// executables can write or read it as they would files their operator prepared for them.
    static func handOver(_ path: String) {
        guard isActive else { return }
        chownTree(path)
    }

    /// Creates a folder (with its parents) that the unprivileged user owns, and returns it.
    @discardableResult
    static func makeDirectory(_ url: URL) throws -> URL {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        handOver(url.path)
        return url
    }

    private static func chownTree(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        _ = lchown(path, userID, groupID)
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            chownTree(path + "/" + name)
        }
    }

    /// `setpriv` from util-linux (essential in Debian); the tests cannot keep their promise
    /// without it, so its absence fails them rather than silently running as root.
    private static let setprivPath: String = {
        for candidate in ["/usr/bin/setpriv", "/bin/setpriv"] where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/setpriv-is-missing-install-util-linux"
    }()
}
