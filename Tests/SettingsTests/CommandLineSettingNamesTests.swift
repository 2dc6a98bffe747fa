import CaptureALSA
import CaptureCLISupport
import CaptureConsole
import CaptureCore
import CaptureExport
import CaptureLocalCopy
import CaptureReceiver
import CaptureSecurity
import CaptureSender
import CaptureWire
import Foundation
import XCTest

/// The libraries' errors read on the command line exactly as they always did (the executables'
/// `CommandLineSettingNames`), and in the library's own words, with no flag, everywhere else.
final class CommandLineSettingNamesTests: XCTestCase {
    private let commandLine = CommandLineSettingNames()

    /// Asserts `error`'s text with the executables' naming and its `description` (the library's words).
    private func assertTexts(
        _ message: (any SettingNaming) -> String, _ description: String, commandLine expected: String, library neutral: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(message(commandLine), expected, file: file, line: line)
        XCTAssertEqual(description, neutral, file: file, line: line)
        XCTAssertFalse(description.contains("--"), description, file: file, line: line)
    }

    func testEverySettingHasAFlag() {
        for setting in Setting.allCases {
            XCTAssertTrue(commandLine.name(of: setting).contains("--"), "\(setting): \(commandLine.name(of: setting))")
        }
    }

    func testReceiverStartErrors() {
        let bind = ReceiverStartError.bindFailed(host: "127.0.0.1", port: 7373, reason: "port 7373 is already in use")
        assertTexts(
            bind.message(naming:), bind.description,
            commandLine: "cannot listen on 127.0.0.1:7373: port 7373 is already in use; choose another address with --listen HOST:PORT",
            library: "cannot listen on 127.0.0.1:7373: port 7373 is already in use; choose another address with the listen address (ReceiverConfiguration.host, .port)")
        let file = ReceiverStartError.outputDirectory(.notAFolder(path: "/srv/x"))
        assertTexts(
            file.message(naming:), file.description,
            commandLine: "--out /srv/x is a file, not a folder; name a folder for the recordings",
            library: "the output folder (ReceiverConfiguration.outputDirectory) /srv/x is a file, not a folder; name a folder for the recordings")
        let create = ReceiverStartError.outputDirectory(.cannotCreate(path: "/srv/x", reason: "permission denied"))
        XCTAssertTrue(create.message(naming: commandLine).hasSuffix("or choose another with --out"))
        XCTAssertFalse(create.description.contains("--"), create.description)
        let log = ReceiverStartError.commitLog(.cannotMakeFolder(path: "/srv/log", reason: "permission denied"))
        assertTexts(
            log.message(naming:), log.description,
            commandLine: "cannot make the commit log folder /srv/log: permission denied; give --log-dir a writable folder",
            library: "cannot make the commit log folder /srv/log: permission denied; give the commit log folder (ReceiverConfiguration.logDirectory) a writable folder")
        let full = ReceiverStartError.commitLog(.log(.logVolumeFull(directory: "/srv/log", segmentSize: 16 << 20)))
        XCTAssertTrue(full.message(naming: commandLine).contains("or give --log-dir another volume"))
        XCTAssertFalse(full.description.contains("--"), full.description)
    }

