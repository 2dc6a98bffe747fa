import CaptureReceiver
import Foundation
import NIOCore

/// The stream directory's events as a Server-Sent Events body (`text/event-stream`): one
/// `event: NAME` / `data: JSON` block per event, a comment every `heartbeat` so proxies and browsers
/// keep an idle connection open (and a client that went away is noticed), and an end when the
/// subscriber falls behind (the directory drops it, never buffering without bound).
enum ServerSentEvents {
    /// What the response writes, in order; ends when the feed ends or falls behind.
    static func chunks(
        from events: AsyncThrowingStream<StreamEvent, any Error>, heartbeat: Duration = .seconds(15)
    ) -> AsyncStream<ByteBuffer> {
        // Bounded: when the client does not read, this fills and the subscription ends.
        let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self, bufferingPolicy: .bufferingOldest(256))
        let forwarding = Task {
            continuation.yield(ByteBuffer(string: "retry: 2000\n\n"))
            do {
                for try await event in events {
                    guard case .enqueued = continuation.yield(try block(for: event)) else { break }
                }
            } catch {
                // The directory dropped a subscriber that fell behind: the response ends, and the
                // client reconnects and reads the streams afresh.
            }
            continuation.finish()
        }
        let beating = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: heartbeat)
                guard !Task.isCancelled, case .enqueued = continuation.yield(ByteBuffer(string: ": keep-alive\n\n")) else { break }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in
            forwarding.cancel()
            beating.cancel()
        }
        return stream
    }

    /// One event's block.
    static func block(for event: StreamEvent) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeString("event: \(event.name)\ndata: ")
        buffer.writeBytes(try event.encodedPayload())
        buffer.writeString("\n\n")
        return buffer
    }
}
