import CaptureWire
import Foundation
import Logging

/// How a session lets go of its open stream file when the connection ends before the stream did.
public enum FileRelease: Sendable, Equatable {
    /// Make what was written durable, close the file, and keep it for the sender to resume.
    case keepResumable
    /// As `keepResumable`, and finalize the file too, so every reader opens it complete while the
    /// receiver is down; its position log stays, so a resume after the restart continues it.
    case finalizeResumable
    /// Finalize the file with what arrived and forget the stream (a resume window of 0).
    case finalizeIncomplete
}

/// One AudioData's packets, as the stream's writer appends them.
public struct AudioWrite: Sendable, Equatable {
    /// The message's sequence.
    public var sequence: UInt64
    /// The packets' bytes.
    public var payload: Data
    /// Each packet's size for a VBR format; empty for constant-size packets.
    public var packetSizes: [UInt32]
    /// Frames the packets hold.
    public var frameCount: Int
    /// The sample index just past these frames.
    public var endSampleTime: Int64
    /// The levels the sender measured for this audio, when it sent valid ones (PROTOCOL.md §6.3.1).
    public var levels: AudioLevels? = nil
}

/// A log line the session asks for, with its level and metadata (the handler adds the peer and
/// stream to every line).
public struct SessionLogLine: Sendable, Equatable {
    public var level: Logger.Level
    public var message: String
    public var metadata: [String: String]
    /// Set for an event a peer can repeat at will (a gap): the handler logs the first, then at most
    /// one line per interval with how many there were, so a flood of them cannot flood the log.
    public var repeatable: Bool

    public init(_ level: Logger.Level, _ message: String, _ metadata: [String: String] = [:], repeatable: Bool = false) {
        self.level = level
        self.message = message
        self.metadata = metadata
        self.repeatable = repeatable
    }
}

/// What the NIO handler must do for the session, in order.
public enum ReceiverSessionAction: Sendable, Equatable {
    /// Send a message to the sender.
    case send(WireMessage)
    /// Close the connection.
    case close
    /// Stop the handshake timer: the stream is accepted.
    case cancelHandshakeTimeout
    /// Authenticate the Hello and consult the stream table (limit, busy, resumable); answer with
    /// `.helloDecided`.
    case decide(ValidatedHello)
    /// Open the stream's file off the event loop: claim the stream and continue its unfinished file,
    /// or, for a stream the output folder does not know, create one when `mayCreate` (false when the
    /// sender no longer holds the stream's beginning). Answer with `.fileOpened` or `.fileOpenFailed`.
    case openFile(ValidatedHello, mayCreate: Bool)
    /// Append audio to the stream's file; durability is reported with `.durable`.
    case write(AudioWrite)
    /// Record a gap in the stream's file.
    case recordGap(Capture_V1_Gap)
    /// Record a marker in the stream's file.
    case recordMarker(Capture_V1_Marker)
    /// Record a gap whose frames the stream's audio carries as silence (it does not move the file's timeline).
    case recordFilledGap(Capture_V1_FilledGap)
    /// Finalize the file (the stream ended); answer with `.fileFinished`.
    case finishFile(StreamEnd)
    /// Let go of the file as `FileRelease` says; answer with `.fileReleased`.
    case releaseFile(FileRelease)
    /// Stop (false) or resume (true) reading from the connection: backpressure while the disk is behind.
    case setReading(Bool)
    /// This receiver's stream table lets go of the stream: its file is finished, released for a
    /// resume (by any receiver sharing the folder), or was never opened.
    case forgetStream(UUID)
    /// Write a log line.
    case log(SessionLogLine)
    /// A domain event, nothing to carry out: the stream was accepted on this connection (its
    /// HelloAccepted is sent). What the stream directory and live listening subscribe to.
    case streamAccepted(StreamAccepted)
    /// A domain event, nothing to carry out: this connection let go of the stream it had accepted
    /// (just before `.forgetStream`): finished, or released for a resume.
    case streamReleased(StreamReleased)
}

/// A stream accepted on a connection, as the session's `.streamAccepted` announces it.
public struct StreamAccepted: Sendable, Equatable {
    /// The stream's Hello.
    public var hello: ValidatedHello
    /// Its file (with segments: the first).
    public var filePath: String
    /// The file continues an unfinished one (a resume) rather than a new file.
    public var resumed: Bool
    /// The sample time the file holds durably, where the sender continues.
    public var durableSampleTime: Int64
}

/// A stream a connection let go of, as the session's `.streamReleased` announces it.
public struct StreamReleased: Sendable, Equatable {
    public var streamID: UUID
    /// The sample time the file holds durably.
    public var durableSampleTime: Int64
    /// The file was kept unfinished for its sender to resume (here or at another receiver sharing
    /// the folder); false when it was finished.
    public var resumable: Bool
}
