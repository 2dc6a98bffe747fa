import CaptureWire
import Foundation

extension ReceiverSession {
    /// Where the session's stream file is. Each case carries exactly the data that exists in it,
    /// so a combination that cannot happen (streaming without a file, a Hello while handshaking)
    /// cannot be represented either; a transition builds the next case's data from the last's.
    public enum State: Sendable, Equatable {
        /// Waiting for the preamble and the Hello.
        case handshaking
        /// The Hello is valid; waiting for `.helloDecided`.
        case deciding(DecidingState)
        /// The stream was accepted; its file is being created or reopened.
        case opening(OpeningState)
        /// Audio flows; reading is paused while the disk is too far behind.
        case streaming(StreamingState)
        /// EndOfStream arrived; the file is being finalized.
        case finishing(FinishingState)
        /// The connection ended first; the file is being released (`FileRelease`).
        case releasing(ReleasingState)
        /// Nothing of the stream is left to do here; `Outcome` says how it ended.
        case done(Outcome)
    }

    /// A valid Hello waiting for the receiver's decision.
    public struct DecidingState: Sendable, Equatable {
        /// The Hello as validated.
        public let hello: ValidatedHello
    }

    /// An accepted stream whose file is being created or reopened.
    public struct OpeningState: Sendable, Equatable {
        /// The accepted Hello.
        public let hello: ValidatedHello
        /// The accepted stream (the Hello's).
        public var streamID: UUID { hello.streamID }
    }

    /// The stream's file is open and audio flows.
    public struct StreamingState: Sendable, Equatable {
        /// The open file and what of it is durable.
        public internal(set) var file: StreamFileRecord
        /// Reading stopped because too much audio handed to the file is not durable yet.
        public internal(set) var readingPaused: Bool
    }

    /// EndOfStream arrived; the file is being finalized.
    public struct FinishingState: Sendable, Equatable {
        /// The file being finalized (it is streamed to again if finishing fails).
        public internal(set) var file: StreamFileRecord
        /// The sender's EndOfStream.
        public let endOfStream: Capture_V1_EndOfStream
    }

    /// The connection ended while the file was open; the file is being let go of.
    public struct ReleasingState: Sendable, Equatable {
        /// The file being let go of.
        public internal(set) var file: StreamFileRecord
        /// How it is let go of.
        public let mode: FileRelease
        /// The stream was announced as accepted on this connection (`.streamAccepted`), so
        /// letting go of it is announced too (`.streamReleased`). False when the connection ended
        /// before the file had opened, or the sender could not continue at the file's end.
        public let announcedAcceptance: Bool
    }

    /// How the stream's part of a session ended.
    public enum Outcome: Sendable, Equatable {
        /// The connection ended before a Hello was decided on.
        case noStream
        /// The Hello was refused by the decision (authentication, limits, rate limit); nothing was
        /// reserved for its stream.
        case helloRefused(ValidatedHello)
        /// The stream was accepted but no file was opened for it (opening failed or was refused,
        /// or the connection closed before the decision came); its stream was given back.
        case notOpened(ValidatedHello)
        /// EndOfStream: the file was finished and the stream forgotten.
        case finished(StreamFileRecord)
        /// The file was let go of unfinished, for its sender to resume (here or at another receiver).
        case resumable(StreamFileRecord)
        /// The file was finalized with what arrived, and the stream forgotten (no resume window).
        case finalizedIncomplete(StreamFileRecord)

        /// The stream's Hello, when one was decided on.
        public var hello: ValidatedHello? {
            switch self {
            case .noStream: nil
            case .helloRefused(let hello), .notOpened(let hello): hello
            case .finished(let file), .resumable(let file), .finalizedIncomplete(let file): file.hello
            }
        }

        /// The stream this connection accepted, if it accepted one (not for a refused Hello).
        public var acceptedStreamID: UUID? {
            switch self {
            case .noStream, .helloRefused: nil
            case .notOpened(let hello): hello.streamID
            case .finished(let file), .resumable(let file), .finalizedIncomplete(let file): file.streamID
            }
        }

        /// The stream's file, when one was opened.
        public var file: StreamFileRecord? {
            switch self {
            case .noStream, .helloRefused, .notOpened: nil
            case .finished(let file), .resumable(let file), .finalizedIncomplete(let file): file
            }
        }
    }

    /// The stream's file as this connection opened it: the accepted Hello, the files written, and
    /// what of the audio handed to them is durable.
    public struct StreamFileRecord: Sendable, Equatable {
        /// The accepted Hello.
        public let hello: ValidatedHello
        /// The stream's file (with segments: its first), which HelloAccepted named.
        public let filePath: String
        /// The file being written now: `filePath`, or with segments the latest segment's.
        public internal(set) var currentFilePath: String
        /// The file continues an unfinished one.
        public let resumed: Bool
        /// Audio handed to the file, and what of it is durable.
        public internal(set) var durability: DurabilityAccount

        /// The stream (the Hello's).
        public var streamID: UUID { hello.streamID }
        /// The file name the sender is told (the last path component of `filePath`).
        var fileName: String { (filePath as NSString).lastPathComponent }
    }

    /// Audio handed to the stream's file and what of it is durable, in sequences and bytes.
    public struct DurabilityAccount: Sendable, Equatable {
        /// One sequence handed to the file: its number, and the bytes handed over up to and including it.
        struct HandedOver: Sendable, Equatable {
            let sequence: UInt64
            let cumulativeBytes: Int
        }

        /// The last durable position (what the last Ack said).
        public private(set) var lastDurable: StreamPosition
        /// Sequences handed over and not yet durable, oldest first.
        private var notDurable: [HandedOver] = []
        private var bytesHandedOver = 0
        private var bytesDurable = 0

        /// Audio handed to the file and not yet durable, in bytes.
        public var bytesNotDurable: Int { bytesHandedOver - bytesDurable }

        /// An account that starts durable at `lastDurable`, with nothing handed over yet.
        init(lastDurable: StreamPosition) {
            self.lastDurable = lastDurable
        }

        /// Records `bytes` handed to the file as `sequence` (no bytes for a gap or a marker).
        mutating func handOver(sequence: UInt64, bytes: Int) {
            bytesHandedOver += bytes
            notDurable.append(HandedOver(sequence: sequence, cumulativeBytes: bytesHandedOver))
        }

        /// Records that audio up to `position` is durable; false (and nothing changes) when
        /// `position` is behind the last durable position.
        mutating func madeDurable(_ position: StreamPosition) -> Bool {
            guard position.lastSequence >= lastDurable.lastSequence else { return false }
            lastDurable = position
            while let first = notDurable.first, first.sequence <= position.lastSequence {
                bytesDurable = first.cumulativeBytes
                notDurable.removeFirst()
            }
            return true
        }
    }
}
