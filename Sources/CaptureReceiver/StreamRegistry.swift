import Foundation

/// The receiver's table of live connections and streams: enforces the stream limit, refuses a
/// second connection for a stream that is already being received, and lets shutdown reach every
/// connection and wait until every file is finished.
final class StreamRegistry: @unchecked Sendable {
    enum Reservation { case reserved, busy, full }

    private let condition = NSCondition()
    private var streams: Set<UUID> = []
    private var connections: [ObjectIdentifier: @Sendable () -> Void] = [:]

    /// Records a live connection and how to shut it down.
    func addConnection(_ id: ObjectIdentifier, shutDown: @escaping @Sendable () -> Void) {
        condition.withLock { connections[id] = shutDown }
    }

    func removeConnection(_ id: ObjectIdentifier) {
        condition.withLock {
            connections[id] = nil
            condition.broadcast()
        }
    }

    func reserve(_ stream: UUID, maximumStreams: Int) -> Reservation {
        condition.withLock {
            if streams.contains(stream) { return .busy }
            if streams.count >= maximumStreams { return .full }
            streams.insert(stream)
            return .reserved
        }
    }

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
