import ArgumentParser
import CaptureALSA
import CaptureCLISupport
import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureSources
import CaptureStatus
import Dispatch
import Foundation
import Logging

/// Where capture-send takes its audio from.
enum SourceKind: String, CaseIterable, ExpressibleByArgument {
    case alsa, tone, file
}

/// How capture-send encodes.
enum CodecKind: String, CaseIterable, ExpressibleByArgument {
    case pcm, opus
}

extension PCMSampleFormat: ExpressibleByArgument {}
extension OpusApplication: ExpressibleByArgument {}

/// `capture-send`: captures audio and streams it to capture-recv.
struct CaptureSend: ParsableCommand {
    /// The exit status of a run that stopped delivering before the receiver had everything (a
    /// second stop signal, `--stop-timeout`): what it lacks stays in the spool. README, "exit status".
    static let abandonedExitCode: Int32 = 3

    static let configuration = CommandConfiguration(
        commandName: "capture-send",
        abstract: "Capture audio (ALSA device, tone or file), encode it (PCM or Opus) and stream it to capture-recv.",
        discussion: """
            Exits 0 only after the receiver (and every --also backup) has confirmed that the whole stream is \
            in its file (and the --record copy holds it all); exits 4 when the main receiver has it all but a backup does not (given up: without progress for --also-give-up, or so far \
            behind that keeping its audio would have cost the main receiver; or refused). The first \
            SIGINT (Ctrl-C) or SIGTERM stops capture and delivers what was captured, for at most \
            --stop-timeout seconds; a second SIGINT or SIGTERM, or that timeout, stops delivering at once: \
            the audio the receiver has not acknowledged stays in the spool, one line says where and how \
            much, and capture-send exits 3. Other failures exit 1. Lost connections are re-established \
            and the stream resumed; audio earlier runs left in the spool for this same receiver is \
            delivered too. The streams in the spool: capture-send spool list | deliver | discard (see \
            capture-send spool --help). See docs/DURABILITY.md.
            """,
        version: ProgramVersion.line(for: "capture-send")
    )

    @Argument(
        help: ArgumentHelp("The receiver, as HOST:PORT (capture-recv listens on port 7373 by default).", valueName: "HOST:PORT"),
        transform: HostAndPort.remoteAddress)
    var receiver: HostAndPort?

    // MARK: Source

    @Option(name: .long, help: "Audio source: alsa (a capture device), tone (a sine) or file.")
    var source: SourceKind = .alsa

    @Option(name: .long, help: ArgumentHelp("The audio file for --source file (WAV, AIFF, FLAC, CAF...), streamed in its own format.", valueName: "PATH"))
    var file: String?

    @Option(name: .long, help: ArgumentHelp("The ALSA capture device for --source alsa (see --list-devices).", valueName: "NAME"))
    var device = "default"

    @Flag(name: .long, help: "List ALSA capture devices and exit.")
    var listDevices = false

    @Flag(name: .long, help: "With --source alsa, fail if the device cannot give exactly --rate, --channels and --format (otherwise its nearest format is used and logged).")
    var strictFormat = false

    @Flag(name: .long, help: "With --source alsa, when the device is lost (unplugged, suspended), retry it with backoff (0.25 s doubling to 2 s) and continue the same stream, recording the outage as a gap; otherwise the stream ends with what was captured.")
    var reopen = false

    @Option(name: .long, help: SendRanges.rate.help("Sample rate (tone and alsa; a file has its own).", default: "48000"), transform: SendRanges.rate.integer)
    var rate = 48_000

    @Option(name: .long, help: SendRanges.channels.help("Channels (tone and alsa).", default: "2"), transform: SendRanges.channels.integer)
    var channels = 2

    @Option(name: .long, help: "Sample format: s16, s24, s32 or f32 (tone and alsa).")
    var format: PCMSampleFormat = .s16

    @Option(
        name: .long,
        help: SendRanges.duration.help("Stop after this many seconds.", valueName: "SECONDS", default: "a file's whole length; otherwise until interrupted"),
        transform: SendRanges.duration.real)
    var duration: Double?

    @Option(name: .long, help: SendRanges.toneFrequency.help("Tone frequency, below half the sample rate.", default: "440"), transform: SendRanges.toneFrequency.real)
    var toneFrequency = 440.0

