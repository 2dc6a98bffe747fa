import ArgumentParser
import CaptureCLISupport
import CaptureReceiver
import Logging

/// capture-recv's alarm conditions: when a stream's silence, clipping, loudness, link-down and
/// no-audio alarms are raised (docs/HTTP-API.md, "Alarms"). Each condition must hold for its
/// duration; an alarm clears once its condition has been over for 2 s (level alarms: 3 dB inside
/// the threshold), so a level at the threshold does not flap.
struct AlarmOptions: ParsableArguments {
    @Flag(name: .long, help: "Raise no alarms (they cost the receiver a few comparisons per AudioData). (default: alarms on)")
    var noAlarms = false

    @Option(
        name: .long,
        help: ReceiveRanges.alarmSilenceDBFS.help("Silence: every channel's peak below this level...", valueName: "DBFS", default: "-60"),
        transform: ReceiveRanges.alarmSilenceDBFS.real)
    var alarmSilenceDbfs = -60.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmSilenceSeconds.help("...for this long raises the silence alarm.", valueName: "SECONDS", default: "10"),
        transform: ReceiveRanges.alarmSilenceSeconds.real)
    var alarmSilenceS = 10.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmClippedBuffers.help(
            "Clipping: more than this many AudioData with a sample at full scale...", valueName: "N", default: "3"),
        transform: ReceiveRanges.alarmClippedBuffers.integer)
    var alarmClippedBuffers = 3

    @Option(
        name: .long,
        help: ReceiveRanges.alarmClippingWindow.help(
            "...within this many seconds raises the clipping alarm; it clears when the window holds none.", valueName: "SECONDS", default: "10"),
        transform: ReceiveRanges.alarmClippingWindow.real)
    var alarmClippingWindowS = 10.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmLoudnessMin.help(
            "Loudness: the short-term loudness (EBU R128, 3 s, as the sender measures it) below this...", valueName: "LUFS", default: "-40"),
        transform: ReceiveRanges.alarmLoudnessMin.real)
    var alarmLoudnessMin = -40.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmLoudnessMax.help("...or above this...", valueName: "LUFS", default: "-5"),
        transform: ReceiveRanges.alarmLoudnessMax.real)
    var alarmLoudnessMax = -5.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmLoudnessSeconds.help("...for this long raises the loudness alarm.", valueName: "SECONDS", default: "10"),
        transform: ReceiveRanges.alarmLoudnessSeconds.real)
    var alarmLoudnessS = 10.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmLinkDownSeconds.help(
            "Link down: a stream's sender reconnecting for longer than this raises the link-down alarm.", valueName: "SECONDS", default: "30"),
        transform: ReceiveRanges.alarmLinkDownSeconds.real)
    var alarmLinkDownS = 30.0

    @Option(
        name: .long,
        help: ReceiveRanges.alarmNoAudioSeconds.help(
            "No audio: a connected stream that receives nothing for this long raises the no-audio alarm.", valueName: "SECONDS", default: "10"),
        transform: ReceiveRanges.alarmNoAudioSeconds.real)
    var alarmNoAudioS = 10.0

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Other conditions for the streams whose names match a shell pattern (*, ?, [...]): PATTERN:CHANGE[,CHANGE...], each CHANGE `off`, `on` (alarms even under --no-alarms) or KEY=VALUE with KEY an --alarm-* option without `alarm-` (silence-dbfs, silence-s, clipped-buffers, clipping-window-s, loudness-min, loudness-max, loudness-s, link-down-s, no-audio-s), in the same ranges; for example `studio-*:silence-s=60` or `test-*:off`. Repeat it for more; every matching one applies, in order (in the config file: an array of such strings). (default: none)",
            valueName: "PATTERN:CHANGES"))
    var alarmOverride: [String] = []

    @Option(name: .long, help: ArgumentHelp(
        "Run this shell command once for each alarm raised and once for each alarm cleared: `sh -c CMD capture-recv-alarm CHANGE KIND STREAM` ($1 raised or cleared, $2 silence, clipping, loudness, link-down or no-audio, $3 the stream's name), in the output folder, with CAPTURE_ALARM_ID (unique per raise or clear), CAPTURE_ALARM_CHANGE, CAPTURE_ALARM_KIND, CAPTURE_ALARM_SINCE (ISO 8601, UTC), CAPTURE_ALARM_DETAIL, CAPTURE_ALARMS_RAISED, CAPTURE_STREAM_NAME, CAPTURE_STREAM_ID in its environment, its output logged when it fails. One at a time, in the order the alarms happened; at least once (journaled in OUT/.alarm-hook), retried with backoff until it exits 0; a raise is told once, also across a restart (a stream that resumes gets its raised alarms back, and they clear as usual). Example: 'curl -fsS -d \"$3: $2 $1\" https://ntfy.sh/desk'. (default: none)",
        valueName: "CMD"))
    var onAlarm: String?

    @Option(name: .long, help: ArgumentHelp(
        "How long one run of --on-alarm may take, 1 second to 1 hour (e.g. 30s, 5m): past it the command's process group gets SIGTERM (SIGKILL 5 s later), and the attempt is logged as timed out and retried with the backoff. (default: 1m)",
        valueName: "DURATION"))
    var onAlarmTimeout: String?

    func validate() throws {
        if let onAlarm, onAlarm.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--on-alarm is empty; give the command to run for each alarm raised or cleared, e.g. 'logger -t desk \"$3: $2 $1\"'")
        }
        if let onAlarmTimeout { _ = try Self.parseTimeout(onAlarmTimeout) }
        _ = try overrides()
        guard alarmLoudnessMin <= alarmLoudnessMax else {
            throw ValidationError("--alarm-loudness-min (\(alarmLoudnessMin) LUFS) must not be above --alarm-loudness-max (\(alarmLoudnessMax) LUFS)")
        }
    }

    /// The `--alarm-override` values, parsed; throws one line naming the value and what is wrong.
    func overrides() throws(ValidationError) -> [StreamAlarmOverride] {
        try alarmOverride.map { text throws(ValidationError) in try Self.parseOverride(text) }
    }

    /// `PATTERN:CHANGE[,CHANGE...]` as a `StreamAlarmOverride`; each value within its option's range.
    static func parseOverride(_ text: String) throws(ValidationError) -> StreamAlarmOverride {
        let problem = { (what: String) in ValidationError("--alarm-override \(text): \(what); write PATTERN:CHANGE[,CHANGE...], such as studio-*:silence-s=60 or test-*:off") }
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex else { throw problem("no PATTERN: before the changes") }
        let pattern = String(text[..<colon])
        let list = text[text.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !list.isEmpty, !list.contains(where: \.isEmpty) else { throw problem("no change after the pattern") }
        var changes: [StreamAlarmOverride.Change] = []
        for change in list {
            if change == "off" { changes.append(.off); continue }
            if change == "on" { changes.append(.on); continue }
            let parts = change.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw problem("\(change) is not off, on or KEY=VALUE") }
            let (key, value) = (parts[0], parts[1])
            let setting: StreamAlarmOverride.Setting
            do throws(ValidationError) {
                switch key {
                case "silence-dbfs": setting = .silenceDBFS(try ReceiveRanges.alarmSilenceDBFS.real(value))
                case "silence-s": setting = .silenceDuration(.seconds(try ReceiveRanges.alarmSilenceSeconds.real(value)))
                case "clipped-buffers": setting = .clippedBuffers(try ReceiveRanges.alarmClippedBuffers.integer(value))
                case "clipping-window-s": setting = .clippingWindow(.seconds(try ReceiveRanges.alarmClippingWindow.real(value)))
                case "loudness-min": setting = .loudnessMinimumLUFS(try ReceiveRanges.alarmLoudnessMin.real(value))
                case "loudness-max": setting = .loudnessMaximumLUFS(try ReceiveRanges.alarmLoudnessMax.real(value))
                case "loudness-s": setting = .loudnessDuration(.seconds(try ReceiveRanges.alarmLoudnessSeconds.real(value)))
                case "link-down-s": setting = .linkDownDuration(.seconds(try ReceiveRanges.alarmLinkDownSeconds.real(value)))
                case "no-audio-s": setting = .noAudioDuration(.seconds(try ReceiveRanges.alarmNoAudioSeconds.real(value)))
                default:
                    throw problem("\(key) is not a condition (silence-dbfs, silence-s, clipped-buffers, clipping-window-s, loudness-min, loudness-max, loudness-s, link-down-s, no-audio-s)")
                }
            } catch {
                throw key.isEmpty || error.message.hasPrefix("--alarm-override") ? error : problem("\(key): \(error.message)")
            }
            changes.append(.set(setting))
        }
        return StreamAlarmOverride(pattern: pattern, changes: changes)
    }

    /// The conditions every stream gets unless an override changes them.
    var conditions: StreamAlarmConditions {
        var conditions = StreamAlarmConditions()
        conditions.silenceBelowDBFS = alarmSilenceDbfs
        conditions.silenceDuration = .seconds(alarmSilenceS)
        conditions.clippedBuffers = alarmClippedBuffers
        conditions.clippingWindow = .seconds(alarmClippingWindowS)
        conditions.loudnessRangeLUFS = alarmLoudnessMin...alarmLoudnessMax
        conditions.loudnessDuration = .seconds(alarmLoudnessS)
        conditions.linkDownDuration = .seconds(alarmLinkDownS)
        conditions.noAudioDuration = .seconds(alarmNoAudioS)
        return conditions
    }

    /// Applies the options to the receiver's configuration. ArgumentParser runs `validate()` before
    /// the command, so an override that does not parse never gets here.
    func apply(to configuration: inout ReceiverConfiguration) {
        configuration.alarms = StreamAlarmPolicy(conditions: conditions, enabled: !noAlarms, overrides: (try? overrides()) ?? [])
    }

    /// Sets up `--on-alarm` (once the output folder is known).
    func applyHook(to configuration: inout ReceiverConfiguration, logger: Logger) throws {
        guard let onAlarm else { return }
        let timeout = try onAlarmTimeout.map(Self.parseTimeout) ?? Self.defaultTimeout
        configuration.alarmHook = AlarmHook(
            outputDirectory: configuration.outputDirectory, settings: .init(command: onAlarm, timeout: .seconds(timeout)), logger: logger,
            settingNames: CommandLineSettingNames())
    }

    /// `--on-alarm-timeout`'s seconds: at least 1 s, at most an hour.
    static func parseTimeout(_ text: String) throws -> Int64 {
        try DurationText.seconds(text, option: "--on-alarm-timeout", range: 1...3_600)
    }

    /// A minute.
    static let defaultTimeout: Int64 = 60
}
