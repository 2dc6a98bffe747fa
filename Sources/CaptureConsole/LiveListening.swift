import Foundation
import NIOCore

/// Live audio of the receiver's streams for listeners (the console's play buttons): an Ogg Opus
/// byte stream starting at the live edge, or nil when the stream is not live here.
public protocol LiveListening: Sendable {
    func listen(to stream: UUID) -> AsyncThrowingStream<ByteBuffer, any Error>?
}
