import Dispatch
import Synchronization

/// Runs asynchronous work from a synchronous caller: the one place where a thread blocks on a
/// task. For a command's main thread (`capture-send`'s run, `spool deliver`), which has nothing
/// else to do; never from async code, where it would hold a thread of the task pool that the work
/// itself may need (`await` the work there instead). The counterpart of `BlockingWork`.
public enum WaitForTask {
    /// Starts `work` in a task and blocks the calling thread until it returns its value.
    public static func run<Value: Sendable>(_ work: @escaping @Sendable () async -> Value) -> Value {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Value?>(nil)
        Task {
            let value = await work()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        // Set before the signal that ended the wait.
        guard let value = result.withLock({ $0 }) else { preconditionFailure("the task signalled before setting its value") }
        return value
    }
}
