import CaptureWire
import Foundation

// The vocabulary the session (the pure `ReceiverSession`) and its storage (`StreamStorage`) share:
// endings, finished files and storage errors (positions are CaptureWire's `StreamPosition`). It
// lives beside the session so that the machine depends on no storage file; the writers
// (`StreamWriter`, `WriterPool`) use it too.

/// The summary of a finished stream file.
public struct FinishedFile: Sendable, Equatable {
    public var path: String
    public var frames: Int64
    public var packets: Int64
    public var bytes: Int64
    public var gaps: Int
}

/// Why the receiver could not store a stream.
public enum StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file could not be created or reopened (disk full, permissions...): try again later.
    case cannotCreate(String)
    /// Writing or syncing failed: nothing after the last Ack is durable; try again later.
    case writeFailed(String)
    /// A resumed stream announced another format than its file has: it cannot continue that file.
    case formatChanged(String)
    /// Another connection, or another receiver sharing the output folder, holds the stream: the
    /// sender tries again later (and gets it once the holder lets go or dies).
    case streamBusy(String)
    /// The stream has no unfinished file here and the sender no longer holds its beginning, so a
    /// new file could not hold it.
    case notResumable
    /// The stream was finished here (its EndOfStream accepted and its file completed) within the
    /// resume window: the sender missed the EndAccepted, which is sent again.
    case alreadyFinished(FinishedStreamRecord)
    /// The stream belongs to another sender: the resume secret or the identity does not match.
    case notStreamOwner(String)
    /// The peer's address is rate limited and the Hello did not prove it resumes a stream it owns.
    case rateLimited(String, retryAfterMilliseconds: UInt32)

    public var description: String {
        switch self {
        case .cannotCreate(let message), .writeFailed(let message), .formatChanged(let message), .streamBusy(let message),
            .notStreamOwner(let message), .rateLimited(let message, _): return message
        case .notResumable: return "the stream has no unfinished file in this receiver's output folder"
        case .alreadyFinished(let record): return "the stream was finished already, in \(record.relativePath)"
        }
    }
}

/// What a stream's writer tells the session layer; called on a `WriterPool` thread (the session
/// hops to its event loop).
public struct StreamWriterEvents: Sendable {
    /// Audio up to this position is durable, and so is the position log record saying so.
    public var durable: @Sendable (StreamPosition) -> Void
    /// Storing the stream failed; nothing after the last durable position is kept. The path is the
    /// file it failed on (a segment file that could not be begun included).
    public var failed: @Sendable (StorageError, String) -> Void
    /// A segment file began (`--segment`): its path, and how it was named when its natural name was
    /// taken.
    public var segmentStarted: @Sendable (String, FileNaming?) -> Void

    public init(
        durable: @escaping @Sendable (StreamPosition) -> Void, failed: @escaping @Sendable (StorageError, String) -> Void,
        segmentStarted: @escaping @Sendable (String, FileNaming?) -> Void = { _, _ in }
    ) {
        self.durable = durable
        self.failed = failed
        self.segmentStarted = segmentStarted
    }
}
