import CaptureCore
import CaptureWire
import Foundation

/// What a connection tells the directory when its stream is accepted (HelloAccepted sent).
struct StreamOpening: Sendable, Equatable {
    var id: UUID
    var name: String
    var peer: String
    var format: StreamFormat
    /// UTC wall-clock time of the stream's first sample (`Hello.start_time_unix_ns`).
    var started: Date
    /// The sample index of the stream's first frame (`Hello.start_sample_time`).
    var startSampleTime: Int64
    /// The file, relative to the output folder.
    var file: String
    /// The connection continues an earlier connection's file.
    var resumed: Bool
    /// The sample index just past the audio already durable in the file.
    var durableSampleTime: Int64
    /// The capture this stream is one encoding of (Hello `capture`); nil when the sender named none.
    var capture: ValidatedHello.CaptureOfStream? = nil
}

/// Where session handlers report the streams they carry: the receiver's `StreamDirectory`, or a
/// stand-in in tests.
protocol StreamDirectoryFeed: Sendable {
    /// A stream was accepted on a connection; the returned recorder takes that connection's updates.
    func streamOpened(_ opening: StreamOpening) -> any StreamActivityRecorder
}

/// One connection's updates to its stream's entry. Called on the connection's event loop, for
/// every AudioData: each call must be cheap and must never block on I/O.
protocol StreamActivityRecorder: AnyObject, Sendable {
    /// Audio up to `endSampleTime` arrived, with the sender's levels when it sent valid ones.
    func audioReceived(endSampleTime: Int64, levels: AudioLevels?)
    /// A gap of `lengthFrames` at `sampleTime` was recorded.
    func gapRecorded(sampleTime: Int64, lengthFrames: Int64, reason: String)
    /// A marker with `label` (may be empty) was recorded at `sampleTime`.
    func markerRecorded(sampleTime: Int64, label: String)
    /// Audio up to `durableSampleTime` is durable; up to `acknowledgedSampleTime` (when given)
    /// it is acknowledged to the sender.
    func positionsChanged(durableSampleTime: Int64, acknowledgedSampleTime: Int64?)
    /// The connection is over: the stream waits for a resume (`resumable`) or is finished.
    func connectionEnded(resumable: Bool)
}
