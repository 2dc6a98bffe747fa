/// Where a stream continues on this connection: the receiver's choice, from what it has durably
/// written. `HelloAccepted` carries it to the sender.
public struct ResumePoint: Sendable, Equatable {
    /// The first sequence the receiver wants.
    public var nextSequence: UInt64
    /// The sample index that sequence must start at.
    public var nextSampleTime: Int64

    public init(nextSequence: UInt64, nextSampleTime: Int64) {
        self.nextSequence = nextSequence
        self.nextSampleTime = nextSampleTime
    }

    /// The start of a new stream: sequence 1 at the Hello's start sample time, or, for a stream that
    /// continues another (`Hello.continues`), its first sequence at its start sample time.
    public static func newStream(_ hello: ValidatedHello) -> ResumePoint {
        let first = hello.message.hasContinues ? hello.message.continues.firstSequence : WireProtocol.firstSequence
        return ResumePoint(nextSequence: first, nextSampleTime: hello.message.startSampleTime)
    }
}
