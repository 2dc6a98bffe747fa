import Foundation

/// The receiver's table of live connections and streams: enforces the stream limit, refuses a
/// second connection for a stream that is already being received here, and lets shutdown reach
/// every connection and wait until every file is closed. Streams waiting for their sender to
/// resume them are not kept here but on disk, in the output folder's `StreamIndex`, where every
/// receiver sharing the folder finds them.
///
/// Stays an `NSCondition`: `waitUntilEmpty` blocks the shutting-down thread until the last stream
/// is released and the last connection removed (`release` and `removeConnection` broadcast).
///
/// Sendability (`@unchecked Sendable`): `streams` and `connections` are read and written only under `condition`.
final class StreamRegistry: @unchecked Sendable {
    enum Reservation: Equatable {
        /// The stream may be recorded here (new, or resumed).
        case reserved
        /// Another connection of this receiver records it.
        case busy
        /// The stream limit is reached.
        case full
    }

    private let condition = NSCondition()
    private var streams: Set<UUID> = []
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
            return .reserved
        }
    }

    /// The stream's file is closed here (finished, released for a resume, or never opened); another
    /// connection may take the stream.
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
