import CaptureCore
import CaptureListen
import CaptureReceiver
import Foundation

/// The receiver's live streams, made listenable by the console's registry: each accepted stream
/// gets a `ListenHub` (when its format can be listened to), registered for the listen endpoint
/// while its connection streams. Wired here, where both modules meet, so that neither depends on
/// the other.
extension LiveListeningRegistry: StreamListening {
    public func streamStarted(_ id: UUID, format: StreamFormat, magicCookie: [UInt8]) -> (any ListeningFeed)? {
        // A format the listen encoder cannot read is simply not listenable; the recording goes on.
        guard let hub = try? ListenHub(format: format, magicCookie: magicCookie) else { return nil }
        register(hub, for: id)
        return RegisteredHub(registry: self, hub: hub, stream: id)
    }
}

/// A stream's hub while its connection streams: what arrives goes to the hub; the end removes it
/// from the registry and ends its listeners' audio.
private final class RegisteredHub: ListeningFeed {
    private let registry: LiveListeningRegistry
    private let hub: ListenHub
    private let stream: UUID

    init(registry: LiveListeningRegistry, hub: ListenHub, stream: UUID) {
        self.registry = registry
        self.hub = hub
        self.stream = stream
    }

    func offer(payload: Data, packetSizes: [UInt32], frameCount: Int) {
        hub.offer(payload: payload, packetSizes: packetSizes, frameCount: frameCount)
    }

    func end() {
        registry.remove(hub, for: stream)
    }
}
