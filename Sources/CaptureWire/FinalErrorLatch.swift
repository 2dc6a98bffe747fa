/// A protocol state machine whose first error is final: the failing call closes it, and every later
/// call throws that same error again. `ReceiverStreamState` and `SenderStreamState` run every step
/// through `run`.
protocol FinalErrorLatch {
    /// The error that ended the machine, if any.
    var failure: WireError? { get set }
    /// Moves the machine to its closed phase after a failure.
    mutating func closeAfterFailure()
}

extension FinalErrorLatch {
    /// Runs one step unless an earlier one failed; a step that throws closes the machine.
    mutating func run<T>(_ body: (inout Self) throws(WireError) -> T) throws(WireError) -> T {
        if let failure { throw failure }
        do throws(WireError) {
            return try body(&self)
        } catch {
            failure = error
            closeAfterFailure()
            throw error
        }
    }
}
