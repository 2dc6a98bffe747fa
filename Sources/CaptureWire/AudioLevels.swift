import CaptureCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The per-channel peak and RMS levels of one AudioData's audio, as `Capture_V1_Levels` carries
/// them: whole hundredths of a decibel below full scale, 0 (full scale or above) to
/// `floorHundredths` (−120 dBFS, which also stands for anything quieter, silence included).
/// Integers, so silence has a value and nothing can be infinite or NaN. PROTOCOL.md §6.3.1.
public struct AudioLevels: Sendable, Hashable {
    /// The quietest level the wire carries, −120 dBFS, in hundredths of a dB below full scale.
    public static let floorHundredths: UInt32 = 12_000

    /// Each channel's sample peak, hundredths of a dB below full scale.
    public private(set) var peakHundredths: [UInt32]
    /// Each channel's RMS, hundredths of a dB below full scale (never louder than the peak).
    public private(set) var rmsHundredths: [UInt32]

    /// The number of channels.
    public var channelCount: Int { peakHundredths.count }
    /// Each channel's peak in dBFS (−120 for silence; never −infinity).
    public var peakDBFS: [Double] { peakHundredths.map(Self.dbfs) }
    /// Each channel's RMS in dBFS (−120 for silence; never −infinity).
    public var rmsDBFS: [Double] { rmsHundredths.map(Self.dbfs) }

    /// Levels from linear values (1 = full scale), one pair per channel. Values above full scale
    /// count as full scale, below −120 dBFS (zero, negative or not a number) as the floor; an RMS
    /// louder than its peak (rounding) is lowered to the peak.
    public init(linearPeaks: [Double], linearRMS: [Double]) {
        precondition(linearPeaks.count == linearRMS.count, "one peak and one RMS per channel")
        peakHundredths = linearPeaks.map(Self.hundredths(linear:))
        rmsHundredths = zip(linearRMS.map(Self.hundredths(linear:)), peakHundredths).map { Swift.max($0, $1) }
    }

    /// The levels of a `LevelMeter` reading; nil when it covers no frames.
    public init?(_ reading: LevelMeter.Reading) {
        guard reading.frames > 0, !reading.channels.isEmpty else { return nil }
        self.init(linearPeaks: reading.channels.map(\.peak), linearRMS: reading.channels.map(\.rms))
    }

    /// The levels as the wire carries them.
    public var message: Capture_V1_Levels {
        .with {
            $0.peak = peakHundredths
            $0.rms = rmsHundredths
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
    /// than its channel's peak.
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
        return .valid(AudioLevels(checkedPeaks: levels.peak, rms: levels.rms))
    }

    private init(checkedPeaks: [UInt32], rms: [UInt32]) {
        peakHundredths = checkedPeaks
        rmsHundredths = rms
    }

    /// A linear level (1 = full scale) in whole hundredths of a dB below full scale, within 0...floor.
    public static func hundredths(linear: Double) -> UInt32 {
        guard linear.isFinite || linear == .infinity else { return floorHundredths }
        guard linear < 1 else { return 0 }
        guard linear > 0 else { return floorHundredths }
        let below = (-2_000 * log10(linear)).rounded()
        return below >= Double(floorHundredths) ? floorHundredths : UInt32(below)
    }

    private static func dbfs(_ hundredths: UInt32) -> Double { -Double(hundredths) / 100 }
}
