import CaptureWire
import Foundation

/// A stream delivered as a new stream because the receiver no longer resumes the one it was started
/// as (its resume window passed and its file was finalized): the new stream's id, the stream it
/// continues, and where it begins in that stream's sequences and sample timeline (PROTOCOL.md §8.1).
/// The recordings join without a hole: the earlier file ends where this one begins. The new stream
/// keeps the earlier one's resume secret (`SenderConfiguration.resumeSecret`, kept in the spool), and
/// its Hello carries it: that proves to the receiver that it owns the stream it continues (PROTOCOL.md
/// §6.1.2, §8.1); a continuation without it is refused with NOT_STREAM_OWNER.
public struct StreamContinuation: Codable, Sendable, Equatable {
    /// The id the audio is now delivered as.
    public var streamID: UUID
    /// The stream it continues (the one the receiver no longer resumes).
    public var continues: UUID
    /// The first sequence the new stream carries (the oldest the sender held).
    public var firstSequence: UInt64
    /// The sample index, in the stream's timeline, of the new stream's first frame.
    public var firstSampleTime: Int64
    /// Set when the receiver lost audio of the stream it continues after acknowledging it: the sample
    /// index where the receiver's recording ends. The audio from there to `firstSampleTime` is in no
    /// file (`Continuation.lost_from_sample_time`). Absent from spools of older versions.
    public var lostFromSampleTime: Int64?

    public init(streamID: UUID, continues: UUID, firstSequence: UInt64, firstSampleTime: Int64, lostFromSampleTime: Int64? = nil) {
        self.streamID = streamID
        self.continues = continues
        self.firstSequence = firstSequence
        self.firstSampleTime = firstSampleTime
        self.lostFromSampleTime = lostFromSampleTime
    }

    /// `Hello.continues`.
    var wire: Capture_V1_Continuation {
        .with {
            $0.streamID = continues.wireBytes
            $0.firstSequence = firstSequence
            if let lostFromSampleTime { $0.lostFromSampleTime = lostFromSampleTime }
        }
    }
}
