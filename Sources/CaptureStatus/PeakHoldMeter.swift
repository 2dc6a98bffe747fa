import CaptureCore

/// What a level meter shows between captured buffers: the levels of the most recent audio, a
/// peak-hold marker per channel, and a clip indicator that stays lit for a while.
///
/// Capture buffers arrive every `--buffer-seconds` (0.5 s by default) while a terminal is redrawn
/// every 100 ms, so most redraws see no new audio. A meter that showed "the audio since the last
/// redraw" literally would read −∞ most of the time; like any real meter, this one keeps showing the
/// most recent audio until newer audio arrives. Readings are fed in as they are taken (one per
/// redraw or status line, with the time they were taken):
///
/// - a reading with frames replaces the shown levels (peak, RMS) with its own;
/// - a reading without frames leaves the shown levels as they were; before any audio they are
///   silence (−∞), which is also what real digital silence reads;
/// - the held peak of a channel is the highest peak of the last `peakHold` (1.5 s); after that
///   it falls at `fallDecibelsPerSecond` (20 dB/s) until the current peak catches it;
/// - the clip indicator stays on for `clipHold` (3 s) after the last clipped sample, so a
///   single clipped buffer cannot go unseen.
public struct PeakHoldMeter: Sendable {
    /// What the meter shows at one moment.
    public struct Display: Sendable, Equatable {
        /// The most recent audio's levels per channel (`clipped` is the held clip indicator), and
        /// the frames that reading covered (0 before any audio).
        public var levels: LevelMeter.Reading
        /// The held peak of each channel in dBFS (−∞ before any audio).
        public var heldPeaksDBFS: [Double]
    }

    /// How long a held peak stays before it starts to fall, so the eye can catch it.
    public var peakHold: Duration
    /// How fast a held peak falls once its hold time is over, in dB per second.
    public var fallDecibelsPerSecond: Double
    /// How long the clip indicator stays on after a clipped sample, so a single clipped buffer
    /// cannot go unseen.
    public var clipHold: Duration

    private var shown: LevelMeter.Reading?
    private var holds: [Hold] = []
    private var lastClip: [Double?] = []

    private struct Hold: Sendable {
        var peakDBFS: Double
        var since: Double
    }

    public init(peakHold: Duration = .milliseconds(1_500), fallDecibelsPerSecond: Double = 20, clipHold: Duration = .seconds(3)) {
        self.peakHold = max(.zero, peakHold)
        self.fallDecibelsPerSecond = max(0, fallDecibelsPerSecond)
        self.clipHold = max(.zero, clipHold)
    }

    /// Feeds the reading taken at `seconds` (any monotonic time base) and returns what to show;
    /// `nil` when nothing can be metered (`reading` is `nil`: the audio is not PCM).
    public mutating func update(_ reading: LevelMeter.Reading?, at seconds: Double) -> Display? {
        guard let reading else { return nil }
        if shown?.channels.count != reading.channels.count {
            shown = nil
            holds = reading.channels.map { _ in Hold(peakDBFS: -.infinity, since: seconds) }
            lastClip = reading.channels.map { _ in nil }
        }
        if reading.frames > 0 || shown == nil {
            shown = reading
            for (channel, level) in reading.channels.enumerated() {
                if level.peakDBFS >= heldPeak(channel, at: seconds) {
                    holds[channel] = Hold(peakDBFS: level.peakDBFS, since: seconds)
                }
                if level.clipped { lastClip[channel] = seconds }
            }
        }
        var levels = shown ?? reading
        for channel in levels.channels.indices {
            if let clip = lastClip[channel], seconds - clip <= clipHold.inSeconds {
                levels.channels[channel].clipped = true
            } else {
                levels.channels[channel].clipped = false
            }
        }
        let held = levels.channels.indices.map { channel in
            max(heldPeak(channel, at: seconds), levels.channels[channel].peakDBFS)
        }
        return Display(levels: levels, heldPeaksDBFS: held)
    }

    /// The held peak of `channel` at `seconds`: held for `peakHold`, then falling.
    private func heldPeak(_ channel: Int, at seconds: Double) -> Double {
        let hold = holds[channel]
        guard hold.peakDBFS.isFinite else { return hold.peakDBFS }
        let falling = seconds - hold.since - peakHold.inSeconds
        return falling > 0 ? hold.peakDBFS - falling * fallDecibelsPerSecond : hold.peakDBFS
    }
}
