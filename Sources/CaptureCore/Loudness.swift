/// EBU R128 loudness (ITU-R BS.1770) of captured audio at one moment, as the sender measures it
/// for the levels it sends and its status line: the momentary (last 400 ms) and short-term (last
/// 3 s) loudness as of the last frame measured, and each channel's true peak (4× oversampled)
/// over the audio measured since the reading before. Silence is −infinity.
public struct Loudness: Sendable, Equatable {
    /// Momentary loudness, LUFS.
    public var momentaryLUFS: Double
    /// Short-term loudness, LUFS.
    public var shortTermLUFS: Double
    /// Each channel's true peak, dBTP (above 0 when samples between the samples go beyond full scale).
    public var truePeakDBTP: [Double]

    public init(momentaryLUFS: Double, shortTermLUFS: Double, truePeakDBTP: [Double]) {
        self.momentaryLUFS = momentaryLUFS
        self.shortTermLUFS = shortTermLUFS
        self.truePeakDBTP = truePeakDBTP
    }
}
