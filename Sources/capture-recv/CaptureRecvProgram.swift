import ArgumentParser
import CaptureCLISupport
import CaptureCore
import CaptureReceiver
import NIOCore

/// capture-recv's command line as a library: what the executable runs, and what the tests and the
/// `settings` fuzz target parse in memory (Package.swift).
public enum CaptureRecvProgram {
    /// Runs capture-recv with the process's arguments, environment and config file.
    /// `capture-recv --help` shows what a user runs most, receiving: every option of the default
    /// subcommand `serve`, then the other subcommands (ArgumentParser's own root help would list
    /// only the subcommands' names). Settings from `CAPTURE_RECV_…` variables and the config file
    /// become arguments before the user's own (docs/DESIGN.md, "Configuration").
    public static func main() async {
        // A log reader that goes away must not end the recording (SIGPIPE).
        StandardStreams.ignoreBrokenPipes()
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.count == 1, ["--help", "-h", "help"].contains(arguments[0]) {
            print(CaptureRecv.rootHelp())
            return
        }
        await CommandLineRun.asyncMain(CaptureRecv.self, ConfiguredCommandLine.argumentsOrExit(for: CaptureRecv.self, settings: CaptureRecv.settings, userArguments: arguments))
    }

    /// The root command: `serve` (the default), `recover`, `export`, `gen-cert`.
    public static var command: any ParsableCommand.Type { CaptureRecv.self }

    /// The settings of `serve`: its options, `CAPTURE_RECV_…` variables and config keys.
    public static var settings: CommandSettings { CaptureRecv.settings }

    /// Every numeric option of every subcommand, with its range.
    public static var numericOptions: [NumericOption] { ReceiveRanges.all }

    /// What a run makes of a parsed command's numbers before it does anything (nothing is opened
    /// or bound): the receiver's limits and time amounts. For the tests and the fuzz target, which
    /// check that whatever parses converts without a trap; nil for a command that converts nothing.
    public static func conversions(of parsed: any ParsableCommand) -> [String: String]? {
        switch parsed {
        case let serve as Serve:
            var configuration = ReceiverConfiguration(outputDirectory: serve.out)
            // A machine whose open-file limit allows every --max-streams, and whose memory 64 streams.
            let capacity = StreamCapacity(openFileLimit: Int.max, openFileLimitBefore: Int.max, physicalMemory: 64 << 20)
            serve.applyLimits(to: &configuration, capacity: capacity)
            return [
                "max-streams": "\(configuration.maximumStreams)",
                "max-frame-bytes": "\(configuration.maximumFrameBytes)",
                "sync-interval": "\(configuration.syncPolicy.interval)",
                "handshake-ns": "\(TimeAmount(configuration.handshakeTimeout).nanoseconds)",
                "idle-ns": "\(TimeAmount(configuration.idleTimeout).nanoseconds)",
                "heartbeat-ns": "\(TimeAmount(configuration.heartbeatInterval).nanoseconds)",
                "auth": "\(configuration.authFailureLimit) in 60 s, \(configuration.authBlockDuration.inSeconds) s",
                "resume-window-s": configuration.resumeWindow.secondsText,
                "max-waiting-streams": "\(configuration.maximumWaitingStreams)",
                "segment-s": serve.recordings.segment.flatMap { try? RecordingOptions.parseDuration($0) }.map { "\($0)" } ?? "none",
            ]
        case let genCert as GenCert:
            return ["valid-s": "\(Double(genCert.days) * 86_400)"]
        default:
            return nil
        }
    }
}

/// capture-recv's numeric options and their ranges. The options read their values through these
/// (`transform:`), their help states the ranges, README's flag tables say the same, and
/// SettingsTests runs hostile values through each.
enum ReceiveRanges {
    static let maxStreams = NumericOption("max-streams", .integer, 1...1_000_000)
    static let maxFrameBytes = NumericOption("max-frame-bytes", .integer, 65_536...16_777_216, unit: "bytes")
    static let syncMs = NumericOption("sync-ms", .integer, 1...10_000, unit: "ms")
    static let handshakeTimeout = NumericOption("handshake-timeout", .integer, 1...3_600, unit: "seconds")
    static let idleTimeout = NumericOption("idle-timeout", .integer, 2...3_600, unit: "seconds")
    static let authFailureLimit = NumericOption("auth-failure-limit", .integer, 0...1_000_000, minimumMeaning: "no limit")
    static let authBlockSeconds = NumericOption("auth-block-seconds", .real, 0.001...86_400, unit: "seconds")
    static let resumeWindow = NumericOption("resume-window", .real, 0...2_592_000, unit: "seconds", minimumMeaning: "finalize at once")
    static let maxWaitingStreams = NumericOption("max-waiting-streams", .integer, 0...1_000_000)
    static let checkpointSeconds = NumericOption("checkpoint-s", .integer, 1...3_600, unit: "seconds")
    /// Checked by RecordingOptions with DurationText (1 second to 24 hours).
    static let segment = NumericOption("segment", .duration, 1...86_400)
    /// Checked by RecordingOptions with DurationText (1 second to 24 hours).
    static let onFinalizeTimeout = NumericOption("on-finalize-timeout", .duration, 1...86_400)
    /// Checked by AlarmOptions with DurationText (1 second to 1 hour).
    static let onAlarmTimeout = NumericOption("on-alarm-timeout", .duration, 1...3_600)
    static let alarmSilenceDBFS = NumericOption("alarm-silence-dbfs", .real, -120...0, unit: "dBFS")
    static let alarmSilenceSeconds = NumericOption("alarm-silence-s", .real, 0.5...86_400, unit: "seconds")
    static let alarmClippedBuffers = NumericOption("alarm-clipped-buffers", .integer, 0...1_000_000, minimumMeaning: "any clipped buffer")
    static let alarmClippingWindow = NumericOption("alarm-clipping-window-s", .real, 0.5...86_400, unit: "seconds")
    static let alarmLoudnessMin = NumericOption("alarm-loudness-min", .real, -120...20, unit: "LUFS")
    static let alarmLoudnessMax = NumericOption("alarm-loudness-max", .real, -120...20, unit: "LUFS")
    static let alarmLoudnessSeconds = NumericOption("alarm-loudness-s", .real, 0.5...86_400, unit: "seconds")
    static let alarmLinkDownSeconds = NumericOption("alarm-link-down-s", .real, 0.5...2_592_000, unit: "seconds")
    static let alarmNoAudioSeconds = NumericOption("alarm-no-audio-s", .real, 0.5...86_400, unit: "seconds")
    /// `capture-recv gen-cert --days`.
    static let days = NumericOption("days", .integer, 1...3_650, unit: "days")

    static let all = [
        maxStreams, maxFrameBytes, syncMs, handshakeTimeout, idleTimeout, authFailureLimit, authBlockSeconds, resumeWindow,
        maxWaitingStreams, checkpointSeconds, segment, onFinalizeTimeout, days,
        alarmSilenceDBFS, alarmSilenceSeconds, alarmClippedBuffers, alarmClippingWindow, alarmLoudnessMin, alarmLoudnessMax, alarmLoudnessSeconds,
        alarmLinkDownSeconds, alarmNoAudioSeconds, onAlarmTimeout,
    ]
}
