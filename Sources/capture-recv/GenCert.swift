import CaptureCore
import ArgumentParser
import CaptureCLISupport
import CaptureSecurity
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Makes a self-signed receiver certificate for field kits without a PKI.
struct GenCert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gen-cert",
        abstract: "Make a self-signed certificate and key (ECDSA P-256) for --tls-cert/--tls-key, and print its fingerprint for capture-send --pin.",
        discussion: """
            Writes DIR/cert.pem and DIR/key.pem (the key with mode 0600). Give every name and address senders use \
            to reach this receiver with --host, so that senders that check host names (--ca) accept it. \
            When root makes them for a receiver that runs as a service user, name that user with --owner \
            (e.g. --owner capture for the shipped systemd unit): the key is readable by its owner only.
            """
    )

    @Option(name: .long, help: ArgumentHelp("Folder for cert.pem and key.pem (created if missing).", valueName: "DIR"))
    var out: String

    @Option(name: .long, help: ArgumentHelp("A DNS name or IP address the certificate is for; repeat for several (default: localhost and 127.0.0.1).", valueName: "NAME"))
    var host: [String] = []

    @Option(
        name: .long, help: ReceiveRanges.days.help("Days the certificate is valid.", default: "\(CertificateFactory.defaultValidityDays)"),
        transform: ReceiveRanges.days.integer)
    var days = CertificateFactory.defaultValidityDays

    @Option(name: .long, help: ArgumentHelp("The user capture-recv runs as: cert.pem and key.pem are given to this user and its group (default: the user running gen-cert keeps them).", valueName: "USER"))
    var owner: String?

    @Flag(name: .long, help: "Replace cert.pem and key.pem if they exist.")
    var force = false

    func run() throws {
        let hosts = host.isEmpty ? ["localhost", "127.0.0.1"] : host
        // Checked before anything is written, so a wrong name leaves no files behind.
        let newOwner = try owner.map { name throws(CLIError) in try FileOwner.look(up: name) }
        try newOwner?.checkPermitted()
        let paths: (certificate: String, key: String)
        let fingerprint: String
        do throws(SecurityError) {
            let issued = try CertificateFactory.make(
                commonName: hosts[0], hosts: hosts, notAfter: Date().addingTimeInterval(Double(days) * 86_400)
            )
            paths = try CertificateFactory.write(issued, to: out, overwrite: force)
            fingerprint = issued.fingerprint.hex
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
        if let newOwner {
            try newOwner.take([paths.key, paths.certificate])
        }
        print("certificate: \(paths.certificate)")
        print("private key: \(paths.key)")
        if let newOwner {
            print("owner: \(newOwner.name) (key mode 0600)")
        }
        print("hosts: \(hosts.joined(separator: ", "))")
        print("sha256 fingerprint: \(fingerprint)")
        print("senders: capture-send --tls --pin \(fingerprint) HOST:PORT")
        if newOwner == nil, geteuid() == 0 {
            StandardStreams.writeError(Self.rootOwnedKeyNote(key: paths.key, certificate: paths.certificate))
        }
    }

    /// What gen-cert says when root made the key for itself: a receiver running as a service user
    /// could not read it.
    static func rootOwnedKeyNote(key: String, certificate: String) -> String {
        """
        note: \(key) belongs to root and only root can read it (mode 0600), so a receiver running as \
        a service user (User=capture in systemd/capture-recv.service) cannot start with it. Give both \
        files to that user:
          chown capture:capture \(key) \(certificate)
        or make them with --owner capture.

        """
    }
}

/// A user (and its primary group) that gen-cert gives the key and certificate to.
struct FileOwner {
    let name: String
    let userID: uid_t
    let groupID: gid_t

    /// The user called `name` in the system's user database (a numeric id works too).
    static func look(up name: String) throws(CLIError) -> FileOwner {
        if let entry = getpwnam(name) {
            return FileOwner(name: name, userID: entry.pointee.pw_uid, groupID: entry.pointee.pw_gid)
        }
        if let number = uid_t(name), let entry = getpwuid(number) {
            return FileOwner(name: name, userID: number, groupID: entry.pointee.pw_gid)
        }
        throw CLIError("--owner \(name): there is no such user on this system; create it first (useradd --system \(name)) or name the user capture-recv runs as")
    }

    static let onlyRoot = "only root can give files to another user; run gen-cert as root (sudo) or leave out --owner"

    /// Fails unless this process may give files to the user (it is root, or the user itself).
    func checkPermitted() throws(CLIError) {
        guard geteuid() == 0 || geteuid() == userID else { throw CLIError("--owner \(name): \(Self.onlyRoot)") }
    }

    /// Gives every file in `paths` to this user and group.
    func take(_ paths: [String]) throws(CLIError) {
        for path in paths where chown(path, userID, groupID) != 0 {
            throw CLIError("cannot give \(path) to \(name): \(errno == EPERM ? Self.onlyRoot : "the file system refused; give it with chown yourself")")
        }
    }
}
