import CaptureCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The per-channel peak and RMS levels of one AudioData's audio, and its EBU R128 loudness when the
/// sender measured it, as `Capture_V1_Levels` carries them. Peak and RMS are whole hundredths of a
/// decibel below full scale, 0 (full scale or above) to `floorHundredths` (−120 dBFS, which also
/// stands for anything quieter, silence included). Loudness and true peak are signed hundredths of
/// a LU or dB, `loudnessFloorHundredths` (−120, silence included) to `loudnessCeilingHundredths`
/// (+20). Integers, so silence has a value and nothing can be infinite or NaN. PROTOCOL.md §6.3.1.
public struct AudioLevels: Sendable, Hashable {
    /// The quietest level the wire carries, −120 dBFS, in hundredths of a dB below full scale.
    public static let floorHundredths: UInt32 = 12_000
    /// The quietest loudness or true peak the wire carries, −120 LUFS or dBTP, in hundredths.
    public static let loudnessFloorHundredths: Int32 = -12_000
    /// The loudest loudness or true peak the wire carries, +20 LUFS or dBTP (float audio far
    /// beyond full scale), in hundredths.
    public static let loudnessCeilingHundredths: Int32 = 2_000

    /// Each channel's sample peak, hundredths of a dB below full scale.
    public private(set) var peakHundredths: [UInt32]
    /// Each channel's RMS, hundredths of a dB below full scale (never louder than the peak).
    public private(set) var rmsHundredths: [UInt32]
    /// The momentary loudness (400 ms) as of the audio's last frame, hundredths of LUFS; nil when
    /// the sender measured none (an older sender, or compressed capture).
    public private(set) var momentaryHundredths: Int32?
    /// The short-term loudness (3 s) as of the audio's last frame, hundredths of LUFS; nil when
    /// the sender measured none.
    public private(set) var shortTermHundredths: Int32?
    /// Each channel's true peak over the audio, hundredths of dBTP; empty when the sender measured none.
    public private(set) var truePeakHundredths: [Int32]

    /// The number of channels.
    public var channelCount: Int { peakHundredths.count }
    /// Each channel's peak in dBFS (−120 for silence; never −infinity).
    public var peakDBFS: [Double] { peakHundredths.map(Self.dbfs) }
    /// Each channel's RMS in dBFS (−120 for silence; never −infinity).
    public var rmsDBFS: [Double] { rmsHundredths.map(Self.dbfs) }
    /// The momentary loudness in LUFS (−120 for silence), nil when not measured.
    public var momentaryLUFS: Double? { momentaryHundredths.map { Double($0) / 100 } }
    /// The short-term loudness in LUFS (−120 for silence), nil when not measured.
    public var shortTermLUFS: Double? { shortTermHundredths.map { Double($0) / 100 } }
    /// Each channel's true peak in dBTP (−120 for silence); empty when not measured.
    public var truePeakDBTP: [Double] { truePeakHundredths.map { Double($0) / 100 } }

    /// Levels from linear values (1 = full scale), one pair per channel, and the loudness measured
    /// over the same audio, if any. Values above full scale count as full scale, below −120 dBFS
    /// (zero, negative or not a number) as the floor; an RMS louder than its peak (rounding) is
    /// lowered to the peak. Loudness and true peaks are clamped to the wire's range likewise.
    public init(linearPeaks: [Double], linearRMS: [Double], loudness: Loudness? = nil) {
        precondition(linearPeaks.count == linearRMS.count, "one peak and one RMS per channel")
        precondition(loudness.map { $0.truePeakDBTP.count == linearPeaks.count } ?? true, "one true peak per channel")
        peakHundredths = linearPeaks.map(Self.hundredths(linear:))
        rmsHundredths = zip(linearRMS.map(Self.hundredths(linear:)), peakHundredths).map { Swift.max($0, $1) }
        momentaryHundredths = loudness.map { Self.hundredths(decibels: $0.momentaryLUFS) }
        shortTermHundredths = loudness.map { Self.hundredths(decibels: $0.shortTermLUFS) }
        truePeakHundredths = loudness?.truePeakDBTP.map(Self.hundredths(decibels:)) ?? []
    }

    /// The levels of a `LevelMeter` reading, with the loudness of the same audio if measured; nil
    /// when the reading covers no frames.
    public init?(_ reading: LevelMeter.Reading, loudness: Loudness? = nil) {
        guard reading.frames > 0, !reading.channels.isEmpty else { return nil }
        let measured = loudness.flatMap { $0.truePeakDBTP.count == reading.channels.count ? $0 : nil }
        self.init(linearPeaks: reading.channels.map(\.peak), linearRMS: reading.channels.map(\.rms), loudness: measured)
    }

