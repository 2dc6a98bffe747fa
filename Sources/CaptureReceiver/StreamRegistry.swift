import Foundation

/// The receiver's table of live connections and streams: enforces the stream limit, refuses a
/// second connection for a stream that is already being received, keeps the **detached** streams
/// (unfinalized files whose connection was lost, or found at start-up) so their senders can resume
/// them, and lets shutdown reach every connection and wait until every file is closed.
final class StreamRegistry: @unchecked Sendable {
    enum Reservation: Equatable {
        /// A new stream.
        case reserved
        /// A detached stream comes back: continue the file at `path`.
        case resumable(path: String)
        case busy
        case full
    }

    /// An unfinalized file waiting for its sender.
    struct DetachedStream: Equatable {
        var path: String
        var since: Date
    }

    private let condition = NSCondition()
    private var streams: Set<UUID> = []
    private var detached: [UUID: DetachedStream] = [:]
    private var connections: [ObjectIdentifier: @Sendable () -> Void] = [:]

    /// Records a live connection and how to shut it down; false (and nothing recorded) when
    /// `maximumConnections` are open already.
    func addConnection(_ id: ObjectIdentifier, maximumConnections: Int = .max, shutDown: @escaping @Sendable () -> Void) -> Bool {
        condition.withLock {
            guard connections.count < maximumConnections else { return false }
            connections[id] = shutDown
            return true
        }
    }

    var connectionCount: Int { condition.withLock { connections.count } }

    func removeConnection(_ id: ObjectIdentifier) {
        condition.withLock {
            connections[id] = nil
            condition.broadcast()
        }
    }

    func reserve(_ stream: UUID, maximumStreams: Int) -> Reservation {
        condition.withLock {
            if streams.contains(stream) { return .busy }
            // Resumed streams count against the limit like new ones: a resume is a stream recording.
            if streams.count >= maximumStreams { return .full }
            streams.insert(stream)
            if let resumable = detached.removeValue(forKey: stream) {
                return .resumable(path: resumable.path)
            }
            return .reserved
        }
    }

    /// The stream's connection is gone but its file stays open for a resume: records it as detached
    /// (since `since`) and frees the stream for the next connection.
    func detach(_ stream: UUID, path: String, since: Date = Date()) {
        condition.withLock {
            streams.remove(stream)
            detached[stream] = DetachedStream(path: path, since: since)
            condition.broadcast()
        }
    }

    /// Removes and returns the detached streams detached before `cutoff` (for finalizing).
    func takeDetached(before cutoff: Date) -> [(stream: UUID, path: String)] {
        condition.withLock {
            let expired = detached.filter { $0.value.since < cutoff }
            for key in expired.keys { detached[key] = nil }
            return expired.map { ($0.key, $0.value.path) }
        }
    }

    /// The detached streams now.
    var detachedStreams: [UUID: DetachedStream] { condition.withLock { detached } }

    /// The stream's file is finished (or abandoned); another connection may take the stream.
    func release(_ stream: UUID) {
        condition.withLock {
            streams.remove(stream)
            condition.broadcast()
        }
    }

    var activeStreamCount: Int { condition.withLock { streams.count } }

    /// Asks every connection to shut down.
    func shutDownAll() {
        let all = condition.withLock { Array(connections.values) }
        all.forEach { $0() }
    }

    /// Waits until no stream is open and no connection is left, or until `deadline`; true when empty.
    func waitUntilEmpty(deadline: Date) -> Bool {
        condition.withLock {
            while !(streams.isEmpty && connections.isEmpty) {
                if !condition.wait(until: deadline) { return streams.isEmpty && connections.isEmpty }
            }
            return true
        }
    }
}
