import CaptureCore

/// Why a server's TLS certificate and key (the receiver's listening port, the console's) cannot be
/// used: the data the start-up errors carry, worded where they are shown (`message(naming:)`).
public enum ServerTLSProblem: Error, Equatable, Sendable, CustomStringConvertible {
    /// The certificate, key or client CA file cannot be read or holds nothing usable.
    case unusableFile(SecurityError)
    /// The TLS library refused the certificate and key together (`reason`: its words).
    case cannotSetUp(certificatePath: String, privateKeyPath: String, reason: String)

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The problem's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .unusableFile(let error):
            return error.message(naming: naming)
        case .cannotSetUp(let certificatePath, let privateKeyPath, let reason):
            return "cannot set up TLS with \(certificatePath) and \(privateKeyPath): \(reason); check that the key belongs to the certificate"
        }
    }
}
