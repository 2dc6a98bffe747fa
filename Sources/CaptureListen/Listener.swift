import Synchronization

/// One person listening to a stream: an asynchronous sequence of byte chunks that together form a
/// complete Ogg Opus stream (RFC 7845), starting near the live edge, to be sent as an HTTP response
/// body (`audio/ogg`) as they come.
///
/// The sequence ends when the stream ends, when the listener falls more than the hub's bound behind
/// (it is dropped, its unread audio discarded), or when it is cancelled; `endReason` says which.
/// Cancel it (or cancel the task iterating it, or release it) when the client goes away. Iterate it
/// from one task at a time.
public final class Listener: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    /// The listener's number, unique within its hub.
    public let id: Int
    private let channel: ListenerChannel

    init(id: Int, channel: ListenerChannel) {
        self.id = id
        self.channel = channel
    }

    deinit { channel.end(.cancelled) }

    /// Why the audio ended; nil while it goes on.
    public var endReason: ListenEndReason? { channel.endReason }

    /// Stops listening: the sequence ends and the hub forgets the listener.
    public func cancel() { channel.end(.cancelled) }

    public func makeAsyncIterator() -> Iterator { Iterator(listener: self) }

    /// Gives the listener's chunks in order.
    public struct Iterator: AsyncIteratorProtocol {
        let listener: Listener

        public mutating func next() async -> [UInt8]? {
            await listener.channel.next()
        }
    }
}

/// The bounded queue between the hub's executor and one listener's reader. The executor never
/// waits on it: `deliver` either queues a chunk or, past the bound, ends the channel.
final class ListenerChannel: Sendable {
    private struct Chunk {
        var bytes: [UInt8]
        var samples: Int
    }

    private struct State {
        var chunks: [Chunk] = []
        var head = 0
        var queuedSamples = 0
        var endReason: ListenEndReason?
        var waiter: CheckedContinuation<[UInt8]?, Never>?
        var endReported = false

        mutating func pop() -> Chunk? {
            guard head < chunks.count else { return nil }
            let chunk = chunks[head]
            chunks[head] = Chunk(bytes: [], samples: 0)
            head += 1
            if head > 32, head * 2 > chunks.count {
                chunks.removeFirst(head)
                head = 0
            }
            queuedSamples -= chunk.samples
            return chunk
        }
    }

    /// The most samples (48 kHz) of audio that may wait unread.
    let boundSamples: Int
    /// The bound as it was set (`ListenLimits.listenerBacklog`): what the listener is told when dropped.
    let bound: Duration
    private let state = Mutex(State())
    /// Called once, when the channel ends for a reason the hub did not cause itself (cancellation).
    private let onCancel: @Sendable () -> Void

    init(bound: Duration, onCancel: @escaping @Sendable () -> Void) {
        self.boundSamples = ListenLimits.samples(in: bound)
        self.bound = bound
        self.onCancel = onCancel
    }

    var endReason: ListenEndReason? { state.withLock { $0.endReason } }

    /// Queues a chunk carrying `samples` of audio; false when the channel has ended (now or before),
    /// in which case the hub forgets the listener. Never blocks.
    func deliver(_ bytes: [UInt8], samples: Int) -> Bool {
        guard !bytes.isEmpty else { return endReason == nil }
        let (accepted, waiter, chunk) = state.withLock { state -> (Bool, CheckedContinuation<[UInt8]?, Never>?, [UInt8]?) in
            guard state.endReason == nil else { return (false, nil, nil) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (true, waiter, bytes)
            }
            guard state.queuedSamples + samples <= boundSamples else {
                state.endReason = .tooSlow(bound: bound)
                state.chunks = []
                state.head = 0
                state.queuedSamples = 0
                return (false, nil, nil)
            }
            state.chunks.append(Chunk(bytes: bytes, samples: samples))
            state.queuedSamples += samples
            return (true, nil, nil)
        }
        waiter?.resume(returning: chunk)
        return accepted
    }

    /// Ends the channel with `reason` unless it has ended already. `.streamEnded` lets the reader
    /// finish what is queued; any other reason discards it. Cancellation is reported to the hub.
    func end(_ reason: ListenEndReason) {
        let (waiter, ended) = state.withLock { state -> (CheckedContinuation<[UInt8]?, Never>?, Bool) in
            guard state.endReason == nil else { return (nil, false) }
            state.endReason = reason
            if reason != .streamEnded {
                state.chunks = []
                state.head = 0
                state.queuedSamples = 0
            }
            let waiter = state.waiter
            state.waiter = nil
            return (waiter, true)
        }
        waiter?.resume(returning: nil)
        if ended, reason == .cancelled { onCancel() }
    }

    /// The next chunk, waiting for one; nil once the channel has ended and is drained.
    func next() async -> [UInt8]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8]?, Never>) in
                let ready = state.withLock { state -> [UInt8]?? in
                    if let chunk = state.pop() { return .some(chunk.bytes) }
                    if state.endReason != nil { return .some(nil) }
                    state.waiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            end(.cancelled)
        }
    }
}
