import CaptureCore

/// Why a TLS or authentication setting cannot be used. Each message names the file or value and
/// says what to do, naming settings through a `SettingNaming` (`message(naming:)`); the executables
/// print it, with their flags, as their one line before exiting non-zero.
public enum SecurityError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A file could not be read.
    case unreadableFile(path: String, reason: String)
    /// A PEM file holds no certificate.
    case noCertificate(path: String)
    /// A PEM file holds no usable private key.
    case badPrivateKey(path: String, reason: String)
    /// A `--pin` value that is not a SHA-256 fingerprint.
    case badPin(String)
    /// A token file with no token in it.
    case emptyTokenFile(path: String)
    /// A token that cannot travel in the handshake.
    case badToken(path: String, line: Int, reason: String)
    /// A `--host` value for gen-cert that is neither a DNS name nor an IP address.
    case badHostName(String)
    /// A certificate or key could not be made or written.
    case certificateGeneration(String)
    /// The folder already holds a certificate or key, and replacing them was not asked for.
    case certificateFilesExist(directory: String)
    /// A `--ca` file that holds a server's own certificate (self-signed, not a CA): a pin is what
    /// trusts exactly that certificate.
    case notAnAuthority(path: String, fingerprint: String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .unreadableFile(let path, let reason):
            return "cannot read \(path): \(reason); check the path and its permissions"
        case .noCertificate(let path):
            return "\(path) holds no PEM certificate (a block starting with -----BEGIN CERTIFICATE-----);"
                + " name a certificate file, for example the cert.pem that `capture-recv gen-cert` writes"
        case .badPrivateKey(let path, let reason):
            return "\(path) holds no usable PEM private key (\(reason)); name the key file that belongs to the certificate,"
                + " for example the key.pem that `capture-recv gen-cert` writes"
        case .badPin(let value):
            return "\(naming.name(of: .certificatePin)) \"\(value)\" is not a SHA-256 fingerprint: give 64 hexadecimal digits, with or without colons"
                + " (as `capture-recv gen-cert` or `openssl x509 -noout -fingerprint -sha256` print it)"
        case .emptyTokenFile(let path):
            return "the token file \(path) holds no token; write one token a line (blank lines and lines starting with # are ignored)"
        case .badToken(let path, let line, let reason):
            return "the token on line \(line) of \(path) \(reason)"
        case .badHostName(let value):
            return "\(naming.name(of: .certificateHost)) \"\(value)\" is neither a DNS name nor an IP address; give the name or address senders connect to"
        case .certificateGeneration(let reason):
            return "cannot make the certificate: \(reason)"
        case .certificateFilesExist(let directory):
            return "cannot make the certificate: \(directory) already holds cert.pem or key.pem; choose another \(naming.name(of: .certificateFolder))"
                + " or pass \(naming.name(of: .replaceCertificates)) to replace them"
        case .notAnAuthority(let path, let fingerprint):
            return "\(path) is a server's own certificate, not a certificate authority (it is self-signed, as"
                + " `capture-recv gen-cert` makes them), so \(naming.name(of: .certificateAuthority)) cannot trust it; connect with \(naming.name(of: .certificatePin)) \(fingerprint) instead"
        }
    }
}
