import Foundation

/// Counts an event that may repeat very often (a connection refused because the receiver is full)
/// and says when to log it: the first time, then at most once per `interval`, with how many
/// happened since the last line, so a flood of them cannot flood the log.
///
/// Sendability (`@unchecked Sendable`): `pending` and `lastLogged` are read and written only under `lock`.
final class RepeatedEventSummary: @unchecked Sendable {
    // Invariant: `pending` and `lastLogged` are only touched under `lock`.
    private let lock = NSLock()
    private let interval: TimeInterval
    private var pending = 0
    private var lastLogged: Date?

    init(interval: TimeInterval = 10) {
        self.interval = interval
    }

    /// Records one event at `now`; returns the count to log now (this one included), or nil.
    func record(now: Date = Date()) -> Int? {
        lock.withLock {
            pending += 1
            if let lastLogged, now.timeIntervalSince(lastLogged) < interval { return nil }
            lastLogged = now
            defer { pending = 0 }
            return pending
        }
    }

    /// The events recorded since the last line that were not logged yet (and forgets them): for a
    /// last line when the source of the events goes away.
    func takeUnlogged() -> Int {
        lock.withLock {
            defer { pending = 0 }
            return pending
        }
    }
}
