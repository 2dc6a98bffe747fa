import CaptureCore
import CaptureWire
import Foundation

/// What a stream can be alarmed for, as the watch desk names it (`kind` in events and metrics).
public enum StreamAlarmKind: String, CaseIterable, Sendable, Codable {
    /// Every channel below the silence threshold for the silence duration.
    case silence
    /// More than the allowed number of clipped buffers within the clipping window.
    case clipping
    /// The short-term loudness outside the allowed range for the loudness duration.
    case loudness
    /// The stream's sender reconnecting for longer than the link-down duration.
    case linkDown = "link-down"
    /// Connected, but no audio received for the no-audio duration.
    case noAudio = "no-audio"
}

/// When the receiver raises and clears each alarm (`--alarm-*` options). Each condition must hold
/// for its duration before the alarm is raised, and be over (past a margin, the hysteresis) for
/// `clearDuration` before it is cleared, so a level hovering at a threshold does not flap.
public struct StreamAlarmConditions: Sendable, Equatable {
    /// Silence: every channel's peak below this, dBFS.
    public var silenceBelowDBFS: Double = -60
    /// Silence: how long every channel must stay below `silenceBelowDBFS` before the silence alarm is raised.
    public var silenceDuration: Duration = .seconds(10)
    /// Clipping: more than this many clipped AudioData (a peak at full scale)...
    public var clippedBuffers: Int = 3
    /// ...within this window: the span over which clipped buffers are counted; the clipping alarm
    /// clears once a whole window passes without one.
    public var clippingWindow: Duration = .seconds(10)
    /// Loudness: the short-term loudness outside this range, LUFS...
    public var loudnessRangeLUFS: ClosedRange<Double> = -40 ... -5
    /// ...for this long before the loudness alarm is raised.
    public var loudnessDuration: Duration = .seconds(10)
    /// Link down: how long a stream's sender may be reconnecting before the link-down alarm is raised.
    public var linkDownDuration: Duration = .seconds(30)
    /// No audio: how long a connected stream may receive nothing before the no-audio alarm is raised.
    public var noAudioDuration: Duration = .seconds(10)
    /// A level or loudness alarm clears once its level is this many dB (LU) inside its threshold...
    public var hysteresisDB: Double = 3
    /// ...for this long: how long a raised level or loudness alarm's condition must stay over before it clears.
    public var clearDuration: Duration = .seconds(2)

    public init() {}
}

/// An alarm raised or cleared, as the machine decides it.
public struct StreamAlarmTransition: Sendable, Equatable {
    /// Raised or cleared.
    public enum Change: String, Sendable, Codable { case raised, cleared }

    public var kind: StreamAlarmKind
    public var change: Change
    /// When the condition began (raised) or ended (cleared).
    public var since: Date
    /// What the desk reads: the condition and its figures.
    public var detail: String

    public init(kind: StreamAlarmKind, change: Change, since: Date, detail: String) {
        self.kind = kind
        self.change = change
        self.since = since
        self.detail = detail
    }
}

/// One stream's alarms: a pure state machine. Events come in with their time (levels, audio, the
/// connection's state, a clock tick); what comes out is the alarms raised and cleared. The
/// directory runs one per stream under the stream's lock and publishes what it returns.
public struct StreamAlarmMachine: Sendable {
    /// What happened to the stream.
    public enum Event: Sendable {
        /// An AudioData arrived, with the levels it carried (if any).
        case audio(levels: AudioLevels?)
        /// The stream's connection state changed.
        case connection(StreamState)
        /// Time passed (the directory's once-a-second sweep).
        case tick
    }

    /// A condition that must hold for a while to raise, and be over for a while to clear.
    private struct Debounce: Sendable {
        /// When the condition began holding, while it holds.
        var holdingSince: Date?
        /// When it stopped holding (past the hysteresis), while raised.
        var overSince: Date?
        var raised = false
    }

    public let conditions: StreamAlarmConditions
    private var state: StreamState = .live
    private var stateSince: Date
    private var lastAudio: Date
    private var silence = Debounce()
    private var loudness = Debounce()
    private var clipped: [Date] = []
    private var clippingRaised = false
    private var linkDownRaised = false
    private var noAudioRaised = false

    /// A stream that went live at `time`.
    public init(conditions: StreamAlarmConditions, startedAt time: Date) {
        self.conditions = conditions
        stateSince = time
        lastAudio = time
    }

