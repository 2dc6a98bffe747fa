import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Runs a systemd unit's `ExecStart=` the way systemd would start it, without systemd (no systemd
/// runs here, and `systemd-run` needs one): so a unit that only works under the test's own user,
/// HOME and writable file system fails here as it would on a field kit.
///
/// What is reproduced:
/// - the environment: `env -i`, then what systemd gives a `User=` service (PATH, HOME, USER, LOGNAME
///   and SHELL from the user's passwd entry, `STATE_DIRECTORY`), then `Environment=`, then the
///   `EnvironmentFile=` (the shipped `.env.example` with the test's values); nothing of the test's
///   own environment;
/// - `User=`: the unprivileged user of `Unprivileged` (nobody, uid 65534, whose home /nonexistent
///   does not exist), through `setpriv`;
/// - `StateDirectory=NAME...`: a temporary folder owned by that user (mode `StateDirectoryMode=`)
///   stands in for each /var/lib/NAME;
/// - when the tests are root and `unshare --mount` works, a private mount namespace with the unit's
///   file system: the stand-ins bind-mounted on /var/lib/NAME, the test's /etc/capture stand-in on
///   /etc/capture and the built executables on the `ExecStart=` path (overlays, so nothing outside
///   the namespace changes); `ProtectSystem=strict` (every mount read-only except /dev, /proc, /sys
///   and the state folders), `ProtectHome=yes` (/home, /root, /run/user empty and unwritable,
///   unless the built executables live there), `PrivateTmp=yes` (fresh /tmp and /var/tmp),
///   `UMask=`, working directory `/`. The command line then runs exactly as `ExecStart=` says.
/// - otherwise (not root, or no mount namespaces) the paths are rewritten instead: /var/lib/NAME,
///   /etc/capture and the executable path in the command line and environment become the
///   stand-ins, and HOME is /nonexistent, unwritable for any ordinary user.
///
/// Not reproduced: device and address-family restrictions, capabilities, Nice=, seccomp filters.
final class SystemdServiceSandbox {
    /// The built executable for each path a unit's `ExecStart=` names.
    static let installedExecutables = ["/usr/bin/capture-send": Products.send, "/usr/bin/capture-recv": Products.recv]

    let process = Process()
    let stateFolders: [String: URL]
    private let outputURL: URL
    private let errorURL: URL
    let usesMountNamespace: Bool
    /// The command line the service runs, as `ExecStart=` expands.
    let commandLine: [String]