    func testSecurityErrors() {
        let pin = SecurityError.badPin("12:34")
        assertTexts(
            pin.message(naming:), pin.description,
            commandLine: "--pin \"12:34\" is not a SHA-256 fingerprint: give 64 hexadecimal digits, with or without colons"
                + " (as `capture-recv gen-cert` or `openssl x509 -noout -fingerprint -sha256` print it)",
            library: "a pinned fingerprint (SenderTLSConfiguration.trust .pin) \"12:34\" is not a SHA-256 fingerprint: give 64 hexadecimal digits,"
                + " with or without colons (as `capture-recv gen-cert` or `openssl x509 -noout -fingerprint -sha256` print it)")
        let exists = SecurityError.certificateFilesExist(directory: "/etc/capture")
        assertTexts(
            exists.message(naming:), exists.description,
            commandLine: "cannot make the certificate: /etc/capture already holds cert.pem or key.pem; choose another --out folder or pass --force to replace them",
            library: "cannot make the certificate: /etc/capture already holds cert.pem or key.pem; choose another folder (CertificateFactory.write's directory)"
                + " or pass overwrite: true (CertificateFactory.write) to replace them")
        let host = SecurityError.badHostName("a b")
        XCTAssertTrue(host.message(naming: commandLine).hasPrefix("--host \"a b\" is neither"))
        XCTAssertFalse(host.description.contains("--"), host.description)
        let authority = SecurityError.notAnAuthority(path: "cert.pem", fingerprint: "AB")
        XCTAssertTrue(authority.message(naming: commandLine).hasSuffix("so --ca cannot trust it; connect with --pin AB instead"))
        XCTAssertFalse(authority.description.contains("--"), authority.description)
    }

    func testSenderErrors() {
        let gaveUp = SenderError.gaveUp(receiver: "b:7373", reason: .unreachable(seconds: 30), fromSecond: 1.5)
        assertTexts(
            gaveUp.message(naming:), gaveUp.description,
            commandLine: "backup receiver b:7373 was unreachable for 30 s (--also-give-up) and was dropped: its file is incomplete,"
                + " it lacks the audio from second 1.500 on; the main receiver's file is the whole recording",
            library: "backup receiver b:7373 was unreachable for 30 s (CaptureStreamer.Configuration.backupGiveUpAfter) and was dropped:"
                + " its file is incomplete, it lacks the audio from second 1.500 on; the main receiver's file is the whole recording")
        let behind = SenderError.gaveUp(receiver: "b:7373", reason: .fellBehind(BackupRoom(bytes: 1 << 20, limit: .spoolMax)), fromSecond: 0)
        XCTAssertTrue(behind.message(naming: commandLine).contains("the spool's limit (--spool-max)"))
        XCTAssertFalse(behind.description.contains("--"), behind.description)
        let spool = SpoolError("cannot write in the spool folder /var/spool/x: permission denied", chooseAnother: .spoolFolder)
        assertTexts(
            spool.message(naming:), spool.description,
            commandLine: "cannot write in the spool folder /var/spool/x: permission denied; choose another with --spool DIR",
            library: "cannot write in the spool folder /var/spool/x: permission denied; choose another with the spool folder (CaptureStreamer.Configuration.spoolRoot)")
        let stop = SenderStopSequence.AbandonReason.stopTimeout(.seconds(10))
        assertTexts(
            stop.message(naming:), stop.description,
            commandLine: "--stop-timeout (10 s) passed while delivering", library: "the stop timeout (10 s) passed while delivering")
    }