    /// The alarms raised now, in `StreamAlarmKind` order.
    public var raised: [StreamAlarmKind] {
        var kinds: [StreamAlarmKind] = []
        if silence.raised { kinds.append(.silence) }
        if clippingRaised { kinds.append(.clipping) }
        if loudness.raised { kinds.append(.loudness) }
        if linkDownRaised { kinds.append(.linkDown) }
        if noAudioRaised { kinds.append(.noAudio) }
        return kinds
    }

    /// Takes `event` at `time`; returns the alarms it raised and cleared.
    public mutating func handle(_ event: Event, at time: Date) -> [StreamAlarmTransition] {
        var out: [StreamAlarmTransition] = []
        switch event {
        case .audio(let levels):
            lastAudio = time
            if noAudioRaised {
                noAudioRaised = false
                out.append(.init(kind: .noAudio, change: .cleared, since: time, detail: "audio arrives again"))
            }
            if let levels { out += measure(levels, at: time) }
        case .connection(let newState):
            guard newState != state else { return [] }
            state = newState
            stateSince = time
            lastAudio = time
            switch newState {
            case .live:
                if linkDownRaised {
                    linkDownRaised = false
                    out.append(.init(kind: .linkDown, change: .cleared, since: time, detail: "the sender is connected again"))
                }
            case .reconnecting:
                if noAudioRaised {
                    noAudioRaised = false
                    out.append(.init(kind: .noAudio, change: .cleared, since: time, detail: "the connection ended; link-down watches it now"))
                }
            case .finished:
                out += clearAll(at: time, because: "the stream finished")
            }
        case .tick:
            break
        }
        out += timeouts(at: time)
        return out
    }

    /// Takes back alarms raised on the stream before the receiver restarted (the `--on-alarm` hook
    /// remembers them), when the stream resumes: each is raised again at `time`, so the desk sees
    /// it, and then clears as usual. Silence and loudness clear once their levels are over; clipping
    /// once a whole clipping window passes without a clipped buffer; no audio with the next audio;
    /// link down at once, as the stream is connected again.
    public mutating func restore(_ kinds: [StreamAlarmKind], at time: Date) -> [StreamAlarmTransition] {
        guard state != .finished else { return [] }
        var out: [StreamAlarmTransition] = []
        let detail = "raised before the receiver restarted, not cleared since"
        for kind in StreamAlarmKind.allCases where kinds.contains(kind) && !raised.contains(kind) {
            out.append(.init(kind: kind, change: .raised, since: time, detail: detail))
            switch kind {
            case .silence:
                silence = Debounce(holdingSince: time, overSince: nil, raised: true)
            case .loudness:
                loudness = Debounce(holdingSince: time, overSince: nil, raised: true)
            case .clipping:
                clippingRaised = true
                clipped.append(time)
            case .noAudio:
                noAudioRaised = true
            case .linkDown:
                if state == .reconnecting {
                    linkDownRaised = true
                } else {
                    out.append(.init(kind: .linkDown, change: .cleared, since: time, detail: "the sender is connected again"))
                }
            }
        }
        return out
    }

    /// The level conditions for one AudioData's levels.
    private mutating func measure(_ levels: AudioLevels, at time: Date) -> [StreamAlarmTransition] {
        var out: [StreamAlarmTransition] = []
        let loudest = levels.peakDBFS.max() ?? -120
        let quiet = loudest < conditions.silenceBelowDBFS
        let heard = loudest >= conditions.silenceBelowDBFS + conditions.hysteresisDB
        if let change = Self.step(&silence, holding: quiet, over: heard, at: time, raiseAfter: conditions.silenceDuration, clearAfter: conditions.clearDuration) {
            out.append(.init(
                kind: .silence, change: change, since: change == .raised ? silence.holdingSince ?? time : time,
                detail: change == .raised
                    ? "every channel below \(Self.decibels(conditions.silenceBelowDBFS)) dBFS for \(Self.seconds(conditions.silenceDuration)) s (loudest peak \(Self.decibels(loudest)) dBFS)"
                    : "peak \(Self.decibels(loudest)) dBFS"))
        }
        if let shortTerm = levels.shortTermLUFS {
            let range = conditions.loudnessRangeLUFS
            let outside = !range.contains(shortTerm)
            let inside = shortTerm >= range.lowerBound + conditions.hysteresisDB && shortTerm <= range.upperBound - conditions.hysteresisDB
            if let change = Self.step(&loudness, holding: outside, over: inside, at: time, raiseAfter: conditions.loudnessDuration, clearAfter: conditions.clearDuration) {
                out.append(.init(
                    kind: .loudness, change: change, since: change == .raised ? loudness.holdingSince ?? time : time,
                    detail: change == .raised
                        ? "short-term loudness \(Self.decibels(shortTerm)) LUFS, outside \(Self.decibels(range.lowerBound))...\(Self.decibels(range.upperBound)) LUFS for \(Self.seconds(conditions.loudnessDuration)) s"
                        : "short-term loudness \(Self.decibels(shortTerm)) LUFS"))
            }
        }
        if levels.peakDBFS.contains(where: { $0 >= 0 }) { clipped.append(time) }
        return out
    }