    /// The levels as the wire carries them.
    public var message: Capture_V1_Levels {
        .with {
            $0.peak = peakHundredths
            $0.rms = rmsHundredths
            if let momentaryHundredths { $0.momentaryLoudness = momentaryHundredths }
            if let shortTermHundredths { $0.shortTermLoudness = shortTermHundredths }
            $0.truePeak = truePeakHundredths
        }
    }

    /// What an AudioData's `levels` field holds for a stream of `channelCount` channels.
    public enum Check: Sendable, Equatable {
        /// The field is absent, or present with no entries: the sender sent no levels.
        case absent
        /// Valid levels.
        case valid(AudioLevels)
        /// Levels that break PROTOCOL.md §6.3.1; the receiver ignores them and keeps the audio.
        case invalid(reason: String)
    }

    /// Checks an AudioData's levels against PROTOCOL.md §6.3.1: as many peak and RMS entries as the
    /// stream has channels (or none at all), each at most `floorHundredths`, and no RMS louder
    /// than its channel's peak; loudness figures only beside them, within
    /// `loudnessFloorHundredths...loudnessCeilingHundredths`, and as many true peaks as channels
    /// (or none).
    public static func check(_ audio: Capture_V1_AudioData, channelCount: Int) -> Check {
        guard audio.hasLevels else { return .absent }
        let levels = audio.levels
        if levels.peak.isEmpty && levels.rms.isEmpty { return .absent }
        guard levels.peak.count == channelCount, levels.rms.count == channelCount else {
            return .invalid(reason: "\(levels.peak.count) peak and \(levels.rms.count) RMS values for \(channelCount) channels")
        }
        for channel in 0..<channelCount {
            let peak = levels.peak[channel]
            let rms = levels.rms[channel]
            guard peak <= floorHundredths, rms <= floorHundredths else {
                return .invalid(reason: "channel \(channel + 1) is below the −120 dBFS floor (peak \(peak), RMS \(rms) hundredths of a dB)")
            }
            guard rms >= peak else {
                return .invalid(reason: "channel \(channel + 1) has an RMS louder than its peak")
            }
        }
        let loudnessRange = loudnessFloorHundredths...loudnessCeilingHundredths
        for (name, present, value) in [
            ("momentary loudness", levels.hasMomentaryLoudness, levels.momentaryLoudness),
            ("short-term loudness", levels.hasShortTermLoudness, levels.shortTermLoudness),
        ] where present && !loudnessRange.contains(value) {
            return .invalid(reason: "the \(name) (\(value) hundredths of a LU) is outside −120...+20 LUFS")
        }
        guard levels.truePeak.isEmpty || levels.truePeak.count == channelCount else {
            return .invalid(reason: "\(levels.truePeak.count) true peaks for \(channelCount) channels")
        }
        if let index = levels.truePeak.firstIndex(where: { !loudnessRange.contains($0) }) {
            return .invalid(reason: "channel \(index + 1)'s true peak (\(levels.truePeak[index]) hundredths of a dB) is outside −120...+20 dBTP")
        }
        return .valid(AudioLevels(checked: levels))
    }

    private init(checked levels: Capture_V1_Levels) {
        peakHundredths = levels.peak
        rmsHundredths = levels.rms
        momentaryHundredths = levels.hasMomentaryLoudness ? levels.momentaryLoudness : nil
        shortTermHundredths = levels.hasShortTermLoudness ? levels.shortTermLoudness : nil
        truePeakHundredths = levels.truePeak
    }

    /// A linear level (1 = full scale) in whole hundredths of a dB below full scale, within 0...floor.
    public static func hundredths(linear: Double) -> UInt32 {
        guard linear.isFinite || linear == .infinity else { return floorHundredths }
        guard linear < 1 else { return 0 }
        guard linear > 0 else { return floorHundredths }
        let below = (-2_000 * log10(linear)).rounded()
        return below >= Double(floorHundredths) ? floorHundredths : UInt32(below)
    }

    /// A loudness or true peak in decibels (LUFS, dBTP) in whole hundredths, within
    /// `loudnessFloorHundredths...loudnessCeilingHundredths`; −infinity and NaN are the floor.
    public static func hundredths(decibels: Double) -> Int32 {
        guard !decibels.isNaN else { return loudnessFloorHundredths }
        let scaled = (decibels * 100).rounded()
        if scaled <= Double(loudnessFloorHundredths) { return loudnessFloorHundredths }
        if scaled >= Double(loudnessCeilingHundredths) { return loudnessCeilingHundredths }
        return Int32(scaled)
    }

    private static func dbfs(_ hundredths: UInt32) -> Double { -Double(hundredths) / 100 }
}
