import CaptureCore

/// Both executables' naming of the libraries' settings: each as the flag (and its value's
/// placeholder, where the messages show one) that sets it, so that a library error reads on the
/// command line as it always did ("choose another address with --listen HOST:PORT"). One naming
/// serves both programs because a message may point to the other side's flag ("connect with --tls").
public struct CommandLineSettingNames: SettingNaming {
    public init() {}

    public func name(of setting: Setting) -> String {
        switch setting {
        case .listenAddress: "--listen HOST:PORT"
        case .outputFolder: "--out"
        case .maximumStreams: "--max-streams"
        case .commitLogFolder: "--log-dir"
        case .clientCertificateAuthority: "--client-ca"
        case .receiverCertificateAndKey: "--tls-cert and --tls-key"
        case .senderTLS: "--tls"
        case .certificateAuthority: "--ca"
        case .certificatePin: "--pin"
        case .clientCertificateAndKey: "--cert and --key"
        case .spoolFolder: "--spool DIR"
        case .spoolLimit: "--spool-max"
        case .backupGiveUp: "--also-give-up"
        case .stopTimeout: "--stop-timeout"
        }
    }
}
