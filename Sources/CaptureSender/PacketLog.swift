import CaptureCodecs
import Foundation

/// One entry of the packet log: audio packets or a gap, with its sequence number.
public struct LoggedPacket: Sendable, Equatable {
    /// What the entry carries.
    public enum Content: Sendable, Equatable {
        /// Encoded audio.
        case audio(EncodedPackets)
        /// Audio that was not captured: `length` frames at `sampleTime`, for `reason`.
        case gap(sampleTime: Int64, length: Int64, reason: String)
    }

    /// 1, 2, 3... without holes.
    public var sequence: UInt64
    /// The entry.
    public var content: Content

    /// Bytes the entry holds in memory (its payload).
    public var byteCount: Int {
        if case .audio(let packets) = content { return packets.payload.count }
        return 0
    }

    /// The sample index just past the entry.
    public var endSampleTime: Int64 {
        switch content {
        case .audio(let packets): return packets.firstSampleTime + Int64(packets.frameCount)
        case .gap(let sampleTime, let length, _): return sampleTime + length
        }
    }
}

/// How a stream ended, as the log records it for the end-of-stream message.
public struct StreamEnd: Sendable, Equatable {
    /// The sample index just past the last frame.
    public var endSampleTime: Int64
    /// Padding frames at the end of the last packet (VBR).
    public var remainderFrames: Int
    /// Why the stream ended ("duration", "end-of-file", "interrupted"...).
    public var reason: String
}

/// The sender's packet log: every packet from the encoder, numbered, kept until the receiver
/// acknowledges it as durably written. The encoder side appends (on the queue's delivery thread);
/// the network side reads from it and acknowledges.
///
/// A real-time source never waits here: its packets are kept whatever the backlog. A source that is
/// not real time (a file read as fast as possible) waits in `append` while more than `memoryLimit`
/// bytes are unacknowledged, so reading a long file does not fill memory.
public final class PacketLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var entries: [LoggedPacket] = []
    /// Index in `entries` of the oldest kept entry (entries before it are released).
    private var head = 0
    private var nextSequence: UInt64 = 1
    private var acknowledged: UInt64 = 0
    private var heldBytes = 0
    private var end: StreamEnd?
    private var closed = false
    private var listeners: [@Sendable () -> Void] = []

    /// Unacknowledged bytes above which a non-real-time producer waits.
    public let memoryLimit: Int
    /// Whether the producer is real time (never waits).
    public let producerIsRealTime: Bool

    public init(memoryLimit: Int = 8 << 20, producerIsRealTime: Bool) {
        self.memoryLimit = memoryLimit
        self.producerIsRealTime = producerIsRealTime
    }

    /// Calls `listener` (from the appending thread) whenever an entry is appended or the stream ends.
    public func addListener(_ listener: @escaping @Sendable () -> Void) {
        condition.withLock { listeners.append(listener) }
    }

    /// Appends encoded audio; returns its sequence number. A non-real-time producer may wait here.
    @discardableResult
    public func append(_ packets: EncodedPackets) -> UInt64 {
        append(.audio(packets), bytes: packets.payload.count)
    }

    /// Appends a gap of `length` frames at `sampleTime`; returns its sequence number.
    @discardableResult
    public func appendGap(sampleTime: Int64, length: Int64, reason: String) -> UInt64 {
        append(.gap(sampleTime: sampleTime, length: length, reason: reason), bytes: 0)
    }

    private func append(_ content: LoggedPacket.Content, bytes: Int) -> UInt64 {
        condition.lock()
        if !producerIsRealTime {
            while heldBytes > memoryLimit && !closed { condition.wait() }
        }
        let sequence = nextSequence
        nextSequence += 1
        entries.append(LoggedPacket(sequence: sequence, content: content))
        heldBytes += bytes
        let toNotify = listeners
        condition.unlock()
        toNotify.forEach { $0() }
        return sequence
    }

    /// Forgets every listener (the network side that registered them is gone).
    public func removeListeners() {
        condition.withLock { listeners.removeAll() }
    }

    /// Records the end of the stream; no entry may follow.
    public func finish(_ streamEnd: StreamEnd) {
        let toNotify: [@Sendable () -> Void] = condition.withLock {
            end = streamEnd
            return listeners
        }
        toNotify.forEach { $0() }
    }

    /// Releases every entry up to and including `sequence`: the receiver holds them durably.
    /// Stale acknowledgements (at or below an earlier one) change nothing.
    public func acknowledge(through sequence: UInt64) {
        condition.withLock {
            guard sequence > acknowledged else { return }
            acknowledged = min(sequence, nextSequence - 1)
            while head < entries.count, entries[head].sequence <= acknowledged {
                heldBytes -= entries[head].byteCount
                head += 1
            }
            // Drop released entries as soon as they are half the array, so acknowledged audio does
            // not stay in memory (each entry may hold a whole capture buffer).
            if head >= 16, head * 2 >= entries.count {
                entries.removeFirst(head)
                head = 0
            }
            condition.broadcast()
        }
    }

    /// Stops making producers wait (the stream is being torn down).
    public func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Up to `maxCount` kept entries starting at `sequence` (which must not be acknowledged yet).
    public func entries(from sequence: UInt64, maxCount: Int) -> [LoggedPacket] {
        condition.withLock {
            guard let first = entries[head...].first?.sequence, sequence >= first else { return [] }
            let start = head + Int(sequence - first)
            guard start < entries.count else { return [] }
            return Array(entries[start..<min(entries.count, start + maxCount)])
        }
    }

    /// The highest acknowledged sequence (0 before any).
    public var acknowledgedSequence: UInt64 { condition.withLock { acknowledged } }
    /// The highest sequence appended (0 before any).
    public var lastSequence: UInt64 { condition.withLock { nextSequence - 1 } }
    /// The oldest sequence still kept (the next to be acknowledged).
    public var oldestKeptSequence: UInt64 { condition.withLock { acknowledged + 1 } }
    /// Bytes kept in memory, not yet acknowledged.
    public var unacknowledgedBytes: Int { condition.withLock { heldBytes } }
    /// The end of the stream, once recorded.
    public var streamEnd: StreamEnd? { condition.withLock { end } }
    /// Whether the stream ended and every entry was acknowledged.
    public var isComplete: Bool { condition.withLock { end != nil && acknowledged == nextSequence - 1 } }
}
