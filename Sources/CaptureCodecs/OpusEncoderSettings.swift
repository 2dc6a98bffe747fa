import CaptureCore

/// How libopus spends its bits from one packet to the next.
public enum OpusBitrateMode: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Unconstrained variable bit rate: each packet takes what the audio needs (libopus's default).
    case vbr
    /// Constrained variable bit rate: packet sizes vary, but the rate stays close to the target over
    /// short windows, as a fixed-rate channel needs.
    case cvbr
    /// Constant bit rate: every packet of a stream has the same size.
    case cbr

    public var description: String { rawValue }
}

/// What libopus tunes itself for (`OPUS_APPLICATION_*`).
public enum OpusApplication: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Music and mixed content: the best quality for a given rate (`OPUS_APPLICATION_AUDIO`).
    case audio
    /// Speech: intelligibility first (`OPUS_APPLICATION_VOIP`).
    case voip
    /// The lowest delay: CELT only, 2.5 ms less look-ahead (`OPUS_APPLICATION_RESTRICTED_LOWDELAY`).
    case lowdelay

    public var description: String { rawValue }
}

/// The duration of one Opus frame, which is also the duration of one packet here.
public enum OpusFrameDuration: Int, CaseIterable, Sendable, CustomStringConvertible {
    // Raw values are microseconds, so that 2.5 ms is exact.
    case ms2_5 = 2_500
    case ms5 = 5_000
    case ms10 = 10_000
    case ms20 = 20_000
    case ms40 = 40_000
    case ms60 = 60_000

    /// The duration in microseconds.
    public var microseconds: Int { rawValue }

    /// The duration in milliseconds (2.5 for `ms2_5`).
    public var milliseconds: Double { Double(rawValue) / 1_000 }

    /// The frames one Opus frame holds at `sampleRate`, exact for every rate Opus runs at
    /// (for example 960 at 48 kHz and 320 at 16 kHz for 20 ms).
    public func frames(atSampleRate sampleRate: Int) -> Int { sampleRate * rawValue / 1_000_000 }

    /// The duration with this many milliseconds, if Opus has it.
    public init?(milliseconds: Double) {
        guard milliseconds.isFinite, let match = Self.allCases.first(where: { $0.milliseconds == milliseconds }) else {
            return nil
        }
        self = match
    }

    /// Reads a duration as a user writes it: "20", "2.5", "20ms".
    public init(parsing text: String) throws(EncoderError) {
        var number = text.trimmingWhitespace().lowercased()
        if number.hasSuffix("ms") { number.removeLast(2) }
        guard let milliseconds = Double(number), let duration = OpusFrameDuration(milliseconds: milliseconds) else {
            throw .invalidConfiguration(
                "Opus frame duration \"\(text)\" is not one Opus has: use 2.5, 5, 10, 20, 40 or 60 ms"
            )
        }
        self = duration
    }

    public var description: String {
        rawValue % 1_000 == 0 ? "\(rawValue / 1_000) ms" : "\(milliseconds) ms"
    }
}

/// The settings of an `OpusEncoder`: bit rate, frame duration, complexity, bit rate mode and
/// application. The defaults suit music capture: 128 kb/s, 20 ms, complexity 10, VBR, `audio`.
public struct OpusEncoderSettings: Equatable, Sendable {
    /// The bit rates libopus accepts, in bits per second, for the whole stream (all channels).
    public static let bitrateRange = 6_000...510_000
    /// The complexities libopus accepts: 0 is fastest, 10 is best.
    public static let complexityRange = 0...10
    /// The input sample rates Opus runs at.
    public static let supportedSampleRates = [8_000, 12_000, 16_000, 24_000, 48_000]
    /// The most channels one encoder carries (8, Vorbis channel order, RFC 7845 mapping family 1).
    public static let maximumChannels = 8

