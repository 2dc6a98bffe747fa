import Foundation

/// Limits failed authentication per peer address: after `maximumFailures` failures within
/// `window`, the address is refused for `blockDuration` without its credentials being looked at.
/// The clock is injectable so tests can move time.
///
/// Sendability (`@unchecked Sendable`): `failures` and `blockedUntil` are read and written only under `lock`; the rest is immutable.
public final class AuthRateLimiter: @unchecked Sendable {
    private let lock = NSLock()
    private let maximumFailures: Int
    private let window: TimeInterval
    private let blockDuration: TimeInterval
    private let now: @Sendable () -> Date
    private var failures: [String: [Date]] = [:]
    private var blockedUntil: [String: Date] = [:]

    /// - Parameters:
    ///   - maximumFailures: failures allowed within `window`; 0 turns the limiter off.
    ///   - window: how far back failures count.
    ///   - blockDuration: how long an address is refused once over the limit.
    ///   - now: the clock.
    public init(
        maximumFailures: Int = 5, window: TimeInterval = 60, blockDuration: TimeInterval = 60,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.maximumFailures = maximumFailures
        self.window = window
        self.blockDuration = blockDuration
        self.now = now
    }

    /// Seconds `address` remains refused, or nil when it may try.
    public func remainingBlock(for address: String) -> TimeInterval? {
        lock.withLock {
            guard let until = blockedUntil[address] else { return nil }
            let remaining = until.timeIntervalSince(now())
            if remaining <= 0 {
                blockedUntil[address] = nil
                return nil
            }
            return remaining
        }
    }

    /// Records a failed attempt; returns true when this failure put the address over the limit.
    @discardableResult
    public func recordFailure(from address: String) -> Bool {
        guard maximumFailures > 0 else { return false }
        return lock.withLock {
            let time = now()
            var recent = (failures[address] ?? []).filter { time.timeIntervalSince($0) < window }
            recent.append(time)
            if recent.count >= maximumFailures {
                failures[address] = nil
                blockedUntil[address] = time.addingTimeInterval(blockDuration)
                return true
            }
            failures[address] = recent
            // Forget addresses that stopped trying, so the table stays small.
            if failures.count > 10_000 {
                failures = failures.filter { $0.value.contains { time.timeIntervalSince($0) < window } }
            }
            return false
        }
    }

    /// Forgets the failures of an address that authenticated.
    public func recordSuccess(from address: String) {
        lock.withLock { failures[address] = nil }
    }
}