    @Option(
        name: .long, help: SendRanges.toneLevel.help("Tone peak level (write a negative value as --tone-level=-6).", default: "-12"),
        transform: SendRanges.toneLevel.real)
    var toneLevel = -12.0

    @Flag(name: .long, help: "Deliver tone and file audio as fast as possible instead of in real time (tests, benchmarks).")
    var noPace = false

    @Option(name: .long, help: SendRanges.buffers.help("Capture buffers in the queue (kNumberBuffers).", default: "3"), transform: SendRanges.buffers.integer)
    var buffers = 3

    @Option(
        name: .long,
        help: SendRanges.bufferSeconds.help("Seconds of audio per capture buffer; the byte size is derived as DeriveBufferSize does (capped at 320 KiB).", default: "0.5"),
        transform: SendRanges.bufferSeconds.real)
    var bufferSeconds = 0.5

    // MARK: Encoding

    @Option(name: .long, help: "Codec: pcm (lossless) or opus.")
    var codec: CodecKind = .pcm

    @Option(name: .long, help: SendRanges.bitrate.help("Opus bit rate in bits per second; 128k is accepted too.", default: "128000"), transform: SendRanges.bitrate.checked)
    var bitrate = "128000"

    @Option(name: .long, help: SendRanges.frameMs.help("Opus frame duration in milliseconds.", default: "20"), transform: SendRanges.frameMs.checked)
    var frameMs = "20"

    @Option(name: .long, help: SendRanges.complexity.help("Opus complexity, 0 the fastest, 10 the best.", default: "10"), transform: SendRanges.complexity.integer)
    var complexity = 10

    @Flag(exclusivity: .chooseLast, help: "Opus bit rate mode: --vbr (variable), --cvbr (constrained variable) or --cbr (constant); the last one given wins.")
    var bitrateMode: OpusBitrateModeFlag = .vbr

    @Option(name: .long, help: "Opus application: audio, voip or lowdelay.")
    var application: OpusApplication = .audio

    // MARK: Stream

    @Option(name: .long, help: "Stream name, used in the receiver's file name (default: this host's name).")
    var streamName: String?

    @Option(
        name: .long,
        help: SendRanges.stopTimeout.help(
            "After the first SIGINT or SIGTERM, seconds that delivering what was captured may take before capture-send stops delivering, keeps the rest in the spool and exits 3 (0: no limit). A second SIGINT or SIGTERM stops delivering at once.",
            valueName: "SECONDS", default: "10"),
        transform: SendRanges.stopTimeout.real)
    var stopTimeout = 10.0

    @Flag(name: [.customShort("i"), .long], help: "Keys on the terminal, as arecord -i: space pauses and resumes capture (the pause is recorded as a gap), m drops a marker (type an optional label, then Enter; Esc cancels), q stops as the first Ctrl-C. Standard input must be a terminal. SIGUSR1 drops a marker without a label, with or without this flag.")
    var interactive = false

    @OptionGroup var logging: LogOptions<SendLogLevel>

    @OptionGroup(title: "TLS and authentication (docs/SECURITY.md)")
    var security: SenderSecurityOptions

    @OptionGroup(title: "Status line")
    var statusOptions: StatusOptions

    @OptionGroup(title: "Delivery")
    var delivery: DeliveryOptions

    @OptionGroup(title: "Backup receivers")
    var backups: BackupOptions

    @OptionGroup(title: "Safety copy on this machine")
    var recording: RecordOptions

    @OptionGroup(title: "Configuration")
    var configFile: ConfigFileOption<SendConfigFile>

    func validate() throws {
        if listDevices { return }
        guard receiver != nil else {
            throw ValidationError("name the receiver as HOST:PORT, for example capture-send 127.0.0.1:7373")
        }
        if interactive, !InteractiveTerminal.standardInputIsATerminal {
            throw ValidationError("--interactive (-i) needs a terminal on standard input, as arecord -i does: run capture-send in a terminal, or without -i drop markers with SIGUSR1 (kill -USR1 PID)")
        }
        if source == .file, file == nil { throw ValidationError("--source file needs --file PATH") }
        if source != .file, file != nil { throw ValidationError("--file goes with --source file") }
        // Each number is within its range (SendRanges) once parsed; what is left is how they go together.
        if source == .tone, toneFrequency >= Double(rate) / 2 {
            throw ValidationError("--tone-frequency \(NumericOption.number(toneFrequency)) Hz is not below half the sample rate (--rate \(rate)): use a lower frequency or a higher rate")
        }
    }

