import ArgumentParser
import CaptureCLISupport
import CaptureCodecs
import CaptureCore
import CaptureLocalCopy
import CaptureSender
import NIOCore

/// capture-send's command line as a library: what the executable runs, and what the tests and the
/// `settings` fuzz target parse in memory (Package.swift).
public enum CaptureSendProgram {
    /// Runs capture-send with the process's arguments, environment and config file, and exits:
    /// `capture-send spool …` as its own command tree, anything else as the sending command.
    /// ArgumentParser cannot put subcommands beside the root's optional `HOST:PORT` argument (it
    /// would read `spool` as the receiver and validate the root first), so the dispatch is here.
    public static func main() {
        // A log reader that goes away must not end the capture (SIGPIPE).
        StandardStreams.ignoreBrokenPipes()
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "spool" {
            CommandLineRun.main(SpoolCommand.self, Array(arguments.dropFirst()))
        } else {
            CommandLineRun.main(CaptureSend.self, ConfiguredCommandLine.argumentsOrExit(for: CaptureSend.self, settings: CaptureSend.settings, userArguments: arguments))
        }
    }

    /// The sending command, `capture-send [HOST:PORT] [options]`, whose options are also settings.
    public static var command: any ParsableCommand.Type { CaptureSend.self }

    /// `capture-send spool list|deliver|discard`, which takes no settings.
    public static var spoolCommand: any ParsableCommand.Type { SpoolCommand.self }

    /// The settings of the sending command: its options, `CAPTURE_SEND_…` variables and config keys.
    public static var settings: CommandSettings { CaptureSend.settings }

    /// Every numeric option of both command trees, with its range.
    public static var numericOptions: [NumericOption] { SendRanges.all }

    /// What a run makes of a parsed command's numbers before it does anything (no device, file or
    /// socket is opened): frames, bytes, time amounts, the encoder's settings. For the tests and the
    /// fuzz target, which check that whatever parses converts without a trap; nil for a command
    /// that converts nothing.
    public static func conversions(of parsed: any ParsableCommand) -> [String: String]? {
        switch parsed {
        case let send as CaptureSend: return send.conversions()
        case let deliver as SpoolDeliver: return ["timeout-ns": "\(Saturating.nanoseconds(seconds: deliver.timeout))"]
        default: return nil
        }
    }
}

/// capture-send's numeric options and their ranges. The options read their values through these
/// (`transform:`), their help states the ranges, README's flag tables say the same, and
/// SettingsTests runs hostile values through each.
enum SendRanges {
    static let rate = NumericOption("rate", .integer, 8_000...192_000, unit: "Hz")
    static let channels = NumericOption("channels", .integer, 1...8)
    static let duration = NumericOption("duration", .real, 0.001...31_622_400, unit: "seconds")
    static let toneFrequency = NumericOption("tone-frequency", .real, 1...96_000, unit: "Hz")
    static let toneLevel = NumericOption("tone-level", .real, -120...0, unit: "dBFS")
    static let buffers = NumericOption("buffers", .integer, 2...64)
    static let bufferSeconds = NumericOption("buffer-seconds", .real, 0.001...10, unit: "seconds")
    static let bitrate = NumericOption("bitrate", .bitrate, Double(OpusEncoderSettings.bitrateRange.lowerBound)...Double(OpusEncoderSettings.bitrateRange.upperBound))
    static let frameMs = NumericOption("frame-ms", .choices(OpusFrameDuration.allCases.map(\.milliseconds)), 2.5...60, unit: "ms")
    static let complexity = NumericOption("complexity", .integer, 0...10)
    static let stopTimeout = NumericOption("stop-timeout", .real, 0...86_400, unit: "seconds", minimumMeaning: "no limit")
    static let statusInterval = NumericOption("status-interval", .real, 0.01...86_400, unit: "seconds")
    static let spoolMax = NumericOption("spool-max", .bytes, 1_048_576...17_592_186_044_416)
    static let reconnectMin = NumericOption("reconnect-min", .real, 0.001...3_600, unit: "seconds")
    static let reconnectMax = NumericOption("reconnect-max", .real, 0.001...3_600, unit: "seconds")
    static let idleTimeout = NumericOption("idle-timeout", .real, 1...3_600, unit: "seconds")
    /// Checked by BackupOptions with DurationText (1 second to 7 days).
    static let alsoGiveUp = NumericOption("also-give-up", .duration, 1...604_800)
    /// Checked by RecordOptions with DurationText: the lengths the safety copy allows
    /// (`LocalCopySegments.allowedLengths`, 1 second to 24 hours).
    static let recordSegment = NumericOption(
        "record-segment", .duration,
        Double(LocalCopySegments.allowedLengths.lowerBound.components.seconds)...Double(LocalCopySegments.allowedLengths.upperBound.components.seconds))
    /// `--also HOST:PORT,max-rate=BITS`: a setting inside `--also`'s value, not an option of its
    /// own (so not in `all`), checked by `BackupReceiverSpec`.
    static let alsoMaxRate = NumericOption("max-rate", .bitrate, 8_000...10_000_000_000)
    /// `capture-send spool deliver --timeout`.
    static let timeout = NumericOption("timeout", .real, 0.001...604_800, unit: "seconds")

    static let all = [
        rate, channels, duration, toneFrequency, toneLevel, buffers, bufferSeconds, bitrate, frameMs, complexity, stopTimeout,
        statusInterval, spoolMax, reconnectMin, reconnectMax, idleTimeout, alsoGiveUp, recordSegment, timeout,
    ]
}

extension CaptureSend {
    /// The numbers a run derives from the options, as `CaptureSendProgram.conversions(of:)` shows them.
    func conversions() -> [String: String] {
        // What `delivery.apply(to:)` puts into the streamer's configuration.
        var numbers = [
            "spool-capacity": "\(delivery.capacityBytes)",
            "idle-timeout-ns": "\(TimeAmount(delivery.idleTimeoutAmount).nanoseconds)",
            "heartbeat-ns": "\(TimeAmount(delivery.heartbeatInterval).nanoseconds)",
            "reconnect": "\(delivery.reconnectPolicy.initial.inSeconds)...\(delivery.reconnectPolicy.maximum.inSeconds)",
            "status-interval": "\(statusOptions.interval)",
            "give-up-s": "\(backups.giveUpAfter.inSeconds)",
            "buffer-frames": "\(BufferSizing.framesPerBuffer(format: .linearPCM(sampleRate: Double(rate), channels: channels, sample: format), duration: .seconds(bufferSeconds)))",
        ]
        if let duration { numbers["duration-frames"] = "\(Self.frames(seconds: duration, rate: Double(rate)))" }
        numbers["opus"] = (try? OpusEncoderSettings.parseBitrate(bitrate)).map { bitrate in
            "\(bitrate) b/s, \((try? OpusFrameDuration(parsing: frameMs))?.description ?? "no frame duration")"
        } ?? "no bit rate"
        return numbers
    }

    /// The frames `seconds` of audio at `rate` hold (for --duration).
    static func frames(seconds: Double, rate: Double) -> Int64 {
        Saturating.frames(seconds: seconds, rate: rate)
    }
}
