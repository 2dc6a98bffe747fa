import CaptureCore

/// Both executables' naming of the libraries' settings: each as the flag (with its value's
/// placeholder where a message shows one) that sets it, so that a library error reads on the
/// command line as it always did ("choose another address with --listen HOST:PORT"). One naming
/// serves both programs because a message may point to the other side's flag ("connect with --tls").
public struct CommandLineSettingNames: SettingNaming {
    public init() {}

    public func name(of setting: Setting) -> String {
        switch setting {
        case .listenAddress: "--listen"
        case .outputFolder: "--out"
        case .maximumStreams: "--max-streams"
        case .maximumWaitingStreams: "--max-waiting-streams"
        case .handOffTimeout: "--on-finalize-timeout"
        case .alarmHookTimeout: "--on-alarm-timeout"
        case .senderToken: "--token-file"
        case .spoolDelivery: "capture-send spool deliver ID --to"
        case .commitLogFolder: "--log-dir"
        case .consoleAddress: "--http"
        case .consoleTokenFile: "--http-token-file"
        case .consoleAllowedHost: "--http-allow-host"
        case .clientCertificateAuthority: "--client-ca"
        case .receiverCertificateAndKey: "--tls-cert and --tls-key"
        case .receiverCertificate: "--tls-cert"
        case .receiverKey: "--tls-key"
        case .senderTLS: "--tls"
        case .certificateAuthority: "--ca"
        case .certificatePin: "--pin"
        case .clientCertificateAndKey: "--cert and --key"
        case .senderClientCertificate: "capture-send --cert/--key"
        case .spoolFolder: "--spool"
        case .spoolLimit: "--spool-max"
        case .backupGiveUp: "--also-give-up"
        case .stopTimeout: "--stop-timeout"
        case .localCopy: "--record"
        case .localCopySegment: "--record-segment"
        case .deviceList: "capture-send --list-devices"
        case .toneSource: "--source tone"
        case .reopenDevice: "--reopen"
        case .exportFormat: "--to"
        case .replaceExport: "--force"
        case .certificateHost: "--host"
        case .certificateFolder: "--out folder"
        case .replaceCertificates: "--force"
        case .certificateForHost: "gen-cert --host"
        }
    }

    /// The flag and the value's placeholder: "--listen HOST:PORT".
    public func name(of setting: Setting, value placeholder: String) -> String {
        "\(name(of: setting)) \(placeholder)"
    }
}
