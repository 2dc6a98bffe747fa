/// How long the sender waits before reconnecting: exponential backoff with full jitter.
///
/// The n-th consecutive failed attempt (n from 0) waits a random time between half and all of
/// `min(maximum, initial × 2ⁿ)`, so many senders that lost the same receiver do not reconnect in
/// lockstep. A connection that reached streaming resets n to 0, unless it ended because the
/// receiver broke the protocol (`DeliveryPolicy`).
public struct ReconnectPolicy: Sendable, Equatable {
    /// The first delay, in seconds.
    public var initial: Double
    /// The longest delay, in seconds.
    public var maximum: Double

    public init(initial: Double = 0.5, maximum: Double = 30) {
        self.initial = max(0.001, initial)
        self.maximum = max(self.initial, maximum)
    }

    /// The delay before attempt `attempt` + 1, given a uniform random number in [0, 1).
    public func delay(afterFailures attempt: Int, random: Double) -> Double {
        let exponent = Double(min(attempt, 60))
        let ceiling = min(maximum, initial * pow2(exponent))
        return ceiling * (0.5 + 0.5 * min(max(random, 0), 1))
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        var remaining = Int(exponent)
        while remaining > 0, value < 1e12 {
            value *= 2
            remaining -= 1
        }
        return value
    }
}
