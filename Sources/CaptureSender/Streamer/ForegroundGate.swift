import Synchronization

/// Where a capture's foreground destinations stand, for its background destinations
/// (`SendPacing`): `behind` while one of them is not connected or lags more than `caughtUp`
/// beyond its own base lag, `finished` once every one has its whole stream or failed, `caughtUp`
/// otherwise.
///
/// A destination's lag is the audio captured and not yet acknowledged, in seconds; its base lag is
/// the least lag seen while it was connected: what the link's round trip and the receiver's
/// durable writes cost with nothing queued ahead. The background may add at most
/// `caughtUp` to it, whatever the link's own delay (the idea of LEDBAT's target delay).
///
/// Sendability: the members and what finished are guarded by a `Mutex`; a member's look reads its
/// log's figures under that log's own lock and its sender's link state under its own, one at a
/// time, outside the gate's.
final class ForegroundGate: Sendable {
    /// How much lag a foreground destination may have beyond its base lag and one capture buffer
    /// (the time between two appends) and still count as caught up.
    static let allowedLag: Duration = .milliseconds(500)

    /// One foreground destination: its link's index, and how it looks now (its base lag not yet
    /// applied: the gate keeps that).
    struct Member: Sendable {
        var link: Int
        var look: @Sendable () -> ForegroundLook
    }

    private struct State {
        var members: [Member] = []
        var finished: Set<Int> = []
        /// Each running member's least lag seen while connected, by link.
        var baseLag: [Int: Double] = [:]
    }

    /// The audio a foreground destination may lack beyond its base lag and still count as caught
    /// up: the threshold between `behind` and `caughtUp`.
    let caughtUp: Duration
    private let guarded = Mutex(State())

    init(caughtUp: Duration) {
        self.caughtUp = caughtUp
    }

    /// Adds a foreground destination.
    func add(_ member: Member) {
        guarded.withLock { $0.members.append(member) }
    }

    /// A foreground link's delivery is over.
    func finished(link: Int) {
        _ = guarded.withLock { $0.finished.insert(link) }
    }

    /// Where the foreground stands now.
    var state: ForegroundState {
        let (members, finished) = guarded.withLock { ($0.members, $0.finished) }
        let looks = members.map { member in (link: member.link, look: finished.contains(member.link) ? .finished : member.look()) }
        // Each connected member's base lag: the least seen so far.
        let withBase: [ForegroundLook] = guarded.withLock { state in
            looks.map { link, look in
                guard case .running(let connected, let lag, _) = look else { return look }
                var base = state.baseLag[link] ?? lag
                if connected {
                    base = min(base, lag)
                    state.baseLag[link] = base
                }
                return .running(connected: connected, lagSeconds: lag, baseLagSeconds: base)
            }
        }
        return Self.decide(withBase, caughtUp: caughtUp)
    }

    /// One foreground destination, as the gate sees it.
    enum ForegroundLook: Equatable {
        case finished
        case running(connected: Bool, lagSeconds: Double, baseLagSeconds: Double)
    }

    /// The rule, pure: `behind` if a running destination is not connected or lags more than
    /// `caughtUp` beyond its base lag; `caughtUp` if one runs; else `finished`.
    static func decide(_ looks: [ForegroundLook], caughtUp: Duration) -> ForegroundState {
        let allowed = caughtUp.inSeconds
        var result = ForegroundState.finished
        for look in looks {
            guard case .running(let connected, let lag, let base) = look else { continue }
            if !connected || lag > base + allowed { return .behind }
            result = .caughtUp
        }
        return result
    }
}