    /// Target bit rate in bits per second for the whole stream (all channels together).
    public var bitrate: Int
    /// Duration of each frame (and packet).
    public var frameDuration: OpusFrameDuration
    /// Encoder complexity, 0 (fastest) to 10 (best).
    public var complexity: Int
    /// Variable, constrained variable or constant bit rate.
    public var bitrateMode: OpusBitrateMode
    /// What libopus tunes itself for.
    public var application: OpusApplication

    public init(
        bitrate: Int = 128_000, frameDuration: OpusFrameDuration = .ms20, complexity: Int = 10,
        bitrateMode: OpusBitrateMode = .vbr, application: OpusApplication = .audio
    ) {
        self.bitrate = bitrate
        self.frameDuration = frameDuration
        self.complexity = complexity
        self.bitrateMode = bitrateMode
        self.application = application
    }

    /// Reads a bit rate as a user writes it: "128000", "128k", "96.5k" (bits per second), and checks
    /// that it is in `bitrateRange`.
    public static func parseBitrate(_ text: String) throws(EncoderError) -> Int {
        let trimmed = text.trimmingWhitespace().lowercased()
        let isKilo = trimmed.hasSuffix("k")
        let number = isKilo ? String(trimmed.dropLast()) : trimmed
        let bitrate: Int?
        if isKilo, let kilobits = Double(number), kilobits.isFinite, (kilobits * 1_000).rounded() == kilobits * 1_000,
           abs(kilobits) < 1e9 {
            bitrate = Int(kilobits * 1_000)
        } else if !isKilo, number.allSatisfy(\.isNumber) {
            bitrate = Int(number)
        } else {
            bitrate = nil
        }
        guard let bitrate else {
            throw .invalidConfiguration(
                "Opus bitrate \"\(text)\" is not a number of bits per second: write it as 128000 or 128k"
            )
        }
        try checkBitrate(bitrate)
        return bitrate
    }

    private static func checkBitrate(_ bitrate: Int) throws(EncoderError) {
        guard bitrateRange.contains(bitrate) else {
            throw .invalidConfiguration(
                "Opus bitrate \(bitrate) b/s is out of range: use 6000 to 510000 b/s (6k to 510k)"
            )
        }
    }

    /// Checks the settings on their own (bit rate and complexity in range).
    public func validate() throws(EncoderError) {
        try Self.checkBitrate(bitrate)
        guard Self.complexityRange.contains(complexity) else {
            throw .invalidConfiguration("Opus complexity \(complexity) is out of range: use 0 (fastest) to 10 (best)")
        }
    }

    /// Checks the settings and that Opus can encode `input`: interleaved little-endian PCM
    /// (s16, s24, s32 or f32) at 8000, 12000, 16000, 24000 or 48000 Hz with 1 to 8 channels.
    public func validate(for input: StreamFormat) throws(EncoderError) {
        try validate()
        guard input.pcmSampleFormat != nil else {
            throw .invalidConfiguration(
                "the Opus encoder takes interleaved little-endian PCM (s16, s24, s32 or f32); the input is \(input): capture as PCM"
            )
        }
        let rate = Int(exactly: input.sampleRate)
        guard let rate, Self.supportedSampleRates.contains(rate) else {
            let shown = rate.map(String.init) ?? String(input.sampleRate)
            throw .invalidConfiguration(
                "Opus runs at 8000, 12000, 16000, 24000 or 48000 Hz; the input is \(shown) Hz: resample it or capture at 48000 Hz"
            )
        }
        guard (1...Self.maximumChannels).contains(input.channelCount) else {
            throw .invalidConfiguration(
                "Opus carries 1 to \(Self.maximumChannels) channels; the input has \(input.channelCount): capture fewer channels"
            )
        }
    }
}

extension String {
    /// The string without leading and trailing whitespace (no Foundation needed).
    func trimmingWhitespace() -> String {
        let start = firstIndex(where: { !$0.isWhitespace }) ?? endIndex
        let end = lastIndex(where: { !$0.isWhitespace }).map { index(after: $0) } ?? start
        return String(self[start..<end])
    }
}
