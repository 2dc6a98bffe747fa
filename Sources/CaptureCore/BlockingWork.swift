/// Runs work that blocks (a disk sequence, a join, a wait on a capture thread) from async code, on
/// a thread of its own, so that it never holds one of the task pool's threads (two on this
/// machine's class of hardware, which a blocked one would halve). The counterpart of `WaitForTask`.
public enum BlockingWork {
    /// Runs `work` on a new thread named `name` and returns its result once it is done. Should the
    /// system refuse a thread, the work runs where the caller is, rather than not at all.
    public static func run<Value: Sendable, Failure: Error>(
        _ name: String, _ work: @escaping @Sendable () throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        let result: Result<Value, Failure> = await withCheckedContinuation { continuation in
            let body: @Sendable () -> Void = {
                continuation.resume(returning: Result { () throws(Failure) -> Value in try work() })
            }
            do throws(CaptureError) {
                try DetachedThread.start(name: name, body)
            } catch {
                body()
            }
        }
        return try result.get()
    }
}
