import ArgumentParser
import CaptureCLISupport
import CaptureReceiver

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

    func validate() throws {
        guard alarmLoudnessMin <= alarmLoudnessMax else {
            throw ValidationError("--alarm-loudness-min (\(alarmLoudnessMin) LUFS) must not be above --alarm-loudness-max (\(alarmLoudnessMax) LUFS)")
        }
    }

    /// The conditions these options give; nil with --no-alarms.
    var conditions: StreamAlarmConditions? {
        guard !noAlarms else { return nil }
        var conditions = StreamAlarmConditions()
        conditions.silenceBelowDBFS = alarmSilenceDbfs
        conditions.silenceSeconds = alarmSilenceS
        conditions.clippedBuffers = alarmClippedBuffers
        conditions.clippingWindowSeconds = alarmClippingWindowS
        conditions.loudnessRangeLUFS = alarmLoudnessMin...alarmLoudnessMax
        conditions.loudnessSeconds = alarmLoudnessS
        conditions.linkDownSeconds = alarmLinkDownS
        conditions.noAudioSeconds = alarmNoAudioS
        return conditions
    }

    /// Applies the options to the receiver's configuration.
    func apply(to configuration: inout ReceiverConfiguration) {
        configuration.alarms = conditions
    }
}
