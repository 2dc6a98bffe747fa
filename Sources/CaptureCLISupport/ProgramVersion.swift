import Synchronization

/// What `--version` prints for capture-send and capture-recv: the package version and the git
/// commit the executable was built from; the version alone goes into Hellos and files. Each executable's main module is stamped with both at
/// build time (Plugins/BuildStamp) and hands them over here before it parses its command line; a
/// command parsed in process without that (the tests, the settings fuzz target) reads "unstamped".
public enum ProgramVersion {
    private static let stamp = Mutex<(version: String, commit: String)?>(nil)

    /// Records the stamp of the running executable.
    public static func stamp(version: String, commit: String) {
        stamp.withLock { $0 = (version, commit) }
    }

    /// The package version, as the executables also write it into handshakes and files
    /// (`capture-send 0.1.0`); "unstamped" in process.
    public static var version: String {
        stamp.withLock { $0?.version } ?? "unstamped"
    }

    /// `NAME VERSION (commit COMMIT)`, the line `NAME --version` prints.
    public static func line(for name: String) -> String {
        guard let stamped = stamp.withLock({ $0 }) else { return "\(name) unstamped (built without Plugins/BuildStamp)" }
        return "\(name) \(stamped.version) (commit \(stamped.commit))"
    }
}
