import CaptureCore
import Foundation

/// Where a receiver's live streams can be heard (the console's play buttons): each stream accepted
/// on a connection is offered to it, and its audio follows. Defined here so that the recording core
/// does not depend on the listening pipeline (Opus, Ogg, resampling); the console module wires
/// `CaptureListen.LiveListeningRegistry` to it. Nil in `ReceiverConfiguration.listening` when the
/// receiver serves no listening.
public protocol StreamListening: Sendable {
    /// The stream `id` started streaming on a connection, in `format` (with its codec's
    /// `magicCookie`): its feed for listeners, or nil when that format cannot be listened to (the
    /// recording goes on all the same).
    func streamStarted(_ id: UUID, format: StreamFormat, magicCookie: [UInt8]) -> (any ListeningFeed)?
}

/// One connection's feed of a stream to its listeners, used on the connection's event loop only.
public protocol ListeningFeed: AnyObject {
    /// One AudioData's packets, as they arrived.
    func offer(payload: Data, packetSizes: [UInt32], frameCount: Int)
    /// The connection let go of the stream: its listeners' audio ends.
    func end()
}

/// The session handler's hook into live listening: it starts the stream's feed when the session
/// announces the stream accepted, offers it every AudioData, and ends it when the connection lets
/// go of the stream. It changes nothing it sees. Used on the connection's event loop only.
final class SessionListenTap {
    private let listening: any StreamListening
    private var feed: (any ListeningFeed)?

    init(listening: any StreamListening) {
        self.listening = listening
    }

    func observe(_ action: ReceiverSessionAction) {
        switch action {
        case .write(let audio):
            feed?.offer(payload: audio.payload, packetSizes: audio.packetSizes, frameCount: audio.frameCount)
        case .streamAccepted(let accepted):
            let hello = accepted.hello
            feed = listening.streamStarted(hello.streamID, format: hello.format, magicCookie: Array(hello.message.magicCookie))
        case .finishFile, .releaseFile, .streamReleased:
            end()
        default:
            break
        }
    }

    /// Ends listening to this connection's stream (also when the handler goes away).
    func end() {
        feed?.end()
        feed = nil
    }

    deinit { end() }
}
