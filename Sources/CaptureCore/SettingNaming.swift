/// A setting of the libraries that a message may point the user to ("choose another address with
/// …"). The libraries never spell a command line's flags: a message names a setting through a
/// `SettingNaming`, which an embedder leaves at `LibrarySettingNames` (the configuration's
/// properties) and each executable replaces with its flags (`CommandLineSettingNames`).
public enum Setting: String, Sendable, CaseIterable {
    // The receiver.
    /// The address the receiver listens on.
    case listenAddress
    /// The folder the receiver records into.
    case outputFolder
    /// How many streams the receiver records at once.
    case maximumStreams
    /// The folder of the receiver's commit log.
    case commitLogFolder
    /// The CA that senders' client certificates must be signed by.
    case clientCertificateAuthority
    /// The receiver's TLS certificate and key (given together).
    case receiverCertificateAndKey

    // The sender.
    /// Whether the sender connects with TLS.
    case senderTLS
    /// The CA the sender trusts the receiver's certificate through.
    case certificateAuthority
    /// The receiver certificate's SHA-256 fingerprint the sender trusts.
    case certificatePin
    /// The sender's client certificate and key (given together).
    case clientCertificateAndKey
    /// The folder of the sender's spool.
    case spoolFolder
    /// The sender spool's size limit.
    case spoolLimit
    /// How long the sender waits for a backup receiver before dropping it.
    case backupGiveUp
    /// How long the sender keeps delivering after capture stops.
    case stopTimeout
}

/// Renders a `Setting` in a message: a library's own words (`LibrarySettingNames`) or a program's
/// (an executable's flags). Library errors that name a setting take one in `message(naming:)`.
public protocol SettingNaming: Sendable {
    /// The words that name `setting` in a message, read where a noun phrase stands.
    func name(of setting: Setting) -> String
}

/// The libraries' own naming: each setting in neutral words with the configuration property that
/// holds it, for programs that embed the libraries (and for every error's `description`).
public struct LibrarySettingNames: SettingNaming {
    public init() {}

    public func name(of setting: Setting) -> String {
        switch setting {
        case .listenAddress: "the listen address (ReceiverConfiguration.host, .port)"
        case .outputFolder: "the output folder (ReceiverConfiguration.outputDirectory)"
        case .maximumStreams: "the stream limit (ReceiverConfiguration.maximumStreams)"
        case .commitLogFolder: "the commit log folder (ReceiverConfiguration.logDirectory)"
        case .clientCertificateAuthority: "the client CA (ReceiverTLSConfiguration.clientCAPath)"
        case .receiverCertificateAndKey: "a certificate and key (ReceiverConfiguration.tls)"
        case .senderTLS: "TLS (the sender's SenderTLSConfiguration)"
        case .certificateAuthority: "the trusted CA (SenderTLSConfiguration.trust .authorities)"
        case .certificatePin: "a pinned fingerprint (SenderTLSConfiguration.trust .pin)"
        case .clientCertificateAndKey: "a client certificate and key (SenderTLSConfiguration.clientCertificatePath, .clientKeyPath)"
        case .spoolFolder: "the spool folder (CaptureStreamer.Configuration's spool directory)"
        case .spoolLimit: "the spool's size limit (the spool capacity)"
        case .backupGiveUp: "the backup give-up time"
        case .stopTimeout: "the stop timeout"
        }
    }
}
