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
    /// How many interrupted streams may wait for their senders at once.
    case maximumWaitingStreams
    /// How long one run of the finished-file hand-off may take.
    case handOffTimeout
    /// How long one run of the alarm hook may take.
    case alarmHookTimeout
    /// The folder of the receiver's commit log.
    case commitLogFolder
    /// The console's address (host and port).
    case consoleAddress
    /// The files of tokens that may use the console.
    case consoleTokenFile
    /// Further host names the console answers to.
    case consoleAllowedHost
    /// The CA that senders' client certificates must be signed by.
    case clientCertificateAuthority
    /// The receiver's TLS certificate and key (given together).
    case receiverCertificateAndKey
    /// The receiver's TLS certificate alone.
    case receiverCertificate
    /// The receiver's TLS private key alone.
    case receiverKey

    // The sender.
    /// The token the sender presents to a receiver that requires one.
    case senderToken
    /// Delivering a spooled stream to a receiver named for it.
    case spoolDelivery
    /// Whether the sender connects with TLS.
    case senderTLS
    /// The CA the sender trusts the receiver's certificate through.
    case certificateAuthority
    /// The receiver certificate's SHA-256 fingerprint the sender trusts.
    case certificatePin
    /// The sender's client certificate and key (given together).
    case clientCertificateAndKey
    /// The sender's client certificate and key, as the receiver points a sender's operator to them.
    case senderClientCertificate
    /// The folder of the sender's spool.
    case spoolFolder
    /// The sender spool's size limit.
    case spoolLimit
    /// How long the sender waits for a backup receiver before dropping it.
    case backupGiveUp
    /// How long the sender keeps delivering after capture stops.
    case stopTimeout
    /// The sender's local copy of the capture (its file's path).
    case localCopy
    /// The length of the local copy's files.
    case localCopySegment

    // Sources (`SourceSettings`).
    /// The listing of the capture devices.
    case deviceList
    /// A test tone as the source, instead of a device.
    case toneSource
    /// Whether a lost device is reopened.
    case reopenDevice

    // Exports (`RecordingExporter`).
    /// The format a recording is exported to.
    case exportFormat
    /// Whether an export replaces a file already there.
    case replaceExport

    // Certificates (`CertificateFactory`).
    /// The host name or address a new certificate is made for.
    case certificateHost
    /// The folder a new certificate and key are written to.
    case certificateFolder
    /// Whether a new certificate and key replace those already in the folder.
    case replaceCertificates
    /// Making a certificate for a host name, as the sender points the receiver's operator to it.
    case certificateForHost
}

/// Renders a `Setting` in a message: a library's own words (`LibrarySettingNames`) or a program's
/// (an executable's flags). Library errors that name a setting take one in `message(naming:)`.
public protocol SettingNaming: Sendable {
    /// The words that name `setting` in a message, read where a noun phrase stands.
    func name(of setting: Setting) -> String
    /// `setting` where a message shows how a value is written: a command line's flag with the
    /// value's placeholder ("--listen HOST:PORT"); a naming without such syntax names the setting
    /// alone (the default).
    func name(of setting: Setting, value placeholder: String) -> String
}

extension SettingNaming {
    public func name(of setting: Setting, value placeholder: String) -> String { name(of: setting) }
}

/// The libraries' own naming: each setting in neutral words with the configuration property that
/// holds it, for programs that embed the libraries (and for every error's `description`).
public struct LibrarySettingNames: SettingNaming {
    public init() {}

    /// The export format with its value is the enumeration's case (`ExportFormat.ogg`); any other
    /// setting is named alone.
    public func name(of setting: Setting, value placeholder: String) -> String {
        setting == .exportFormat ? "ExportFormat.\(placeholder)" : name(of: setting)
    }

    public func name(of setting: Setting) -> String {
        switch setting {
        case .listenAddress: "the listen address (ReceiverConfiguration.host, .port)"
        case .outputFolder: "the output folder (ReceiverConfiguration.outputDirectory)"
        case .maximumStreams: "the stream limit (ReceiverConfiguration.maximumStreams)"
        case .maximumWaitingStreams: "ReceiverConfiguration.maximumWaitingStreams"
        case .handOffTimeout: "FinishedFileHandOff.Settings.timeout"
        case .alarmHookTimeout: "AlarmHook.Settings.timeout"
        case .senderToken: "SenderConfiguration.authToken"
        case .spoolDelivery: "SpooledStreamDeliveries (naming the receiver)"
        case .commitLogFolder: "the commit log folder (ReceiverConfiguration.logDirectory)"
        case .consoleAddress: "the console's address (ConsoleSettings.host, .port)"
        case .consoleTokenFile: "the console's tokens (ConsoleAccess tokens)"
        case .consoleAllowedHost: "an allowed host name (ConsoleAccess allowedHosts)"
        case .clientCertificateAuthority: "the client CA (ReceiverTLSConfiguration.clientCAPath)"
        case .receiverCertificateAndKey: "a certificate and key (ReceiverConfiguration.tls)"
        case .receiverCertificate: "ReceiverTLSConfiguration.certificatePath"
        case .receiverKey: "ReceiverTLSConfiguration.privateKeyPath"
        case .senderTLS: "TLS (SenderConfiguration.tls)"
        case .certificateAuthority: "the trusted CA (SenderTLSConfiguration.trust .authorities)"
        case .certificatePin: "a pinned fingerprint (SenderTLSConfiguration.trust .pin)"
        case .clientCertificateAndKey: "a client certificate and key (SenderTLSConfiguration.clientCertificatePath, .clientKeyPath)"
        case .senderClientCertificate: "the sender's client certificate and key (SenderTLSConfiguration.clientCertificatePath, .clientKeyPath)"
        case .spoolFolder: "the spool folder (CaptureStreamer.Configuration.spoolRoot)"
        case .spoolLimit: "CaptureStreamer.Configuration.spoolCapacity"
        case .backupGiveUp: "CaptureStreamer.Configuration.backupGiveUpAfter"
        case .stopTimeout: "the stop timeout"
        case .localCopy: "the local copy (LocalCopySettings.path)"
        case .localCopySegment: "the local copy's segment length (LocalCopySettings.segmentLength)"
        case .deviceList: "ALSADeviceList.captureDevices()"
        case .toneSource: "SourceSettings.tone"
        case .reopenDevice: "DeviceSettings.reopen"
        case .exportFormat: "the export format (ExportFormat)"
        case .replaceExport: "replacing: true (RecordingExporter.export)"
        case .certificateHost: "the certificate's host (CertificateFactory.make hosts)"
        case .certificateFolder: "folder (CertificateFactory.write's directory)"
        case .replaceCertificates: "overwrite: true (CertificateFactory.write)"
        case .certificateForHost: "CertificateFactory.make with hosts:"
        }
    }
}
