/// What may leave on a connection beyond its window: a rate limit (`--also ...,max-rate=`) kept as
/// a token bucket, and, for a background destination (`priority=background`), the rule that it
/// sends only while the foreground destinations are caught up. A pure value: `SenderSession` asks
/// it before each entry and charges what it sends; the session's handler feeds it the time and the
/// foreground's state on a ticker (`tickInterval`).
///
/// Why one entry at a time while the foreground is live: the link a field unit has is one queue.
/// Whatever the background has in flight stands in it ahead of the next live packet, so a
/// background that filled its window would delay the live stream by that window's transmission
/// time. With one entry in flight, the live stream waits at most for one capture buffer of the
/// background encoding (`--buffer-seconds` keeps that small), and the background still uses the
/// capacity the live stream leaves.
struct SendPacing: Equatable {
    typealias Foreground = ForegroundState

    /// How often the handler refills the bucket and looks at the foreground, in nanoseconds.
    static let tickInterval: UInt64 = 20_000_000
    /// The bucket holds at most this many seconds of the rate (the burst a rate limit allows).
    static let burstSeconds = 0.25

    /// The rate limit in bytes per second; nil for none.
    let bytesPerSecond: Double?
    /// Whether the destination is a background one.
    let background: Bool
    /// Bytes the bucket may send now; an entry may take it below zero (it is sent whole), and the
    /// next waits until the bucket is above zero again.
    private(set) var tokens: Double
    /// When the bucket was last refilled (`MonotonicClock` nanoseconds); nil before the first tick.
    private(set) var refilledAt: UInt64?
    /// The foreground's state as last looked at. A background destination starts `behind`: it
    /// sends nothing before its first look.
    private(set) var foreground: Foreground

    /// Pacing for a destination limited to `bitsPerSecond` (nil: no limit), in the background or not.
    init(bitsPerSecond: Int?, background: Bool) {
        bytesPerSecond = bitsPerSecond.map { Double(max($0, 8)) / 8 }
        self.background = background
        tokens = bytesPerSecond.map { $0 * Self.burstSeconds } ?? 0
        foreground = background ? .behind : .finished
    }

    /// No limit at all: what a foreground destination without `max-rate` gets.
    static let unpaced = SendPacing(bitsPerSecond: nil, background: false)

    /// Whether the handler must tick: a rate limit, or a background destination whose foreground
    /// has not finished (once it has, nothing a tick brings can change what may be sent).
    var needsTicks: Bool { bytesPerSecond != nil || (background && foreground != .finished) }

    /// The bucket's capacity in bytes.
    var burstBytes: Double { (bytesPerSecond ?? 0) * Self.burstSeconds }

    /// Refills the bucket for the time passed since the last tick and notes the foreground's state.
    mutating func tick(now: UInt64, foreground: Foreground) {
        if let rate = bytesPerSecond {
            if let last = refilledAt, now > last {
                tokens = min(burstBytes, tokens + rate * Double(now - last) / 1e9)
            }
            refilledAt = now
        }
        if background { self.foreground = foreground }
    }

    /// Whether the next entry may be sent now, with `inFlightBytes` sent and not yet acknowledged.
    func allowsNext(inFlightBytes: Int) -> Bool {
        if background {
            switch foreground {
            case .behind: return false
            case .caughtUp: if inFlightBytes > 0 { return false }
            case .finished: break
            }
        }
        if bytesPerSecond != nil { return tokens > 0 }
        return true
    }

    /// Charges an entry of `bytes` sent.
    mutating func charge(bytes: Int) {
        if bytesPerSecond != nil { tokens -= Double(bytes) }
    }
}

/// Where the foreground destinations stand, as a background destination sees them.
public enum ForegroundState: Equatable, Sendable {
    /// A foreground destination lags (more than the gate's `caughtUp` unacknowledged, or
    /// not connected): the background sends nothing new.
    case behind
    /// Every foreground destination is caught up and its stream goes on: the background sends
    /// one entry at a time.
    case caughtUp
    /// Every foreground destination has its whole stream (or was given up): the background
    /// sends as its window allows.
    case finished
}
