import CaptureListen
import Foundation
import Synchronization

/// The live streams of this receiver that can be listened to: one `ListenHub` per stream while its
/// connection streams, offered every AudioData as it arrives (which costs one atomic load while
/// nobody listens). The console's listen endpoint asks it for a listener.
///
/// Sendability: `hubs` is in a `Mutex`.
public final class LiveListeningRegistry: Sendable {
    private let hubs = Mutex<[UUID: ListenHub]>([:])

    public init() {}

    /// Registers the hub of a stream that started streaming (replacing an older connection's).
    func register(_ hub: ListenHub, for stream: UUID) {
        let previous = hubs.withLock { $0.updateValue(hub, forKey: stream) }
        previous?.finish()
    }

    /// The stream stopped streaming here: its listeners' audio ends.
    func remove(_ hub: ListenHub, for stream: UUID) {
        hubs.withLock { hubs in
            if hubs[stream] === hub { hubs[stream] = nil }
        }
        hub.finish()
    }

    /// A new listener of `stream`, starting at its live edge; nil when the stream is not live here.
    public func listen(to stream: UUID) -> Listener? {
        guard let hub = hubs.withLock({ $0[stream] }) else { return nil }
        return try? hub.listen()
    }

    /// Streams that can be listened to now.
    public var count: Int { hubs.withLock { $0.count } }
}

/// The session handler's hook into live listening: it creates the stream's hub when the stream is
/// accepted, offers it every AudioData, and ends it when the connection lets go of the stream. It
/// changes nothing it sees. Used on the connection's event loop only.
final class SessionListenTap {
    private let registry: LiveListeningRegistry
    private var hub: ListenHub?
    private var stream: UUID?

    init(registry: LiveListeningRegistry) {
        self.registry = registry
    }

    func observe(_ action: ReceiverSessionAction) {
        switch action {
        case .write(let audio):
            hub?.offer(payload: audio.payload, packetSizes: audio.packetSizes, frameCount: audio.frameCount)
        case .streamAccepted(let accepted):
            let hello = accepted.hello
            // A format the listen encoder cannot read is simply not listenable; the recording goes on.
            guard let hub = try? ListenHub(format: hello.format, magicCookie: Array(hello.message.magicCookie)) else { return }
            self.hub = hub
            stream = hello.streamID
            registry.register(hub, for: hello.streamID)
        case .finishFile, .releaseFile, .streamReleased:
            end()
        default:
            break
        }
    }

    /// Ends listening to this connection's stream (also when the handler goes away).
    func end() {
        guard let hub, let stream else { return }
        registry.remove(hub, for: stream)
        self.hub = nil
        self.stream = nil
    }

    deinit { end() }
}
