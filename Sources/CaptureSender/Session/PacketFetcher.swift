import NIOCore
import NIOPosix

/// Reads a session's next entries from the packet log without blocking the event loop: entries
/// still in memory are taken at once; anything the spool must read back is read on `pool`, a
/// `NIOThreadPool` (the spool's writer may hold its lock across a write and a segment rename, and a
/// resend after an outage reads for long). The future completes on the session's event loop.
struct PacketFetcher: Sendable {
    let log: PacketLog
    /// Where spool reads run; nil only in tests that drive a session on an `EmbeddedEventLoop`,
    /// which then reads on the calling thread.
    let pool: NIOThreadPool?

    func fetch(from sequence: UInt64, maxCount: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[LoggedPacket]> {
        let inMemory = log.entriesInMemory(from: sequence, maxCount: maxCount)
        if !inMemory.isEmpty { return eventLoop.makeSucceededFuture(inMemory) }
        let log = self.log
        guard let pool else {
            return eventLoop.makeCompletedFuture { try log.entries(from: sequence, maxCount: maxCount) }
        }
        return pool.runIfActive(eventLoop: eventLoop) { try log.entries(from: sequence, maxCount: maxCount) }
    }
}
