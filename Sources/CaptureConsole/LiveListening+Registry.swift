import CaptureListen
import CaptureReceiver
import Foundation
import NIOCore

extension LiveListeningRegistry: LiveListening {
    /// The listener's Ogg pages as HTTP body chunks; the listener is cancelled when the client goes.
    /// Bounded twice: the hub drops a listener more than 2 s behind, and a client that does not take
    /// the chunks handed to it (64 waiting) is dropped here, never buffered without bound.
    public func listen(to stream: UUID) -> AsyncThrowingStream<ByteBuffer, any Error>? {
        guard let listener: Listener = listen(to: stream) else { return nil }
        return AsyncThrowingStream(bufferingPolicy: .bufferingOldest(64)) { continuation in
            let forwarding = Task {
                for await pages in listener {
                    guard case .enqueued = continuation.yield(ByteBuffer(bytes: pages)) else {
                        listener.cancel()
                        break
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in
                listener.cancel()
                forwarding.cancel()
            }
        }
    }
}
