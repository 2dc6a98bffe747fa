import CaptureCore
import Foundation
import Synchronization

/// Counts an event that may repeat very often (a connection refused because the receiver is full)
/// and says when to log it: the first time, then at most once per `interval`, with how many
/// happened since the last line, so a flood of them cannot flood the log.
///
/// Sendability: `pending` and `lastLogged` are in a `Mutex`.
final class RepeatedEventSummary: Sendable {
    private struct State {
        var pending = 0
        var lastLogged: Date?
    }

    private let interval: Duration
    private let state = Mutex(State())

    init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Records one event at `now`; returns the count to log now (this one included), or nil.
    func record(now: Date = Date()) -> Int? {
        state.withLock { state in
            state.pending += 1
            if let lastLogged = state.lastLogged, now.duration(since: lastLogged) < interval { return nil }
            state.lastLogged = now
            defer { state.pending = 0 }
            return state.pending
        }
    }

    /// The events recorded since the last line that were not logged yet (and forgets them): for a
    /// last line when the source of the events goes away.
    func takeUnlogged() -> Int {
        state.withLock { state in
            defer { state.pending = 0 }
            return state.pending
        }
    }
}
