import CaptureWire
import Foundation

/// One open stream file as the session handler uses it. Every call returns at once; the work runs
/// off the event loop, in the order the calls were made.
protocol StreamFile: AnyObject, Sendable {
    /// The file's path.
    var path: String { get }
    /// Appends audio; its durability is reported through `StreamWriterEvents.durable`.
    func write(_ audio: AudioWrite)
    /// Records a gap of `length` frames at `sampleTime`.
    func recordGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String)
    /// Finalizes the file.
    func finish(remainderFrames: Int, completion: @escaping @Sendable (Result<FinishedFile, StorageError>) -> Void)
    /// Makes what was written durable and closes the file, leaving it resumable (finalized too with `finalizing`).
    func detach(finalizing: Bool, completion: @escaping @Sendable () -> Void)
}

/// Where the session handler's stream files are created and reopened: the receiver's writer pool,
/// or a scripted stand-in in the handler's tests.
protocol StreamStorage: Sendable {
    /// Creates a new stream's file, or reopens the file at `resumingFrom`, off the event loop.
    func open(
        _ hello: ValidatedHello, resumingFrom: String?, peer: String, events: StreamWriterEvents,
        completion: @escaping @Sendable (Result<(any StreamFile, ResumePoint), StorageError>) -> Void)
}
