#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A sine tone generator that behaves like a capture device: the same tone on every channel, at a
/// given frequency and peak level in dBFS, for a duration or without end, paced in real time unless
/// asked not to be.
public final class ToneSource: AudioSource {
    /// What the tone is.
    public struct Settings: Sendable, Equatable {
        /// Frequency in Hz.
        public var frequency: Double
        /// Peak level in dBFS (0 is full scale; -6 is half).
        public var levelDBFS: Double
        /// Frames per second.
        public var sampleRate: Double
        /// Channels; every channel carries the same tone.
        public var channels: Int
        /// Sample encoding.
        public var sample: PCMSampleFormat
        /// How much audio the tone lasts (zero or more); `nil` for a tone without end.
        public var duration: Duration?
        /// Deliver at the pace of real time, as a device does.
        public var paced: Bool

        public init(
            frequency: Double = 440, levelDBFS: Double = -12, sampleRate: Double = 48_000, channels: Int = 2,
            sample: PCMSampleFormat = .s16, duration: Duration? = nil, paced: Bool = true
        ) {
            self.frequency = frequency
            self.levelDBFS = levelDBFS
            self.sampleRate = sampleRate
            self.channels = channels
            self.sample = sample
            self.duration = duration
            self.paced = paced
        }
    }

    public let format: StreamFormat
    public var isRealTime: Bool { settings.paced }
    /// The settings the tone was made with.
    public let settings: Settings

    private let writer: PCMSampleWriter
    private let amplitude: Double
    private let phaseStep: Double
    private let totalFrames: Int64?
    private var framesProduced: Int64 = 0
    private var pacer: RealTimePacer

    /// Creates a tone source; throws when the settings cannot make a valid stream.
    public init(settings: Settings) throws(CaptureError) {
        let format = StreamFormat.linearPCM(sampleRate: settings.sampleRate, channels: settings.channels, sample: settings.sample)
        do { try format.validate() } catch { throw .unsupportedFormat(error.description) }
        guard settings.frequency > 0, settings.frequency < settings.sampleRate / 2 else {
            throw .unsupportedFormat("tone frequency \(settings.frequency) Hz must be above 0 and below half the sample rate (\(settings.sampleRate / 2) Hz)")
        }
        guard settings.levelDBFS <= 0, settings.levelDBFS.isFinite else {
            throw .unsupportedFormat("tone level \(settings.levelDBFS) dBFS must be 0 or below")
        }
        // Its frames must fit an Int64 (a duration of 1e15 s would trap converting them).
        if let duration = settings.duration, !(duration >= .zero && duration.inSeconds * settings.sampleRate < 9.0e18) {
            throw .unsupportedFormat("duration \(duration.inSeconds) s must be 0 or more, and less than 9e18 frames long")
        }
        self.settings = settings
        self.format = format
        writer = PCMSampleWriter(sample: settings.sample)
        amplitude = pow(10, settings.levelDBFS / 20)
        phaseStep = 2 * Double.pi * settings.frequency / settings.sampleRate
        totalFrames = settings.duration.map { Int64(($0.inSeconds * settings.sampleRate).rounded()) }
        pacer = RealTimePacer(sampleRate: settings.sampleRate)
    }

    /// The value of the tone at frame `index`, in -1...1, before quantizing.
    public func value(atFrame index: Int64) -> Double {
        amplitude * sin(phaseStep * Double(index % Int64(settings.sampleRate * 1000)))
    }

    public func start() throws(CaptureError) { pacer.start() }

    public func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        var count = frameCapacity
        if let totalFrames {
            let remaining = totalFrames - framesProduced
            guard remaining > 0 else { return .endOfStream }
            count = Int(min(Int64(frameCapacity), remaining))
        }
        let bytesPerSample = settings.sample.bytesPerSample
        let channels = settings.channels
        for frame in 0..<count {
            let value = value(atFrame: framesProduced + Int64(frame))
            let frameOffset = frame * bytesPerSample * channels
            for channel in 0..<channels {
                writer.write(value, to: buffer, at: frameOffset + channel * bytesPerSample)
            }
        }
        framesProduced += Int64(count)
        if settings.paced { pacer.waitForFrames(count) }
        return .frames(count)
    }

    public func stop() {}

    public func close() {}
}
