import CaptureCore
import Foundation
import Synchronization

/// Limits failed authentication per peer address: after `maximumFailures` failures within
/// `window`, the address is refused for `blockDuration` without its credentials being looked at.
/// The clock is injectable so tests can move time.
///
/// Sendability: the failures and blocks are in a `Mutex`; the rest is immutable.
public final class AuthRateLimiter: Sendable {
    private struct State {
        var failures: [String: [Date]] = [:]
        var blockedUntil: [String: Date] = [:]
    }

    private let maximumFailures: Int
    private let window: Duration
    private let blockDuration: Duration
    private let now: @Sendable () -> Date
    private let state = Mutex(State())

    /// - Parameters:
    ///   - maximumFailures: failures allowed within `window`; 0 turns the limiter off.
    ///   - window: how far back failures count.
    ///   - blockDuration: how long an address is refused once over the limit.
    ///   - now: the clock.
    public init(
        maximumFailures: Int = 5, window: Duration = .seconds(60), blockDuration: Duration = .seconds(60),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.maximumFailures = maximumFailures
        self.window = window
        self.blockDuration = blockDuration
        self.now = now
    }

    /// How long `address` remains refused, or nil when it may try.
    public func remainingBlock(for address: String) -> Duration? {
        state.withLock { state in
            guard let until = state.blockedUntil[address] else { return nil }
            let remaining = until.timeIntervalSince(now())
            if remaining <= 0 {
                state.blockedUntil[address] = nil
                return nil
            }
            return .seconds(remaining)
        }
    }

    /// Records a failed attempt; returns true when this failure put the address over the limit.
    @discardableResult
    public func recordFailure(from address: String) -> Bool {
        guard maximumFailures > 0 else { return false }
        return state.withLock { state in
            let time = now()
            var recent = (state.failures[address] ?? []).filter { time.duration(since: $0) < window }
            recent.append(time)
            if recent.count >= maximumFailures {
                state.failures[address] = nil
                state.blockedUntil[address] = time.addingTimeInterval(blockDuration.inSeconds)
                return true
            }
            state.failures[address] = recent
            // Forget addresses that stopped trying, so the table stays small.
            if state.failures.count > 10_000 {
                state.failures = state.failures.filter { $0.value.contains { time.duration(since: $0) < window } }
            }
            return false
        }
    }


    /// Forgets the failures of an address that authenticated.
    public func recordSuccess(from address: String) {
        state.withLock { $0.failures[address] = nil }
    }
}