    /// Starts `unit`. `environmentFile` stands for the file `EnvironmentFile=` names; `overrides`
    /// are the test's own values in it; `etcCapture` stands in for /etc/capture; `edit` changes the
    /// expanded command line (e.g. a tone in place of the ALSA device).
    init(
        unit: SystemdUnit, environmentFile: String?, overrides: [String: String] = [:], hostName: String,
        root: URL, etcCapture: URL?, edit: ([String]) throws -> [String] = { $0 }
    ) throws {
        usesMountNamespace = Self.mountNamespacesWork
        let user = ServiceUser.current
        let stateNames = (unit.value("StateDirectory") ?? "").split(separator: " ").map(String.init)
        let mode = Int(unit.value("StateDirectoryMode") ?? "0755", radix: 8) ?? 0o755
        var folders: [String: URL] = [:]
        for name in stateNames {
            let folder = root.appendingPathComponent("state/\(name)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            chmod(folder.path, mode_t(mode))
            Unprivileged.handOver(folder.path)
            folders["/var/lib/\(name)"] = folder
        }
        stateFolders = folders

        // systemd's environment for a User= service, then Environment=, then EnvironmentFile=.
        var environment: [String: String] = [
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
            "HOME": user.home, "USER": user.name, "LOGNAME": user.name, "SHELL": user.shell,
        ]
        if !stateNames.isEmpty { environment["STATE_DIRECTORY"] = stateNames.map { "/var/lib/\($0)" }.joined(separator: ":") }
        environment.merge(try unit.environment(hostName: hostName)) { _, new in new }
        if let environmentFile { environment.merge(try DeploymentFiles.environmentFile(environmentFile)) { _, new in new } }
        environment.merge(overrides) { _, new in new }
        commandLine = try edit(try unit.execStart(environment: environment, hostName: hostName))

        // Paths the process sees, and the stand-ins behind them.
        var mapped = folders
        if let etcCapture { mapped["/etc/capture"] = etcCapture }
        var executables: [String: String] = [:]
        for (path, built) in Self.installedExecutables where commandLine.first == path { executables[path] = built }

        outputURL = root.appendingPathComponent("service-\(UUID().uuidString).stdout")
        errorURL = root.appendingPathComponent("service-\(UUID().uuidString).stderr")
        for url in [outputURL, errorURL] where !FileManager.default.createFile(atPath: url.path, contents: nil) {
            throw TestFailure("cannot create \(url.path)")
        }
        let umask = unit.value("UMask") ?? "0022"
        let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }

        if usesMountNamespace {
            let script = Self.namespaceScript(unit: unit, mapped: mapped, executables: executables, scratch: root.appendingPathComponent("overlay-\(UUID().uuidString)"), umask: umask)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sandbox"]
                + [Self.setprivPath, "--reuid=\(Unprivileged.userID)", "--regid=\(Unprivileged.groupID)", "--clear-groups", "--inh-caps=-all", "--", "/usr/bin/env", "-i"]
                + variables + commandLine
        } else {
            // No namespace: rewrite the paths instead, and run from / with the unit's umask.
            func rewrite(_ text: String) -> String {
                if let built = executables[text] { return built }
                for (path, folder) in mapped.sorted(by: { $0.key.count > $1.key.count }) where text.contains(path) {
                    return text.replacingOccurrences(of: path, with: folder.path)
                }
                return text
            }
            let script = "umask \(umask) && cd / && exec \"$@\""
            // env clears the environment first and setpriv drops privileges last, as it starts the
            // service, so a build folder only the test user may enter still works.
            let rewritten = commandLine.map(rewrite)
            let service = Unprivileged.command(rewritten[0], Array(rewritten.dropFirst()))
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", script, "sandbox", "/usr/bin/env", "-i"] + variables.map(rewrite) + [service.executable] + service.arguments
        }
        process.environment = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"]
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var standardOutput: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
    var standardError: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the service to exit (killing it after `seconds`) and returns its exit status.
    @discardableResult
    func wait(seconds: Double = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// The port a capture-recv service announced (`listening on HOST:PORT`), waiting for it.
    func announcedPort(seconds: Double = 20) throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = standardOutput.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
               let port = Int(line.split(separator: ":").last ?? "") {
                return port
            }
            if !process.isRunning { break }
            usleep(10_000)
        }
        throw TestFailure("the service did not start listening: \(standardError)")
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    // MARK: The mount namespace

    /// Whether this process can make private mount namespaces (root with CAP_SYS_ADMIN).
    static let mountNamespacesWork: Bool = {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["--mount", "--propagation", "private", "--", "/bin/true"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    /// The shell script run in the new mount namespace before it execs the service's command line
    /// (its arguments).
    private static func namespaceScript(unit: SystemdUnit, mapped: [String: URL], executables: [String: String], scratch: URL, umask: String) -> String {
        var lines = ["set -eu"]
        var overlays = 0
        /// An overlay on `folder`, so new mount points inside it leave the real one untouched.
        func overlay(_ folder: String) {
            overlays += 1
            let upper = scratch.appendingPathComponent("\(overlays)/upper").path
            let work = scratch.appendingPathComponent("\(overlays)/work").path
            lines.append("mkdir -p \(quote(upper)) \(quote(work))")
            lines.append("mount -t overlay overlay -o lowerdir=\(folder),upperdir=\(upper),workdir=\(work) \(quote(folder))")
        }
        var overlaid: Set<String> = []
        for (path, folder) in mapped.sorted(by: { $0.key < $1.key }) {
            let parent = (path as NSString).deletingLastPathComponent
            if !FileManager.default.fileExists(atPath: path), !overlaid.contains(parent), !mapped.keys.contains(parent) {
                overlay(parent)
                overlaid.insert(parent)
            }
            lines.append("mkdir -p \(quote(path))")
            lines.append("mount --bind \(quote(folder.path)) \(quote(path))")
        }
        for (path, built) in executables.sorted(by: { $0.key < $1.key }) {
            let parent = (path as NSString).deletingLastPathComponent
            if !overlaid.contains(parent) {
                overlay(parent)
                overlaid.insert(parent)
            }
            lines.append("touch \(quote(path))")
            lines.append("mount --bind \(quote(built)) \(quote(path))")
        }
        let writable = mapped.filter { !$0.key.hasPrefix("/etc/") }.keys.sorted()
        if unit.value("ProtectSystem") == "strict" {
            // Every mount read-only but the API file systems and the state folders.
            lines.append("""
                for mountpoint in $(cut -d ' ' -f 5 /proc/self/mountinfo); do
                  case "$mountpoint" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac
                  case " \(writable.joined(separator: " ")) " in *" $mountpoint "*) continue ;; esac
                  mount -o remount,bind,ro "$mountpoint"
                done
                """)
        }
        if unit.value("ProtectHome") == "yes" {
            let built = Products.directory.path
            for home in ["/home", "/root", "/run/user"] where !built.hasPrefix(home + "/") {
                lines.append("if [ -d \(home) ]; then mount -t tmpfs -o ro,mode=0755 tmpfs \(home); fi")
            }
        }
        if unit.value("PrivateTmp") == "yes" {
            lines.append("mount -t tmpfs -o mode=1777 tmpfs /tmp")
            lines.append("if [ -d /var/tmp ]; then mount -t tmpfs -o mode=1777 tmpfs /var/tmp; fi")
        }
        lines.append("umask \(umask)")
        lines.append("cd /")
        lines.append("exec \"$@\"")
        return lines.joined(separator: "\n")
    }

    private static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    private static let setprivPath = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/setpriv"
}

/// The user a `User=` service runs as here, with its passwd entry: nobody when the tests are root,
/// else the test's own user (whose home is replaced by /nonexistent, as nobody's is).
struct ServiceUser {
    let name: String
    let home: String
    let shell: String

    static var current: ServiceUser {
        let uid = Unprivileged.isActive ? Unprivileged.userID : getuid()
        guard let entry = getpwuid(uid) else { return ServiceUser(name: "nobody", home: "/nonexistent", shell: "/usr/sbin/nologin") }
        let home = Unprivileged.isActive ? String(cString: entry.pointee.pw_dir) : "/nonexistent"
        return ServiceUser(name: String(cString: entry.pointee.pw_name), home: home, shell: String(cString: entry.pointee.pw_shell))
    }
}
