import Dispatch
import UnixSignals

/// Hands every SIGINT and SIGTERM the process receives, in order, to a handler, for as long as it
/// is not cancelled.
///
/// Built on swift-service-lifecycle's `UnixSignalsSequence`, the same mechanism that capture-recv's
/// service group traps its signals with, so the whole project has one way of handling signals.
/// Once started, the signals no longer end the process by default: the handler decides.
public final class SignalDelivery: Sendable {
    private let task: Task<Void, Never>

    /// Traps `signals` and returns once they are trapped (a signal that arrives after this returns
    /// always reaches `handler`). The handler runs on a concurrency thread, one signal at a time.
    public init(signals: [UnixSignal] = [.sigint, .sigterm], handler: @escaping @Sendable (UnixSignal) -> Void) {
        let trapped = DispatchSemaphore(value: 0)
        task = Task.detached {
            let sequence = await UnixSignalsSequence(trapping: signals)
            trapped.signal()
            for await signal in sequence {
                handler(signal)
            }
        }
        trapped.wait()
    }

    /// Stops handing signals over (they stay trapped: they no longer end the process).
    public func cancel() {
        task.cancel()
    }
}
