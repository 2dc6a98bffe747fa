import Dispatch
import Foundation

/// Runs a handler, once, on the first of the given signals (which it stops from killing the process).
public final class SignalWatcher: @unchecked Sendable {
    private let sources: [DispatchSourceSignal]

    public init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "signals")
        let fired = NSLock()
        nonisolated(unsafe) var done = false
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                let first = fired.withLock { () -> Bool in
                    defer { done = true }
                    return !done
                }
                if first { handler(number) }
            }
            source.resume()
            return source
        }
    }

    public func cancel() {
        sources.forEach { $0.cancel() }
    }
}