    /// The connection's, the protocol's and TLS's failures carry their cause and are worded where
    /// they are shown: each text as the session and the TLS setup used to build it.
    func testSenderErrorsThatCarryTheirCause() {
        let lostBefore = "the connection to the receiver was lost before it confirmed the end of the stream: "
        let closedEarly = SenderError.connectionLost(.closedBeforeAccepting)
        assertTexts(
            closedEarly.message(naming:), closedEarly.description,
            commandLine: lostBefore + "the receiver closed the connection before accepting the stream; if it requires TLS, connect with --tls",
            library: lostBefore + "the receiver closed the connection before accepting the stream; if it requires TLS, connect with TLS (SenderConfiguration.tls)")
        let losses: [(SenderError.ConnectionLoss, String)] = [
            (.closed, "the receiver closed the connection"),
            (.transport(reason: "Connection reset by peer (errno 104)"), "Connection reset by peer (errno 104)"),
            (.tlsError(reason: "bad record mac"), "TLS error: bad record mac"),
            (.stoppedUnacknowledged(messages: 3, bytes: 4_096), "delivery was stopped with 3 messages (4096 bytes) not acknowledged by the receiver"),
            (.deliveryDidNotRun, "delivery did not run"),
        ]
        for (loss, text) in losses {
            let error = SenderError.connectionLost(loss)
            assertTexts(error.message(naming:), error.description, commandLine: lostBefore + text, library: lostBefore + text)
        }

        let ack = SenderError.protocolViolation(.ackBeyondSent(acknowledged: 99, highestSent: 3))
        let ackText = "the receiver broke the protocol: the receiver acknowledged sequence 99 but only 3 was sent on this connection; check that capture-recv is the same version"
        assertTexts(ack.message(naming:), ack.description, commandLine: ackText, library: ackText)
        let speaksTLS = SenderError.protocolViolation(.receiverSpeaksTLS)
        assertTexts(
            speaksTLS.message(naming:), speaksTLS.description,
            commandLine: "the receiver broke the protocol: the receiver speaks TLS; connect with --tls (and --ca or --pin to trust its certificate);"
                + " check that capture-recv is the same version",
            library: "the receiver broke the protocol: the receiver speaks TLS; connect with TLS (SenderConfiguration.tls) (and the trusted CA"
                + " (SenderTLSConfiguration.trust .authorities) or a pinned fingerprint (SenderTLSConfiguration.trust .pin) to trust its certificate);"
                + " check that capture-recv is the same version")
        let broke = SenderError.gaveUp(receiver: "b:7373", reason: .brokeProtocol(seconds: 3, detail: .receiverSpeaksTLS), fromSecond: 0)
        let lacks = ", and was dropped: its file is incomplete, it lacks the audio from second 0.000 on; the main receiver's file is the whole recording"
        assertTexts(
            broke.message(naming:), broke.description,
            commandLine: "backup receiver b:7373 made no progress for 3 s (--also-give-up): it broke the protocol"
                + " (the receiver speaks TLS; connect with --tls (and --ca or --pin to trust its certificate))" + lacks,
            library: "backup receiver b:7373 made no progress for 3 s (CaptureStreamer.Configuration.backupGiveUpAfter): it broke the protocol"
                + " (the receiver speaks TLS; connect with TLS (SenderConfiguration.tls) (and the trusted CA (SenderTLSConfiguration.trust .authorities)"
                + " or a pinned fingerprint (SenderTLSConfiguration.trust .pin) to trust its certificate))" + lacks)

        let libraryClientCA = "the client CA (ReceiverTLSConfiguration.clientCAPath)"
        let libraryClientCertificate = "a client certificate and key (SenderTLSConfiguration.clientCertificatePath, .clientKeyPath)"
        let libraryReceiverCertificate = "a certificate and key (ReceiverConfiguration.tls)"
        let tls: [(SenderError.TLSFailure, commandLine: String, library: String)] = [
            (.unreadableClientCredentials(.unreadableFile(path: "/etc/k.pem", reason: "no such file")),
             "cannot read /etc/k.pem: no such file; check the path and its permissions",
             "cannot read /etc/k.pem: no such file; check the path and its permissions"),
            (.cannotSetUp(reason: "key values mismatch"),
             "cannot set up TLS: key values mismatch; check that --cert and --key belong together",
             "cannot set up TLS: key values mismatch; check that \(libraryClientCertificate) belong together"),
            (.receiverCertificateRefused(CertificateRefusal(peerName: "the receiver", authority: .certificateAuthority, reason: .noCertificate)),
             "the receiver presented no certificate", "the receiver presented no certificate"),
            (.hostNameMismatch(host: "127.0.0.1", certificateNames: "elsewhere.example, 10.9.8.7"),
             "host-name mismatch: the receiver's certificate is not for 127.0.0.1 (it is for elsewhere.example, 10.9.8.7);"
                + " connect with a name the certificate lists, or make a certificate for 127.0.0.1 (gen-cert --host 127.0.0.1)",
             "host-name mismatch: the receiver's certificate is not for 127.0.0.1 (it is for elsewhere.example, 10.9.8.7);"
                + " connect with a name the certificate lists, or make a certificate for 127.0.0.1 (CertificateFactory.make with hosts: 127.0.0.1)"),
            (.hostNameMismatch(host: "recorder", certificateNames: nil),
             "host-name mismatch: the receiver's certificate is not for recorder;"
                + " connect with a name the certificate lists, or make a certificate for recorder (gen-cert --host recorder)",
             "host-name mismatch: the receiver's certificate is not for recorder;"
                + " connect with a name the certificate lists, or make a certificate for recorder (CertificateFactory.make with hosts: recorder)"),
            (.clientCertificateMissing,
             "missing client certificate: the receiver requires mutual TLS; pass --cert and --key with a certificate signed by its --client-ca",
             "missing client certificate: the receiver requires mutual TLS; pass \(libraryClientCertificate) with a certificate signed by its \(libraryClientCA)"),
            (.clientCertificateRefused(alert: "unknown ca"),
             "the receiver refused this sender's client certificate (unknown ca); use a valid certificate signed by the receiver's --client-ca",
             "the receiver refused this sender's client certificate (unknown ca); use a valid certificate signed by the receiver's \(libraryClientCA)"),
            (.receiverSpeaksPlaintext,
             "the receiver did not answer with TLS; start capture-recv with --tls-cert and --tls-key, or connect without --tls",
             "the receiver did not answer with TLS; start capture-recv with \(libraryReceiverCertificate), or connect without TLS (SenderConfiguration.tls)"),
            (.closedDuringHandshake(reason: "end of file"),
             "the receiver closed the connection during the TLS handshake (end of file);"
                + " does the receiver speak TLS? start capture-recv with --tls-cert and --tls-key, or connect without --tls",
             "the receiver closed the connection during the TLS handshake (end of file);"
                + " does the receiver speak TLS? start capture-recv with \(libraryReceiverCertificate), or connect without TLS (SenderConfiguration.tls)"),
        ]
        for (failure, commandLineText, libraryText) in tls {
            let error = SenderError.tls(failure)
            assertTexts(error.message(naming:), error.description, commandLine: "TLS: " + commandLineText, library: "TLS: " + libraryText)
        }
    }

