import CaptureCore
import CaptureSecurity
import CaptureWire

/// Why a stream could not be sent. Each message is the one line capture-send prints before it exits
/// non-zero, and says what to do.
public enum SenderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The receiver could not be reached.
    case connectFailed(host: String, port: Int, reason: String)
    /// The receiver refused the stream or reported an error.
    case refused(code: String, message: String)
    /// The receiver refuses this sender's address for now (RATE_LIMITED): try again after `retryAfter` seconds.
    case rateLimited(message: String, retryAfter: Double)
    /// The connection broke before the receiver acknowledged the end of the stream, for `reason`.
    case connectionLost(ConnectionLoss)
    /// The receiver broke the protocol: what it did wrong, as this side detected it.
    case protocolViolation(WireError)
    /// Capture failed, for the source's reason.
    case captureFailed(CaptureError)
    /// The encoder failed.
    case encoderFailed(String)
    /// No answer in time.
    case timedOut(String)
    /// TLS could not be set up or the receiver's (or this sender's) certificate was refused.
    case tls(TLSFailure)
    /// Audio kept in the spool for sending could not be read back: the stream cannot go on from it.
    case spoolUnreadable(firstSequence: UInt64, reason: String)
    /// A backup receiver was given up (dropped) for `reason`: the spool keeps nothing more for it,
    /// and its file lacks the audio from `fromSecond` on. The main receiver is never given up.
    case gaveUp(receiver: String, reason: GiveUpReason, fromSecond: Double)
    /// The receiver lost audio it had acknowledged (its storage did not keep what it confirmed):
    /// `lost` names each lost stretch ("7.500-12.000"), which is in no file; `unconfirmed` each
    /// stretch it acknowledged in a stream it no longer knows, so it cannot confirm that a file holds
    /// it. The rest of the stream was delivered in `restIn` (nil: nothing was left to deliver).
    case receiverLostAcknowledgedAudio(receiver: String, lost: [String], unconfirmed: [String], restIn: String?)
    /// The stream holds an entry (sequence `sequence`) whose frame type came after version 1's first
    /// nine (a Marker, a FilledGap) and the receiver does not accept it (its HelloAccepted does not
    /// list the type: it predates it). The entry cannot be sent, nor skipped (its sequence is the
    /// stream's), so nothing from it on is delivered to that receiver.
    case receiverPredatesFrameType(WireMessageType, sequence: UInt64)

    /// Why a backup receiver was given up: a backup may cost itself its copy, never the main
    /// receiver its audio or its pace.
    public enum GiveUpReason: Sendable, Equatable {
        /// No connection was accepted for `seconds` (`--also-give-up`) while it lacked audio.
        case unreachable(seconds: Double)
        /// Connected, it acknowledged nothing new for `seconds` while it lacked audio.
        case noProgress(seconds: Double)
        /// It broke the protocol (`detail`: acknowledging what was never sent, for one), so it made
        /// no progress for `seconds`, however often it was reconnected to.
        case brokeProtocol(seconds: Double, detail: WireError)
        /// What only it lacked reached the log's room: keeping more for it would have cost the main
        /// receiver audio (or held it up), so it was given up at once.
        case fellBehind(BackupRoom)
    }

    /// Why the connection to the receiver was lost.
    public enum ConnectionLoss: Sendable, Equatable {
        /// The receiver closed a plain TCP connection before it accepted the stream: it may require TLS.
        case closedBeforeAccepting
        /// The receiver closed the connection.
        case closed
        /// The socket failed; `reason` is the system's description of the error.
        case transport(reason: String)
        /// TLS failed after its handshake; `reason` is TLS's description of the error.
        case tlsError(reason: String)
        /// Delivery was stopped while `messages` messages (`bytes` bytes) were not yet acknowledged.
        case stoppedUnacknowledged(messages: UInt64, bytes: Int)
        /// Delivery to this receiver never ran.
        case deliveryDidNotRun

        /// The reason's text, naming the settings to change as `naming` spells them.
        public func message(naming: any SettingNaming) -> String {
            switch self {
            case .closedBeforeAccepting:
                return "the receiver closed the connection before accepting the stream; if it requires TLS, connect with \(naming.name(of: .senderTLS))"
            case .closed:
                return "the receiver closed the connection"
            case .transport(let reason):
                return reason
            case .tlsError(let reason):
                return "TLS error: \(reason)"
            case .stoppedUnacknowledged(let messages, let bytes):
                return "delivery was stopped with \(messages) messages (\(bytes) bytes) not acknowledged by the receiver"
            case .deliveryDidNotRun:
                return "delivery did not run"
            }
        }
    }

    /// Why TLS failed on the sender's connection.
    public enum TLSFailure: Sendable, Equatable {
        /// The client certificate or key could not be read.
        case unreadableClientCredentials(SecurityError)
        /// NIOSSL refused the configuration (`reason`): the client certificate and key do not belong together.
        case cannotSetUp(reason: String)
        /// The receiver's certificate was refused, for the certificate check's reasons.
        case receiverCertificateRefused(CertificateRefusal)
        /// The receiver's certificate is not for `host`; `certificateNames` lists the names it is for, when known.
        case hostNameMismatch(host: String, certificateNames: String?)
        /// The receiver requires mutual TLS and this sender presented no client certificate.
        case clientCertificateMissing
        /// The receiver refused this sender's client certificate with the TLS alert `alert` ("unknown ca").
        case clientCertificateRefused(alert: String)
        /// The receiver did not answer with TLS.
        case receiverSpeaksPlaintext
        /// The receiver closed the connection during the TLS handshake (`reason`: TLS's description).
        case closedDuringHandshake(reason: String)

        /// The failure's text, naming the settings to change as `naming` spells them.
        public func message(naming: any SettingNaming) -> String {
            let receiverCertificate = naming.name(of: .receiverCertificateAndKey), senderTLS = naming.name(of: .senderTLS)
            let clientCA = naming.name(of: .clientCertificateAuthority)
            switch self {
            case .unreadableClientCredentials(let error):
                return error.message(naming: naming)
            case .cannotSetUp(let reason):
                return "cannot set up TLS: \(reason); check that \(naming.name(of: .clientCertificateAndKey)) belong together"
            case .receiverCertificateRefused(let refusal):
                return refusal.message(naming: naming)
            case .hostNameMismatch(let host, let certificateNames):
                let names = certificateNames.map { " (it is for \($0))" } ?? ""
                return "host-name mismatch: the receiver's certificate is not for \(host)\(names);"
                    + " connect with a name the certificate lists, or make a certificate for \(host) (\(naming.name(of: .certificateForHost)) \(host))"
            case .clientCertificateMissing:
                return "missing client certificate: the receiver requires mutual TLS; pass \(naming.name(of: .clientCertificateAndKey)) with a certificate signed by its \(clientCA)"
            case .clientCertificateRefused(let alert):
                return "the receiver refused this sender's client certificate (\(alert)); use a valid certificate signed by the receiver's \(clientCA)"
            case .receiverSpeaksPlaintext:
                return "the receiver did not answer with TLS; start capture-recv with \(receiverCertificate), or connect without \(senderTLS)"
            case .closedDuringHandshake(let reason):
                return "the receiver closed the connection during the TLS handshake (\(reason));"
                    + " does the receiver speak TLS? start capture-recv with \(receiverCertificate), or connect without \(senderTLS)"
            }
        }
    }

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        let giveUp = naming.name(of: .backupGiveUp)
        switch self {
        case .connectFailed(let host, let port, let reason):
            return "cannot connect to \(host):\(port): \(reason); check that capture-recv is running there and the port is open"
        case .refused(let code, let message):
            return "the receiver refused the stream (\(code)): \(message)"
        case .rateLimited(let message, let retryAfter):
            return "the receiver refuses this address for now (rateLimited): \(message); trying again in \(Self.seconds(retryAfter.rounded(.up))) s, and the audio is kept meanwhile"
        case .connectionLost(let reason):
            return "the connection to the receiver was lost before it confirmed the end of the stream: \(reason.message(naming: naming))"
        case .receiverPredatesFrameType(let type, let sequence):
            let (what, plural): (String, String)
            switch type {
            case .marker: (what, plural) = ("a marker", "markers")
            case .filledGap: (what, plural) = ("a gap carried as encoded silence", "such gaps (frame type 11)")
            default: (what, plural) = ("a \(type) frame", "\(type) frames (frame type \(type.rawValue))")
            }
            return "the stream holds \(what) (sequence \(sequence)) but the receiver does not accept \(plural) (it predates them): upgrade capture-recv; the audio from there on is kept in the spool and delivered once the receiver accepts them"
        case .protocolViolation(let reason):
            return "the receiver broke the protocol: \(reason.message(naming: naming)); check that capture-recv is the same version"
        case .captureFailed(let error):
            return "capture failed: \(error.message(naming: naming))"
        case .encoderFailed(let reason):
            return "encoding failed: \(reason)"
        case .timedOut(let reason):
            return "timed out: \(reason)"
        case .tls(let failure):
            return "TLS: \(failure.message(naming: naming))"
        case .spoolUnreadable(let sequence, let reason):
            return "the spool cannot give back the audio from sequence \(sequence) on: \(reason); that audio cannot be delivered and stays in the spool for `capture-send spool list` (check the disk: dmesg, df)"
        case .receiverLostAcknowledgedAudio(let receiver, let lost, let unconfirmed, let restIn):
            var parts: [String] = []
            if !lost.isEmpty {
                parts.append("receiver \(receiver) lost seconds \(lost.joined(separator: ", ")) of the stream after acknowledging them"
                    + " (its storage did not keep what it confirmed: check that its file system makes fsync durable, and its disk);"
                    + " that audio is in no file and this sender no longer holds it")
            }
            if !unconfirmed.isEmpty {
                parts.append("receiver \(receiver) cannot confirm that it still holds seconds \(unconfirmed.joined(separator: ", ")) of the stream,"
                    + " which it acknowledged: it no longer knows the stream they were recorded in (its record expired, or its storage lost it);"
                    + " check that recording's file, this sender no longer holds that audio")
            }
            return parts.joined(separator: "; ") + (restIn.map { "; the rest of the stream was delivered, in \($0)" } ?? "")
        case .gaveUp(let receiver, let reason, let fromSecond):
            let lacks = "its file is incomplete, it lacks the audio from second \(String(format: "%.3f", fromSecond)) on; the main receiver's file is the whole recording"
            switch reason {
            case .unreachable(let seconds):
                return "backup receiver \(receiver) was unreachable for \(Self.seconds(seconds)) s (\(giveUp)) and was dropped: \(lacks)"
            case .noProgress(let seconds):
                return "backup receiver \(receiver) made no progress for \(Self.seconds(seconds)) s (\(giveUp)): it was connected but acknowledged nothing new, and was dropped: \(lacks)"
            case .brokeProtocol(let seconds, let detail):
                return "backup receiver \(receiver) made no progress for \(Self.seconds(seconds)) s (\(giveUp)): it broke the protocol (\(detail.message(naming: naming))), and was dropped: \(lacks)"
            case .fellBehind(let room):
                return "backup receiver \(receiver) was dropped at once: \(room.message(naming: naming)); \(lacks)"
            }
        }
    }

    /// 3, 2.5, 1e+300: whole seconds without a fraction; never traps.
    private static func seconds(_ value: Double) -> String {
        if let whole = Int(exactly: value) { return String(whole) }
        return value.isFinite && value == value.rounded() ? String(format: "%g", value) : String(format: "%.1f", value)
    }
}
