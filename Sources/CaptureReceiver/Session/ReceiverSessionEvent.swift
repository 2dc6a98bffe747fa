import CaptureCore
import CaptureWire
import Foundation

/// What the receiver decided about a valid Hello, after authentication and the stream table.
public enum HelloDecision: Sendable, Equatable {
    /// Accepted by this receiver (authenticated, within the stream limit, not on another of its
    /// connections): open the stream's file, which continues it or creates it.
    case accepted
    /// Refused: send an Error with the refusal's code and words, and close.
    case refused(HelloRefusal)
    /// Refused for now (too many failed authentications from the peer's address): send
    /// RATE_LIMITED with its retry-after, and close.
    case rateLimited(String, retryAfterMilliseconds: UInt32)
}

/// Why a valid Hello was refused for good, as data: the session words it (`message(naming:)`)
/// for the Error frame it sends and for its log, as its settings are named.
public enum HelloRefusal: Sendable, Equatable {
    /// The receiver requires a token and the Hello carries none.
    case missingToken
    /// The Hello's token is not one the receiver accepts.
    case wrongToken
    /// Another connection of this receiver records the stream `streamID`.
    case streamBusy(streamID: UUID)
    /// The receiver records `maximumStreams` streams already (its stream limit).
    case tooManyStreams(maximumStreams: Int)

    /// The protocol error code the refusal is sent with.
    public var code: Capture_V1_Error.Code {
        switch self {
        case .missingToken, .wrongToken: .authenticationFailed
        case .streamBusy: .streamBusy
        case .tooManyStreams: .tooManyStreams
        }
    }

    /// The refusal's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .missingToken:
            "missing token: this receiver requires a token; give capture-send \(naming.name(of: .senderToken, value: "FILE")) or set CAPTURE_TOKEN"
        case .wrongToken:
            "wrong token: the token is not one this receiver accepts; check the sender's \(naming.name(of: .senderToken)) or CAPTURE_TOKEN"
        case .streamBusy(let streamID):
            "stream \(streamID) is already being received on another connection"
        case .tooManyStreams(let maximumStreams):
            "the receiver already records \(maximumStreams) streams; try again later or raise \(naming.name(of: .maximumStreams))"
        }
    }
}

/// What a new stream that says it continues another (`Hello.continues`, PROTOCOL.md §8.1) was
/// found to continue when its file was created.
public enum ContinuationLink: Sendable, Equatable {
    /// Proven: the continued stream's owner is this stream's; its file names the stream it continues.
    /// `fileEnd`: where the continued stream's finished file ends (its index record), which
    /// HelloAccepted reports so the sender can tell a join without a hole from lost audio; nil when
    /// the record names no finished file.
    case linked(UUID, fileEnd: Int64?)
    /// The receiver no longer knows the continued stream, so nothing could be proven: the stream is
    /// recorded as a new one that claims to continue nothing.
    case unverified(UUID)
}

/// Everything that happens to one connection's session at the receiver: what arrives from the
/// network, what the storage reports back, timers and the receiver's own shutdown. The NIO handler
/// turns each into a `ReceiverSession.handle(_:)` call.
public enum ReceiverSessionEvent: Sendable, Equatable {
    /// The frame decoder read and checked the preamble.
    case preambleReceived(version: UInt8)
    /// The frame decoder produced a message, at `atUnixNanoseconds` on the receiver's clock (nil:
    /// no clock, as in tests that do not need one; a gap is then not held to the time that passed).
    case messageReceived(WireMessage, atUnixNanoseconds: Int64? = nil)
    /// The input is not the protocol (bad preamble, oversized or malformed frame, truncated input).
    case inputFailed(WireError)
    /// The answer to `.decide`: carries on the handshake or refuses it.
    case helloDecided(HelloDecision)
    /// The stream's file is open at `path` (an unfinished file continued when `resumed`, else
    /// created, and `naming` says how when its natural name was taken; `continuation` what a new
    /// stream was found to continue); the sender continues at `resume`.
    case fileOpened(path: String, resume: StreamPosition, resumed: Bool, naming: FileNaming? = nil, continuation: ContinuationLink? = nil)
    /// The stream's file could not be created or reopened.
    case fileOpenFailed(StorageError)
    /// Audio up to `position` is durably on disk.
    case durable(StreamPosition)
    /// Writing or syncing the stream's file failed; nothing after the last durable position counts.
    /// `file` is the file it failed on (nil: the file being written).
    case storageFailed(StorageError, file: String? = nil)
    /// A segment file began at `path` (`--segment`); `naming` says how it was named when its
    /// natural name was taken.
    case segmentStarted(path: String, naming: FileNaming?)
    /// The answer to `.finishFile`: the file is complete, or could not be finished.
    case fileFinished(Result<FinishedFile, StorageError>)
    /// The answer to `.releaseFile`: for `.finalizeIncomplete`, the finished file or why it failed;
    /// otherwise `.success(nil)` once the file is closed and resumable.
    case fileReleased(Result<FinishedFile?, StorageError>)
    /// The handshake (preamble, Hello, opening the file) took longer than allowed.
    case handshakeTimedOut
    /// Nothing was read for the idle timeout.
    case readIdle
    /// Nothing was written for the heartbeat interval; `unixNanoseconds` is the time now.
    case writeIdle(unixNanoseconds: Int64)
    /// The transport failed (a socket error); `reason` says why in the user's words.
    case transportFailed(reason: String)
    /// The transport failed in a way it already explained (a TLS handshake): close without another word.
    case closeQuietly
    /// The transport refused the connection itself and closes it (a plaintext client on a TLS port,
    /// a port probe): send nothing more.
    case closedByTransport
    /// The connection is closed (both directions); nothing more can be sent.
    case connectionClosed
    /// The receiver shuts down: tell the sender and let go of the file, keeping it resumable.
    case shutdownRequested
}
