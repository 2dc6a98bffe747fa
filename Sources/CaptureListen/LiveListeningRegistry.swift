import Foundation
import Synchronization

/// The live streams of a receiver that can be listened to: one `ListenHub` per stream while its
/// connection streams, offered every AudioData as it arrives (which costs one atomic load while
/// nobody listens). The receiver feeds it through its `StreamListening` protocol (wired in the
/// console module); the console's listen endpoint asks it for a listener.
///
/// Sendability: `hubs` is in a `Mutex`.
public final class LiveListeningRegistry: Sendable {
    private let hubs = Mutex<[UUID: ListenHub]>([:])

    public init() {}

    /// Registers the hub of a stream that started streaming (replacing an older connection's).
    public func register(_ hub: ListenHub, for stream: UUID) {
        let previous = hubs.withLock { $0.updateValue(hub, forKey: stream) }
        previous?.finish()
    }

    /// The stream stopped streaming here: its listeners' audio ends.
    public func remove(_ hub: ListenHub, for stream: UUID) {
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
