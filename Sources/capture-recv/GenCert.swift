import ArgumentParser
import CaptureCLISupport
import CaptureSecurity
import Foundation

/// Makes a self-signed receiver certificate for field kits without a PKI.
struct GenCert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gen-cert",
        abstract: "Make a self-signed certificate and key (ECDSA P-256) for --tls-cert/--tls-key, and print its fingerprint for capture-send --pin.",
        discussion: """
            Writes DIR/cert.pem and DIR/key.pem (mode 0600). Give every name and address senders use \
            to reach this receiver with --host, so that senders that check host names (--ca) accept it.
            """
    )

    @Option(name: .long, help: ArgumentHelp("Folder for cert.pem and key.pem (created if missing).", valueName: "DIR"))
    var out: String

    @Option(name: .long, help: ArgumentHelp("A DNS name or IP address the certificate is for; repeat for several (default: localhost and 127.0.0.1).", valueName: "NAME"))
    var host: [String] = []

    @Option(name: .long, help: "Days the certificate is valid.")
    var days = CertificateFactory.defaultValidityDays

    @Flag(name: .long, help: "Replace cert.pem and key.pem if they exist.")
    var force = false

    func validate() throws {
        guard (1...3650).contains(days) else { throw ValidationError("--days must be between 1 and 3650") }
    }

    func run() throws {
        let hosts = host.isEmpty ? ["localhost", "127.0.0.1"] : host
        do throws(SecurityError) {
            let issued = try CertificateFactory.make(
                commonName: hosts[0], hosts: hosts, notAfter: Date().addingTimeInterval(Double(days) * 86_400)
            )
            let paths = try CertificateFactory.write(issued, to: out, overwrite: force)
            print("certificate: \(paths.certificate)")
            print("private key: \(paths.key)")
            print("hosts: \(hosts.joined(separator: ", "))")
            print("sha256 fingerprint: \(issued.fingerprint.hex)")
            print("senders: capture-send --tls --pin \(issued.fingerprint.hex) HOST:PORT")
        } catch {
            throw CLIError(error.description)
        }
    }
}