    /// A refused certificate is worded where it is shown, with the CA's and the pin's settings named
    /// as the caller spells them.
    func testCertificateRefusals() {
        let presented = CertificateFingerprint(der: [1, 2, 3]), pinned = CertificateFingerprint(der: [4, 5, 6])
        let libraryCA = "the trusted CA (SenderTLSConfiguration.trust .authorities)"
        let libraryPin = "a pinned fingerprint (SenderTLSConfiguration.trust .pin)"
        let libraryClientCA = "the client CA (ReceiverTLSConfiguration.clientCAPath)"
        let receiver = { (reason: CertificateRefusal.Reason) in CertificateRefusal(peerName: "the receiver", authority: .certificateAuthority, reason: reason) }
        let sender = { (reason: CertificateRefusal.Reason) in CertificateRefusal(peerName: "the sender", authority: .clientCertificateAuthority, reason: reason) }
        let rows: [(CertificateRefusal, commandLine: String, library: String, line: UInt)] = [
            (receiver(.noCertificate), "the receiver presented no certificate", "the receiver presented no certificate", #line),
            (sender(.unparseable), "the sender's certificate cannot be parsed", "the sender's certificate cannot be parsed", #line),
            (receiver(.pinMismatch(presented: presented, pinned: pinned)),
             "pin mismatch: the receiver's certificate has SHA-256 fingerprint \(presented.hex), not the pinned \(pinned.hex); if the certificate was replaced on purpose, pin the new fingerprint",
             "pin mismatch: the receiver's certificate has SHA-256 fingerprint \(presented.hex), not the pinned \(pinned.hex); if the certificate was replaced on purpose, pin the new fingerprint",
             #line),
            (receiver(.expired(notValidAfter: Date(timeIntervalSince1970: 1_700_000_000))),
             "the receiver's certificate expired on 2023-11-14T22:13:20Z; renew it (capture-recv gen-cert, or your CA)",
             "the receiver's certificate expired on 2023-11-14T22:13:20Z; renew it (capture-recv gen-cert, or your CA)", #line),
            (sender(.notYetValid(notValidBefore: Date(timeIntervalSince1970: 1_700_000_000))),
             "the sender's certificate is not valid before 2023-11-14T22:13:20Z; check both machines' clocks",
             "the sender's certificate is not valid before 2023-11-14T22:13:20Z; check both machines' clocks", #line),
            (receiver(.untrusted(subject: "CN=localhost", issuer: nil, trustedBy: .systemStore, fingerprint: presented)),
             "untrusted certificate: the receiver's certificate (CN=localhost) is self-signed and is not signed by a CA in the system trust store;"
                + " pass the CA that signed it with --ca, or pin it with --pin \(presented.hex)",
             "untrusted certificate: the receiver's certificate (CN=localhost) is self-signed and is not signed by a CA in the system trust store;"
                + " pass the CA that signed it with \(libraryCA), or pin it with \(libraryPin) \(presented.hex)", #line),
            (receiver(.untrusted(subject: "CN=recorder", issuer: "CN=Field CA", trustedBy: .authorities, fingerprint: presented)),
             "untrusted certificate: the receiver's certificate (CN=recorder) was issued by CN=Field CA and is not signed by the CA in --ca;"
                + " pass the CA that signed it with --ca, or pin it with --pin \(presented.hex)",
             "untrusted certificate: the receiver's certificate (CN=recorder) was issued by CN=Field CA and is not signed by the CA in \(libraryCA);"
                + " pass the CA that signed it with \(libraryCA), or pin it with \(libraryPin) \(presented.hex)", #line),
            (sender(.untrusted(subject: "CN=kit-x", issuer: "CN=Stranger CA", trustedBy: .authorities, fingerprint: presented)),
             "untrusted certificate: the sender's certificate (CN=kit-x) was issued by CN=Stranger CA and is not signed by the CA in --client-ca;"
                + " pass the CA that signed it with --client-ca",
             "untrusted certificate: the sender's certificate (CN=kit-x) was issued by CN=Stranger CA and is not signed by the CA in \(libraryClientCA);"
                + " pass the CA that signed it with \(libraryClientCA)", #line),
        ]
        for (refusal, commandLineText, libraryText, line) in rows {
            XCTAssertEqual(refusal.message(naming: commandLine), commandLineText, line: line)
            XCTAssertEqual(refusal.message(naming: LibrarySettingNames()), libraryText, line: line)
        }
    }

    /// Audio a packet log could not keep is worded where it is logged, the spool's limit named as the
    /// caller spells it.
    func testAudioLoss() {
        let rows: [(AudioLoss, commandLine: String, library: String, line: UInt)] = [
            (.logFullWithoutOverflow(capacity: 10_000),
             "the log is full (10000 bytes) and there is no overflow folder", "the log is full (10000 bytes) and there is no overflow folder", #line),
            (.overflowFileNotCreated(capacity: 4_096, reason: "no space left on device"),
             "the log is full (--spool-max 4096 bytes) and the overflow file could not be created: no space left on device",
             "the log is full (\(LibrarySettingNames().name(of: .spoolLimit)) 4096 bytes) and the overflow file could not be created: no space left on device", #line),
            (.overflowWriteFailed(reason: "input/output error"),
             "writing the overflow file failed: input/output error", "writing the overflow file failed: input/output error", #line),
        ]
        for (loss, commandLineText, libraryText, line) in rows {
            XCTAssertEqual(loss.message(naming: commandLine), commandLineText, line: line)
            XCTAssertEqual(loss.message(naming: LibrarySettingNames()), libraryText, line: line)
        }
    }

    /// The streamer's errors carry the failure beneath them and are worded where they are shown.
    func testCaptureStreamerErrors() {
        let silent = CaptureStreamerError.capture(.deviceSilent(device: "hw:1"))
        XCTAssertEqual(
            silent.message(naming: commandLine),
            "ALSA capture device 'hw:1' delivers no audio; check that it is running, or use `--source tone` to test without it")
        XCTAssertEqual(
            silent.description,
            "ALSA capture device 'hw:1' delivers no audio; check that it is running, or use `SourceSettings.tone` to test without it")
        XCTAssertEqual(CaptureStreamerError.invalidMarker("too long").message(naming: commandLine), "too long")
    }

    /// A refused Hello is worded where the session sends it: capture-recv's flags on the wire.
    func testHelloRefusals() {
        let missing = HelloRefusal.missingToken
        XCTAssertEqual(
            missing.message(naming: commandLine),
            "missing token: this receiver requires a token; give capture-send --token-file FILE or set CAPTURE_TOKEN")
        XCTAssertEqual(
            missing.message(naming: LibrarySettingNames()),
            "missing token: this receiver requires a token; give capture-send SenderConfiguration.authToken or set CAPTURE_TOKEN")
        let wrong = HelloRefusal.wrongToken
        XCTAssertEqual(
            wrong.message(naming: commandLine),
            "wrong token: the token is not one this receiver accepts; check the sender's --token-file or CAPTURE_TOKEN")
        XCTAssertEqual(
            wrong.message(naming: LibrarySettingNames()),
            "wrong token: the token is not one this receiver accepts; check the sender's SenderConfiguration.authToken or CAPTURE_TOKEN")
        let full = HelloRefusal.tooManyStreams(maximumStreams: 4)
        XCTAssertEqual(full.message(naming: commandLine), "the receiver already records 4 streams; try again later or raise --max-streams")
        XCTAssertEqual(
            full.message(naming: LibrarySettingNames()),
            "the receiver already records 4 streams; try again later or raise the stream limit (ReceiverConfiguration.maximumStreams)")
        let stream = UUID(uuidString: "00000000-0000-4000-8000-000000000001") ?? UUID()
        let busy = HelloRefusal.streamBusy(streamID: stream)
        let busyText = "stream 00000000-0000-4000-8000-000000000001 is already being received on another connection"
        XCTAssertEqual(busy.message(naming: commandLine), busyText)
        XCTAssertEqual(busy.message(naming: LibrarySettingNames()), busyText)
    }

    func testLocalCopyErrors() {
        let container = LocalCopyError.unsupportedContainer(path: "/tmp/take.mp3")
        assertTexts(
            container.message(naming:), container.description,
            commandLine: "--record /tmp/take.mp3: the file must end in .caf, .wav or .flac",
            library: "the local copy (LocalCopySettings.path) /tmp/take.mp3: the file must end in .caf, .wav or .flac")
        let segment = LocalCopyError.invalidSegment(.zero)
        assertTexts(
            segment.message(naming:), segment.description,
            commandLine: "--record-segment is 0 s: use whole seconds from 1 s to 24 h (1s, 15m, 1h)",
            library: "the local copy's segment length (LocalCopySettings.segmentLength) is 0 s: use whole seconds from 1 s to 24 h (1s, 15m, 1h)")
        let fraction = LocalCopyError.invalidSegment(.milliseconds(1_500))
        XCTAssertEqual(fraction.message(naming: commandLine), "--record-segment is 1.5 s: use whole seconds from 1 s to 24 h (1s, 15m, 1h)")
    }

    func testConsoleErrors() throws {
        let open = ConsoleSetupError.tokensRequired(host: "0.0.0.0")
        assertTexts(
            open.message(naming:), open.description,
            commandLine: "--http 0.0.0.0 is reachable from other machines, and the console plays live audio: give --http-token-file FILE"
                + " (the tokens that may use it), or listen on 127.0.0.1",
            library: "the console's address (ConsoleSettings.host, .port) 0.0.0.0 is reachable from other machines, and the console plays live audio:"
                + " give the console's tokens (ConsoleAccess tokens) (the tokens that may use it), or listen on 127.0.0.1")
        let busy = ConsoleSetupError.cannotListen(host: "127.0.0.1", port: 8080, reason: "port 8080 is already in use")
        XCTAssertTrue(busy.message(naming: commandLine).hasSuffix("; choose another address with --http HOST:PORT"))
        XCTAssertFalse(busy.description.contains("--"), busy.description)
        let bad = ConsoleSetupError.badHost(setting: .consoleAllowedHost, value: "a b")
        XCTAssertTrue(bad.message(naming: commandLine).hasPrefix("--http-allow-host a b is not a host name or address"))
        let hosts = try ConsoleHostNames(listeningOn: "127.0.0.1", machineAddresses: { [] })
        XCTAssertEqual(
            hosts.refusal(host: "evil.example", secure: false, settingNames: commandLine),
            "capture-recv: this console does not answer to the name evil.example (the request's Host); if that name is this machine's,"
                + " start capture-recv with --http-allow-host evil.example")
        XCTAssertEqual(
            hosts.refusal(origin: "http://evil.example", method: "POST", settingNames: commandLine),
            "capture-recv: this console takes no POST from pages of http://evil.example (the request's Origin); if that site is this console's,"
                + " start capture-recv with --http-allow-host NAME for its host name")
    }

    func testExportErrors() {
        let ogg = ExportError.oggNeedsOpus(path: "take.caf", packetTable: false)
        assertTexts(
            ogg.message(naming:), ogg.description,
            commandLine: "cannot export take.caf: it is not an Opus recording: --to ogg remuxes Opus; export linear PCM as flac, wav or rf64",
            library: "cannot export take.caf: it is not an Opus recording: ExportFormat.ogg remuxes Opus; export linear PCM as flac, wav or rf64")
        let exists = ExportError.exists("take.flac")
        assertTexts(
            exists.message(naming:), exists.description,
            commandLine: "take.flac exists already; remove it or pass --force to replace it",
            library: "take.flac exists already; remove it or pass replacing: true (RecordingExporter.export) to replace it")
    }

    /// A device that cannot be opened: the advice names the device listing and the tone source.
    func testALSAErrors() {
        func openFailure(_ naming: any SettingNaming) -> String {
            do {
                _ = try ALSASource(
                    device: "hw:CARD=NoSuchCard", requested: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), periodFrames: 480, bufferCount: 3)
                return "opened"
            } catch {
                return error.message(naming: naming)
            }
        }
        XCTAssertTrue(
            openFailure(commandLine).hasSuffix(
                "Run `capture-send --list-devices` to see the capture devices, or use `--source tone` to send a test tone without a sound card."),
            openFailure(commandLine))
        let neutral = openFailure(LibrarySettingNames())
        XCTAssertTrue(
            neutral.hasSuffix("Run `ALSADeviceList.captureDevices()` to see the capture devices, or use `SourceSettings.tone` to send a test tone without a sound card."),
            neutral)
        XCTAssertFalse(neutral.contains("--"), neutral)
    }

    /// The ALSA source's failures carry the device, the step and libasound's error; each text as the
    /// source used to build it.
    func testALSAFailuresThatCarryTheirData() {
        let cliAdvice = "Run `capture-send --list-devices` to see the capture devices, or use `--source tone` to send a test tone without a sound card."
        let libraryAdvice = "Run `ALSADeviceList.captureDevices()` to see the capture devices, or use `SourceSettings.tone` to send a test tone without a sound card."
        let opens: [(Int32, String, String)] = [
            (-EBUSY, "Device or resource busy", "Device or resource busy (another program is capturing from it)"),
            (-ENOENT, "No such file or directory", "No such file or directory (no such capture device; there may be no sound card)"),
            (-ENODEV, "No such device", "No such device (no such capture device; there may be no sound card)"),
            (-EINVAL, "Invalid argument", "Invalid argument"),
        ]
        for (code, reason, worded) in opens {
            let error = CaptureError.deviceUnavailable(DeviceFailure(device: "hw:1,0", activity: .opening, code: code, reason: reason))
            assertTexts(
                error.message(naming:), error.description,
                commandLine: "cannot open ALSA capture device 'hw:1,0': \(worded). " + cliAdvice,
                library: "cannot open ALSA capture device 'hw:1,0': \(worded). " + libraryAdvice)
        }
        let setup = CaptureError.deviceUnavailable(
            DeviceFailure(device: "hw:1,0", activity: .settingUp(step: "setting 2 channels"), code: -EINVAL, reason: "Invalid argument"))
        let setupText = "cannot set up ALSA capture device 'hw:1,0' (setting 2 channels): Invalid argument. Try another device, for example a `plughw:` one. "
        assertTexts(setup.message(naming:), setup.description, commandLine: setupText + cliAdvice, library: setupText + libraryAdvice)
        let lost = CaptureError.deviceLost(DeviceFailure(device: "hw:1,0", activity: .using("capturing"), code: -ENODEV, reason: "No such device"))
        assertTexts(
            lost.message(naming:), lost.description,
            commandLine: "ALSA capture device 'hw:1,0' was lost while capturing: No such device. Check that it is still connected; with `--reopen` capture-send reopens it and records the gap.",
            library: "ALSA capture device 'hw:1,0' was lost while capturing: No such device. Check that it is still connected; with `DeviceSettings.reopen` capture-send reopens it and records the gap.")
        let silent = CaptureError.deviceSilent(device: "hw:1,0")
        assertTexts(
            silent.message(naming:), silent.description,
            commandLine: "ALSA capture device 'hw:1,0' delivers no audio; check that it is running, or use `--source tone` to test without it",
            library: "ALSA capture device 'hw:1,0' delivers no audio; check that it is running, or use `SourceSettings.tone` to test without it")
        let failed = SenderError.captureFailed(lost)
        assertTexts(
            failed.message(naming:), failed.description,
            commandLine: "capture failed: " + lost.message(naming: commandLine), library: "capture failed: " + lost.description)
    }

    func testWireErrors() {
        let clientTLS = WireError.clientSpeaksTLS
        assertTexts(
            clientTLS.message(naming:), clientTLS.description,
            commandLine: "the client speaks TLS; start capture-recv with --tls-cert/--tls-key or connect without --tls",
            library: "the client speaks TLS; start capture-recv with ReceiverTLSConfiguration.certificatePath/ReceiverTLSConfiguration.privateKeyPath"
                + " or connect without TLS (SenderConfiguration.tls)")
        let receiverTLS = WireError.receiverSpeaksTLS
        assertTexts(
            receiverTLS.message(naming:), receiverTLS.description,
            commandLine: "the receiver speaks TLS; connect with --tls (and --ca or --pin to trust its certificate)",
            library: "the receiver speaks TLS; connect with TLS (SenderConfiguration.tls) (and the trusted CA (SenderTLSConfiguration.trust .authorities)"
                + " or a pinned fingerprint (SenderTLSConfiguration.trust .pin) to trust its certificate)")
    }

    func testFileNameTemplateErrors() {
        let absolute = FileNameTemplate.TemplateError.absolute("/srv/{stream}")
        assertTexts(
            absolute.message(naming:), absolute.description,
            commandLine: "the file name template '/srv/{stream}' starts with '/'; names are relative to --out",
            library: "the file name template '/srv/{stream}' starts with '/'; names are relative to the output folder (ReceiverConfiguration.outputDirectory)")
    }
}
