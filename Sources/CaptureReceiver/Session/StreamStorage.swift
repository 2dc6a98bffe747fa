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
    /// Records a marker with `label` at `sampleTime` (it covers no frames).
    func recordMarker(sequence: UInt64, sampleTime: Int64, label: String)
    /// Records a gap of `length` frames at `sampleTime` that the audio carries as silence (it covers
    /// no frames of its own).
    func recordFilledGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String)
    /// Finalizes the file and records the finished stream.
    func finish(_ end: StreamEnd?, completion: @escaping @Sendable (Result<FinishedFile, StorageError>) -> Void)
    /// Makes what was written durable and closes the file, leaving it resumable (finalized too with `finalizing`).
    func detach(finalizing: Bool, completion: @escaping @Sendable () -> Void)
}

/// A stream file the storage opened, and where the sender continues.
struct OpenedStreamFile: Sendable {
    var file: any StreamFile
    var resume: StreamPosition
    /// An unfinished file was continued (not created).
    var resumed: Bool
    /// How a new file was named when its natural name was taken.
    var naming: FileNaming? = nil
    /// What a new stream was found to continue (`Hello.continues`).
    var continuation: ContinuationLink? = nil
}

/// Where the session handler's stream files are opened: the receiver's writer pool, or a scripted
/// stand-in in the handler's tests.
protocol StreamStorage: Sendable {
    /// Continues the stream's unfinished file, or creates one for an unknown stream when
    /// `mayCreate`, off the event loop. `owner` is who asks (the Hello's resume secret and the
    /// connection's identity): only a stream's owner may continue it.
    func open(
        _ hello: ValidatedHello, mayCreate: Bool, owner: StreamOwner, peer: String, events: StreamWriterEvents,
        completion: @escaping @Sendable (Result<OpenedStreamFile, StorageError>) -> Void)
}