    /// The time-driven conditions: the clipping window, link down, no audio, and the debounced
    /// level conditions' clear timers.
    private mutating func timeouts(at time: Date) -> [StreamAlarmTransition] {
        var out: [StreamAlarmTransition] = []
        let windowStart = time.addingTimeInterval(-conditions.clippingWindow.inSeconds)
        clipped.removeAll { $0 <= windowStart }
        if !clippingRaised, clipped.count > conditions.clippedBuffers {
            clippingRaised = true
            out.append(.init(
                kind: .clipping, change: .raised, since: clipped.first ?? time,
                detail: "\(clipped.count) clipped buffers within \(Self.seconds(conditions.clippingWindow)) s (more than \(conditions.clippedBuffers))"))
        } else if clippingRaised, clipped.isEmpty {
            clippingRaised = false
            out.append(.init(kind: .clipping, change: .cleared, since: time, detail: "no clipped buffer for \(Self.seconds(conditions.clippingWindow)) s"))
        }
        if state == .reconnecting, !linkDownRaised, time.duration(since: stateSince) >= conditions.linkDownDuration {
            linkDownRaised = true
            out.append(.init(kind: .linkDown, change: .raised, since: stateSince, detail: "reconnecting for more than \(Self.seconds(conditions.linkDownDuration)) s"))
        }
        if state == .live, !noAudioRaised, time.duration(since: lastAudio) >= conditions.noAudioDuration {
            noAudioRaised = true
            out.append(.init(kind: .noAudio, change: .raised, since: lastAudio, detail: "connected, no audio for \(Self.seconds(conditions.noAudioDuration)) s"))
        }
        return out
    }

    private mutating func clearAll(at time: Date, because reason: String) -> [StreamAlarmTransition] {
        let kinds = raised
        silence = Debounce()
        loudness = Debounce()
        clipped = []
        clippingRaised = false
        linkDownRaised = false
        noAudioRaised = false
        return kinds.map { .init(kind: $0, change: .cleared, since: time, detail: reason) }
    }

    /// One debounced condition's step. Before it is raised, the condition must hold without a
    /// break for `raiseAfter`; once raised, it must be over, past the hysteresis, without a break
    /// for `clearAfter`. A measurement inside the hysteresis keeps a raised alarm and restarts its
    /// clear timer.
    private static func step(
        _ debounce: inout Debounce, holding: Bool, over: Bool, at time: Date, raiseAfter: Duration, clearAfter: Duration
    ) -> StreamAlarmTransition.Change? {
        if !debounce.raised {
            guard holding else {
                debounce.holdingSince = nil
                return nil
            }
            let since = debounce.holdingSince ?? time
            debounce.holdingSince = since
            guard time.duration(since: since) >= raiseAfter else { return nil }
            debounce.raised = true
            return .raised
        }
        guard over else {
            debounce.overSince = nil
            return nil
        }
        let since = debounce.overSince ?? time
        debounce.overSince = since
        guard time.duration(since: since) >= clearAfter else { return nil }
        debounce = Debounce()
        return .cleared
    }

    private static func decibels(_ value: Double) -> String { String(format: "%.1f", value) }

    /// A condition's duration in the details' words: whole seconds as an integer, else one decimal.
    private static func seconds(_ duration: Duration) -> String {
        let value = duration.inSeconds
        return value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}
