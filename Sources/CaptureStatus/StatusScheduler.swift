import CaptureCore
import Dispatch

/// Something that calls a closure at a fixed period until cancelled. The reporter uses a real timer
/// (`DispatchStatusScheduler`); tests use a manual one to step time without sleeping.
public protocol StatusScheduler: Sendable {
    /// Calls `tick` every `period` (first call one period from now) until the returned handle is cancelled.
    func scheduleRepeating(every period: Duration, _ tick: @escaping @Sendable () -> Void) -> any StatusSchedule
}

/// A running repeating schedule.
public protocol StatusSchedule: Sendable {
    /// Stops further ticks. A tick already running finishes.
    func cancel()
}

/// A scheduler on a Dispatch timer on its own serial queue.
public struct DispatchStatusScheduler: StatusScheduler {
    private let queue: DispatchQueue

    public init(label: String = "capture.status") {
        queue = DispatchQueue(label: label)
    }

    public func scheduleRepeating(every period: Duration, _ tick: @escaping @Sendable () -> Void) -> any StatusSchedule {
        let nanoseconds = Int(max(1, period.inNanoseconds))
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds), leeway: .milliseconds(5))
        timer.setEventHandler(handler: tick)
        timer.resume()
        return DispatchStatusSchedule(timer: timer)
    }
}

/// A Dispatch timer as a `StatusSchedule`.
///
/// Sendability (`@unchecked Sendable`): it holds only a `DispatchSourceTimer`, set up before the
/// schedule is made and then only cancelled; libdispatch guards the timer itself (`cancel()` may be
/// called from any thread), which the compiler cannot see (the protocol is not `Sendable`).
struct DispatchStatusSchedule: StatusSchedule, @unchecked Sendable {
    let timer: any DispatchSourceTimer

    func cancel() { timer.cancel() }
}
