/// How long the sender waits before reconnecting: exponential backoff with full jitter.
///
/// The n-th consecutive failed attempt (n from 0) waits a random time between half and all of
/// `min(maximum, initial × 2ⁿ)`, so many senders that lost the same receiver do not reconnect in
/// lockstep. A connection that reached streaming resets n to 0, unless it ended because the
/// receiver broke the protocol (`DeliveryPolicy`).
public struct ReconnectPolicy: Sendable, Equatable {
    /// The first delay (1 ms at least).
    public var initial: Duration
    /// The longest delay (`initial` at least).
    public var maximum: Duration

    public init(initial: Duration = .milliseconds(500), maximum: Duration = .seconds(30)) {
        self.initial = max(.milliseconds(1), initial)
        self.maximum = max(self.initial, maximum)
    }

    /// The delay before attempt `attempt` + 1, given a uniform random number in [0, 1).
    public func delay(afterFailures attempt: Int, random: Double) -> Duration {
        var ceiling = initial
        var doublings = min(max(attempt, 0), 60)
        while doublings > 0, ceiling < maximum {
            ceiling *= 2
            doublings -= 1
        }
        return min(maximum, ceiling) * (0.5 + 0.5 * min(max(random, 0), 1))
    }
}