    func run() throws {
        try logging.reportingErrors(label: "capture-send") { try send() }
    }

    /// capture-send logs at notice unless told otherwise.
    enum SendLogLevel: DefaultLogLevel {
        static var level: Logger.Level { .notice }
    }

    /// Captures, sends and reports; throws `CLIError` for the one line a failed run ends with, or
    /// `ExitCode` when that line was already written.
    private func send() throws {
        if listDevices || source == .alsa { ALSALibraryOutput.silenceDiagnostics() }
        if listDevices {
            let devices = ALSADeviceList.captureDevices()
            if devices.isEmpty {
                print("no ALSA capture devices found; use --source tone or --source file")
            }
            for device in devices {
                print(device.name)
                for line in device.description.split(separator: "\n") { print("    \(line)") }
            }
            return
        }
        guard let receiver else { throw CLIError("name the receiver as HOST:PORT") }
        // Log lines and the status line share standard error through one console (docs/DESIGN.md).
        let console = StatusConsole.standardError()
        let logger = LoggingSetup.bootstrap(label: "capture-send", format: logging.logFormat, level: logging.logLevel, output: console.writeLine)
        let (audioSource, cancelReopening) = try makeSource(logger: logger)
        var configuration = CaptureStreamer.Configuration(
            streamName: streamName ?? ProcessInfo.processInfo.hostName,
            receiver: CaptureStreamer.Receiver(
                host: receiver.host, port: receiver.port, tls: try security.tlsConfiguration(),
                authToken: try security.authToken(logger: logger), identity: try security.destination(for: receiver)))
        configuration.settingNames = CommandLineSettingNames()
        configuration.backups = try backups.receivers(main: security, logger: logger)
        configuration.backupGiveUpAfter = backups.giveUpAfter
        configuration.localCopy = try recording.settings()
        configuration.queue = .init(bufferCount: buffers, bufferDuration: .seconds(bufferSeconds))
        configuration.application = "capture-send \(ProgramVersion.version)"
        configuration.progressInterval = nil  // the status line reads `status` itself
        delivery.apply(to: &configuration)
        // One encoder per distinct encoding; receivers of the same encoding share its stream.
        let main = try mainEncoding()
        let specs = [main] + (try backups.encodings(main: main))
        // A background destination has an encoder of its own: a live stream never waits for it.
        let pacing = [(CaptureStreamer.Priority.foreground, Int?.none)] + (try backups.pacing())
        var encoders: [(spec: EncodingSpec, priority: CaptureStreamer.Priority, encoder: any AudioEncoder)] = []
        var destinations: [CaptureStreamer.Destination] = []
        for ((receiver, spec), (priority, maxRate)) in zip(zip([configuration.receiver] + configuration.backups, specs), pacing) {
            if let existing = encoders.first(where: { $0.spec == spec && $0.priority == priority }) {
                destinations.append(.init(receiver: receiver, encoder: existing.encoder, priority: priority, maxBitsPerSecond: maxRate))
                continue
            }
            let encoder: any AudioEncoder
            do throws(EncoderError) { encoder = try spec.makeEncoder(for: audioSource.format) } catch { throw CLIError(error.description) }
            encoders.append((spec, priority, encoder))
            destinations.append(.init(receiver: receiver, encoder: encoder, priority: priority, maxBitsPerSecond: maxRate))
        }
        let streamer: CaptureStreamer
        do throws(CaptureStreamerError) {
            streamer = try CaptureStreamer(source: audioSource, destinations: destinations, configuration: configuration, logger: logger)
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
        // SIGUSR1 drops a marker; trapped before capture starts, so that it never ends the process.
        let markers = SignalDelivery(signals: [.sigusr1]) { _ in
            InteractiveTerminal.dropMarker(streamer: streamer, label: "", logger: logger)
        }
        defer { markers.cancel() }
        let stop = StopController(
            stopTimeout: .seconds(stopTimeout), logger: logger,
            stopCapture: {
                cancelReopening?()
                streamer.stop(immediate: false)
                // The first stop waits for the live (foreground) destinations only.
                streamer.deferBackground()
            },
            abandonDelivery: { streamer.stopDelivering() },
            leftoverLine: { reason in
                Self.leftoverLine(reason: reason, log: streamer.log, outputRate: streamer.outputFormat.sampleRate, receiver: receiver.description)
                    + Self.backgroundLeftover(streamer)
            },
            writeFinalLine: { [logFormat = logging.logFormat] line in
                // Through the console: the watchdog may write it while the status line is drawn.
                console.writeFinalLine(FinalLine.render(line, format: logFormat, label: "capture-send", time: Date()))
            }
        )
        stop.start()
        do throws(CaptureStreamerError) {
            try streamer.start()
        } catch {
            streamer.dispose()
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
        logger.info("capturing", metadata: ["format": "\(audioSource.format)", "sending": "\(streamer.outputFormat)"])
        var terminal: InteractiveTerminal?
        if interactive {
            let keys = InteractiveTerminal(streamer: streamer, console: console, logger: logger) { stop.interrupt() }
            stop.beforeExit { keys.restore() }
            do throws(CLIError) {
                try keys.start()
            } catch {
                stop.interrupt()
                throw error
            }
            terminal = keys
        }
        defer { terminal?.restore() }
        let figures = StatusFigures(streamer: streamer)
        let status = statusOptions.makeReporter(console: console, logFormat: logging.logFormat) { figures.snapshot() }
        status.start()
        let outcome = streamer.waitUntilFinished()
        if case .success = outcome.main.result { stop.delivered() } else { stop.finished() }
        status.stop()
        streamer.dispose()
        if stop.abandoned != nil {
            // Delivery was stopped on request: say once what stays where, and exit 3 at once
            // (earlier streams' deliveries were stopped too and keep their spools).
            stop.reportLeftover()
            throw ExitCode(Self.abandonedExitCode)
        }
        try report(outcome, streamer: streamer, logger: logger, receiver: receiver)
    }

    /// Exit status 4: the main receiver has the whole stream, a backup receiver or the local copy does not.
    static let incompleteBackupExitCode: Int32 = 4

    /// Says how each receiver's delivery went, and throws what the run ends with: `CLIError` (exit 1)
    /// when the main receiver lacks audio or capture failed, `ExitCode(4)` after one line naming the
    /// backups that lack audio.
    private func report(_ outcome: CaptureStreamer.Outcome, streamer: CaptureStreamer, logger: Logger, receiver: HostAndPort) throws {
        let outputRate = streamer.outputFormat.sampleRate
        for link in outcome.links.dropFirst() {
            switch link.result {
            case .success(let summary):
                logger.notice("stream delivered to backup receiver", metadata: [
                    "receiver": "\(link.receiver)", "file": "\(summary.fileName)", "frames": "\(summary.totalFrames)",
                ])
            case .failure where link.leftInSpool?.deferred == true:
                logger.notice("background delivery left in the spool for later, as the stop asked", metadata: [
                    "receiver": "\(link.receiver)", "encoding": "\(link.encoding)", "seconds": "\(String(format: "%.1f", link.leftInSpool?.seconds ?? 0))",
                ])
            case .failure(let error):
                logger.error("backup receiver does not have the whole stream", metadata: ["receiver": "\(link.receiver)", "error": "\(error.message(naming: CommandLineSettingNames()))"])
            }
        }
        switch outcome.main.result {
        case .success(let summary):
            if case .failure(let error) = outcome.capture {
                throw CLIError(error.description)
            }
            let seconds = Double(summary.totalFrames) / outputRate
            if summary.nothingCaptured {
                logger.notice("capture ended before any audio was captured; no stream was sent and the receiver has no file")
            } else {
                logger.notice("stream delivered", metadata: [
                    "receiver": "\(outcome.main.receiver)", "file": "\(summary.fileName)", "frames": "\(summary.totalFrames)",
                    "seconds": "\(String(format: "%.3f", seconds))",
                ])
            }
            if !outcome.earlierStreamFailures.isEmpty || !outcome.earlierStreamLosses.isEmpty {
                var parts: [String] = []
                if !outcome.earlierStreamFailures.isEmpty {
                    parts.append("\(outcome.earlierStreamFailures.count) earlier stream(s) could not be delivered and stay in the spool: \(outcome.earlierStreamFailures.joined(separator: "; "))")
                }
                if !outcome.earlierStreamLosses.isEmpty {
                    parts.append("\(outcome.earlierStreamLosses.count) earlier stream(s) lost audio to spool damage: \(outcome.earlierStreamLosses.joined(separator: "; "))")
                }
                throw CLIError(parts.joined(separator: "; "))
            }
            if let copy = outcome.localCopy, copy.isComplete {
                logger.notice("local copy written", metadata: [
                    "files": "\(copy.files.joined(separator: ","))", "seconds": "\(String(format: "%.3f", copy.seconds))",
                ])
            }
            let deferredLine = Self.deferredLine(outcome.deferredBackground)
            let incomplete = outcome.incompleteBackups
            let copyLine = outcome.localCopy.flatMap { copy -> String? in
                guard let reason = copy.stoppedBecause else { return nil }
                return "the local copy stopped after \(String(format: "%.1f", copy.seconds)) s (\(copy.files.joined(separator: ", "))): \(reason)"
            }
            if !incomplete.isEmpty || copyLine != nil {
                let lines = incomplete.map { link -> String in
                    // With several encodings, each line names the encoding the receiver lacks.
                    let encoding = link.encoding == outcome.main.encoding ? "" : " (\(link.encoding))"
                    if case .failure(let error) = link.result, case .gaveUp = error { return error.message(naming: CommandLineSettingNames()) + encoding }
                    if case .failure(let error) = link.result { return "backup receiver \(link.receiver)\(encoding) does not have the whole stream: \(error.message(naming: CommandLineSettingNames()))" }
                    return "backup receiver \(link.receiver)\(encoding) does not have the whole stream"
                } + (copyLine.map { [$0] } ?? [])
                FinalLine.write(
                    "the main receiver \(outcome.main.receiver) has the whole stream; \((lines + (deferredLine.map { [$0] } ?? [])).joined(separator: "; "))",
                    format: logging.logFormat, label: "capture-send")
                throw ExitCode(Self.incompleteBackupExitCode)
            }
            if let deferredLine {
                // Left for later as asked: the run did its job (exit 0); its last line says what
                // waits where (a warning, not an error line: nothing is lost).
                logger.warning("the main receiver \(outcome.main.receiver) has the whole stream; \(deferredLine)")
            }
        case .failure(let error):
            // Lost at the receiver: the rest was delivered and the spool holds nothing more.
            let message = error.message(naming: CommandLineSettingNames())
            if case .receiverLostAcknowledgedAudio = error { throw CLIError(message) }
            streamer.log.spool?.recordDeliveryError(message)
            let kept = streamer.log.spool.flatMap { $0.exists ? "; the audio the receiver has not acknowledged stays in \($0.directory) and is delivered the next time capture-send sends to \(receiver) with this spool, or by capture-send spool deliver" : nil } ?? ""
            throw CLIError(message + kept)
        }
    }

    /// The one line a run that stopped delivering early ends with: why, how much audio the receiver
    /// has not acknowledged, and where it is (or that it is lost, with --no-spool).
    static func leftoverLine(reason: SenderStopSequence.AbandonReason, log: PacketLog, outputRate: Double, receiver: String) -> String {
        // The spool is kept for the main receiver: its own figures say what stays.
        let reason = reason.message(naming: CommandLineSettingNames())
        let progress = log.progress(for: .main)
        let backups = log.destinationCount > 1
            ? "; backup receivers are not served from the spool, and what they lack is not kept" : ""
        if log.lastSequence > 0, log.isComplete(for: .main) {
            return "delivery stopped by \(reason): \(receiver) has the whole stream, so nothing stays in the spool\(backups)"
        }
        let seconds = Double(max(0, progress.appendedEndSampleTime - progress.acknowledgedEndSampleTime)) / outputRate
        let amount = "\(String(format: "%.1f", seconds)) s of audio (\(progress.unacknowledgedBytes) bytes) not acknowledged by the receiver"
        guard let spool = log.spool else {
            return "delivery stopped by \(reason): \(amount) is lost, because --no-spool keeps it in memory only\(backups)"
        }
        guard spool.exists else {
            return "delivery stopped by \(reason): no captured audio was waiting for the receiver, so nothing stays in the spool\(backups)"
        }
        return "delivery stopped by \(reason): \(amount) stays in the spool at \(spool.directory); the next capture-send run for \(receiver) with this spool delivers it, or capture-send spool deliver\(backups)"
    }

    /// What the background deliveries left in their spools at a stop, one clause each: "background
    /// pcm-s16-48000 to HOST:PORT: 12.3 s of audio (N bytes) stays in the spool at DIR ...".
    static func deferredLine(_ links: [CaptureStreamer.LinkOutcome]) -> String? {
        guard !links.isEmpty else { return nil }
        return links.compactMap { link -> String? in
            guard let left = link.leftInSpool else { return nil }
            return "background \(link.encoding) to \(link.receiver): \(String(format: "%.1f", left.seconds)) s of audio (\(left.bytes) bytes) not yet delivered stays in the spool at \(left.spoolDirectory); capture-send spool deliver, or the next run for \(link.receiver) with this spool, delivers it"
        }.joined(separator: "; ")
    }

    /// After a stop of delivery: what each background encoding keeps in its spool ("" for none).
    static func backgroundLeftover(_ streamer: CaptureStreamer) -> String {
        streamer.backgroundLeftInSpool().map { encoded, receiver, left in
            "; background \(encoded.label) to \(receiver): \(String(format: "%.1f", left.seconds)) s of audio stays in the spool at \(left.spoolDirectory)"
        }.joined()
    }

    /// The source, and for `--reopen` a way to stop its retries (on SIGINT).
    private func makeSource(logger: Logger) throws -> (any AudioSource, (@Sendable () -> Void)?) {
        let settings: SourceSettings
        switch source {
        case .tone:
            settings = .tone(.init(
                frequency: toneFrequency, levelDBFS: toneLevel, sampleRate: Double(rate), channels: channels,
                sample: format, duration: duration.map { .seconds($0) }, paced: !noPace))
        case .file:
            guard let file else { throw CLIError("--source file needs --file PATH") }
            settings = .file(path: file, paced: !noPace, duration: duration.map { .seconds($0) })
        case .alsa:
            let requested = StreamFormat.linearPCM(sampleRate: Double(codec == .opus ? 48_000 : rate), channels: channels, sample: format)
            settings = .device(DeviceSettings(
                name: device, requested: requested, periodFrames: BufferSizing.framesPerBuffer(format: requested, duration: .seconds(bufferSeconds)),
                bufferCount: buffers, strictFormat: strictFormat, reopen: reopen, duration: duration.map { .seconds($0) }))
        }
        do throws(CaptureError) {
            let opened = try AudioSources.open(settings) { event in
                switch event {
                case .deviceOpened(let negotiation, asRequested: true):
                    logger.info("device opened", metadata: ["negotiation": "\(negotiation)"])
                case .deviceOpened(let negotiation, asRequested: false):
                    logger.warning("the device gives another format than asked; streaming what it gives", metadata: ["negotiation": "\(negotiation)"])
                case .device(.lost(let error)):
                    logger.error("capture device lost; retrying", metadata: ["reason": "\(error.message(naming: CommandLineSettingNames()))"])
                case .device(.retryFailed(let attempt, let error)):
                    logger.warning("device not back yet", metadata: ["attempt": "\(attempt)", "reason": "\(error.message(naming: CommandLineSettingNames()))"])
                case .device(.reopened(let lost)):
                    logger.notice("capture device back; the outage is recorded as a gap", metadata: ["frames": "\(lost)"])
                }
            }
            return (opened.source, opened.stopRetrying)
        } catch {
            throw CLIError(error.message(naming: CommandLineSettingNames()))
        }
    }

    /// The main receiver's encoding, from the encoding options.
    private func mainEncoding() throws(CLIError) -> EncodingSpec {
        do throws(EncoderError) {
            return EncodingSpec(
                codec: codec, bitrate: try OpusEncoderSettings.parseBitrate(bitrate), frameDuration: try OpusFrameDuration(parsing: frameMs),
                complexity: complexity, bitrateMode: bitrateMode.mode, application: application)
        } catch {
            throw CLIError(error.description)
        }
    }
}

/// The Opus bit rate mode as three exclusive flags.
enum OpusBitrateModeFlag: String, EnumerableFlag {
    case vbr, cvbr, cbr

    var mode: OpusBitrateMode {
        switch self {
        case .vbr: return .vbr
        case .cvbr: return .cvbr
        case .cbr: return .cbr
        }
    }
}
