import CAF
import CaptureCore
import CaptureCodecs
import CaptureWire
import Foundation

/// One entry of the packet log: audio packets, a gap, a filled gap or a marker, with its sequence number.
public struct LoggedPacket: Sendable, Equatable {
    /// What the entry carries.
    public enum Content: Sendable, Equatable {
        /// Encoded audio.
        case audio(EncodedPackets)
        /// Audio that was not captured: `length` frames at `sampleTime`, for `reason`.
        case gap(sampleTime: Int64, length: Int64, reason: String)
        /// A point the person recording marked, at `sampleTime`, with an optional `label`: it
        /// covers no frames.
        case marker(sampleTime: Int64, label: String)
        /// Audio that was not captured and that the packets before it carry as encoded silence (an
        /// encoder that fills lost frames, `AudioEncoder.fillsLostFrames`): `length` frames from
        /// `sampleTime`, for `reason`. It covers no frames of the timeline: it stands at `position`,
        /// where the timeline stood when it was appended, at or after `sampleTime`.
        case filledGap(position: Int64, sampleTime: Int64, length: Int64, reason: String)
    }

    /// 1, 2, 3... without holes.
    public var sequence: UInt64
    /// The entry.
    public var content: Content
    /// The levels of the captured audio this entry's packets carry (AudioData `levels`); nil for
    /// gaps and for entries read back from the spool, which does not keep levels.
    public var levels: AudioLevels?

    public init(sequence: UInt64, content: Content, levels: AudioLevels? = nil) {
        self.sequence = sequence
        self.content = content
        self.levels = levels
    }

    /// Bytes the entry holds in memory (its payload).
    public var byteCount: Int {
        if case .audio(let packets) = content { return packets.payload.count }
        return 0
    }

    /// The sample index just past the entry.
    /// The sample index of the entry's first frame (of the gap's start).
    public var firstSampleTime: Int64 {
        switch content {
        case .audio(let packets): return packets.firstSampleTime
        case .gap(let sampleTime, _, _): return sampleTime
        case .marker(let sampleTime, _): return sampleTime
        case .filledGap(let position, _, _, _): return position
        }
    }

    public var endSampleTime: Int64 {
        switch content {
        case .audio(let packets): return packets.firstSampleTime + Int64(packets.frameCount)
        case .gap(let sampleTime, let length, _): return sampleTime + length
        case .marker(let sampleTime, _): return sampleTime
        case .filledGap(let position, _, _, _): return position
        }
    }
}

/// Something the user must be told about the log's storage (the CLI logs these loudly).
public enum PacketLogEvent: Sendable, Equatable {
    /// The log is full (`--spool-max`): captured audio now goes to the overflow file at `path`.
    case overflowStarted(path: String)
    /// The overflow episode ended: `frames` frames are in `path`, and the stream carries a Gap naming it.
    case overflowEnded(path: String, frames: Int64)
    /// Audio could not be kept at all (the overflow file failed too): it is lost, and a Gap says so.
    case audioLost(reason: String)
    /// The disk spool failed: audio stays in memory only (it would not survive a crash of the sender).
    case spoolFailed(reason: String)
}

/// One of a packet log's destinations (receivers), each with its own acknowledgement cursor:
/// `main` is the receiver the stream is sent to, `backup(1)`, `backup(2)`... the `--also` receivers.
public struct LogDestination: Hashable, Sendable, CustomStringConvertible {
    /// 0 for the main receiver, 1... for the backups in the order given.
    public let index: Int

    /// The receiver the stream is sent to.
    public static let main = LogDestination(index: 0)

    /// The `number`th backup receiver (from 1).
    public static func backup(_ number: Int) -> LogDestination { LogDestination(index: number) }

    public var description: String { index == 0 ? "main" : "backup \(index)" }
}

/// The sender's packet log: every packet from the encoder, numbered, kept until every destination
/// (the receiver and any backup receivers) acknowledges it as durably written. The encoder side appends (on the queue's delivery thread);
/// the network side reads from it and acknowledges.
///
/// With a `StreamSpool`, every entry is also written to disk (on a queue of its own, fdatasync at
/// most every second). Once spooled, an entry that has been sent (`markSent`), or any entry beyond
/// `memoryLimit` bytes, is dropped from memory; it is read back from the spool if it must be sent
/// (again, after a reconnect). A restarted sender delivers what the spool holds.
///
/// Each destination has its own cursor: what it acknowledged and what was sent to it. An entry
/// leaves the log (and the spool) once every destination that has not been dropped
/// (`dropDestination`) acknowledged it; a payload leaves memory once it is spooled and was sent to
/// every such destination.
///
/// A real-time source never waits here. When more than `capacity` bytes are unacknowledged (the
/// receiver has been unreachable too long), new audio goes to an `OverflowRecorder` file instead and
/// the stream gets a Gap naming that file once the log has room again (at half its capacity). A
/// source that is not real time (a file read as fast as possible) waits in `append` instead, while
/// the main receiver has more than `memoryLimit` bytes unacknowledged (or, with a spool, while more
/// than that waits in memory for the disk).
///
/// The log's room is the main receiver's (`BackupRoom`): before each append, a backup whose backlog
/// would make the main overflow, or make the source wait, is given up at once (its cursor dropped,
/// `givenUpRoom(for:)` says why, and the drop listeners are told, so that its sender ends). Without
/// a spool a fast source's backups may fall `memoryLimit` behind; with one, `capacity`.
///
/// Sendability (`@unchecked Sendable`): every mutable field but `syncScheduled` and
/// `holdsCapturedAudio` is read and written only under `condition` (stays a condition: with a
/// source that is not real time, every append waits on it for room, on the capture queue's delivery
/// thread or a marker's thread, until an acknowledgement, a spool write, a spool failure or `close`
/// broadcasts); `syncScheduled` is touched on `spoolQueue` only, `holdsCapturedAudio` is set in
/// `init` only; the spool is written on `spoolQueue` and is thread-safe itself; the overflow
/// recorder is used by the producer only (`OverflowRecorder`).
public final class PacketLog: @unchecked Sendable {
    private struct Slot {
        var sequence: UInt64
        var packet: LoggedPacket?
        var location: SpoolLocation?
        var bytes: Int
        /// The sample index just past the entry (0 when not known, as for recovered entries).
        var endSample: Int64 = 0
        /// When the entry was appended (`MonotonicClock` nanoseconds; for recovered entries, when
        /// they were read back).
        var appendedAt: UInt64 = 0
    }

    /// Where one destination stands.
    private struct Cursor {
        /// The highest sequence it acknowledged.
        var acknowledged: UInt64
        /// The highest sequence sent to it.
        var sentThrough: UInt64 = 0
        /// The sample index just past the newest entry it acknowledged in this run.
        var acknowledgedEnd: Int64 = 0
        /// Bytes it has not acknowledged.
        var heldBytes = 0
        /// When it last reported its durable position.
        var lastAcknowledgedAt: UInt64?
        /// When its acknowledged position last advanced (its progress).
        var lastAdvancedAt: UInt64?
        /// Dropped: it no longer holds entries in the log.
        var dropped = false
        /// Why the log gave it up by itself (its backlog reached the room), if it did.
        var givenUp: BackupRoom?
    }

    private struct Overflow {
        var path: String?
        var start: Int64
        var end: Int64
    }

    private let condition = NSCondition()
    private var slots: [Slot] = []
    /// Index in `slots` of the oldest kept entry (entries before it are released).
    private var head = 0
    private var nextSequence: UInt64 = 1
    /// The highest sequence every destination still served acknowledged: entries up to it are released.
    private var acknowledged: UInt64 = 0
    /// The highest sequence sent to every destination still served (`markSent`).
    private var sentThrough: UInt64 = 0
    /// Each destination's cursor, by `LogDestination.index`.
    private var cursors: [Cursor]
    /// Unacknowledged payload bytes, wherever they are kept.
    private var heldBytes = 0
    private var appendedBytesTotal: Int64 = 0
    private var appendedEnd: Int64 = 0
    private var acknowledgedEnd: Int64 = 0
    /// Unacknowledged payload bytes held in memory.
    private var memoryBytes = 0
    private var end: StreamEnd?
    private var closed = false
    /// Copied (not rebuilt) for each notification: an array shares its storage until written.
    private var listeners: [(id: UInt64, call: @Sendable () -> Void)] = []
    private var dropListeners: [(id: UInt64, call: @Sendable (LogDestination, BackupRoom) -> Void)] = []
    private var nextListener: UInt64 = 0
    private var overflow: Overflow?
    private var spoolFailureReported = false
    /// Producers waiting in `append` for room (a source that is not real time).
    private var producersWaiting = 0
    // Touched on `spoolQueue` only.
    private var syncScheduled = false

    /// Unacknowledged bytes kept in memory at most (more is read back from the spool, and sent
    /// entries are not kept once spooled); for a non-real-time producer, the backlog above which it
    /// waits.
    public let memoryLimit: Int
    /// Unacknowledged bytes kept at most (`--spool-max`) before audio overflows to a local file.
    public let capacity: Int
    /// Whether the producer is real time (never waits).
    public let producerIsRealTime: Bool
    /// The disk spool, if any.
    public let spool: StreamSpool?
    private let overflowRecorder: OverflowRecorder?
    /// `--spool-max` shared with the capture's other encodings; nil: `capacity` is this log's own.
    private let budget: SpoolBudget?
    private let events: @Sendable (PacketLogEvent) -> Void
    private let spoolQueue = DispatchQueue(label: "packet-log spool")

    /// The default `memoryLimit`: 3 MiB, 16 s of 48 kHz 16-bit stereo PCM. It must exceed what the
    /// receiver acknowledges in one batch (it syncs every 2 MiB); more buys no throughput, only a
    /// larger resident sender when a file is read faster than real time.
    public static let defaultMemoryLimit = 3 << 20

    /// A log for a new stream, in memory only or with a disk spool.
    /// `destinations`: how many receivers the stream goes to (`LogDestination.main` and the backups).
    public init(
        memoryLimit: Int = PacketLog.defaultMemoryLimit, producerIsRealTime: Bool, spool: StreamSpool? = nil, capacity: Int = 1 << 30,
        overflow: OverflowRecorder? = nil, destinations: Int = 1, budget: SpoolBudget? = nil,
        events: @escaping @Sendable (PacketLogEvent) -> Void = { _ in }
    ) {
        self.budget = budget
        cursors = Array(repeating: Cursor(acknowledged: 0), count: max(1, destinations))
        self.memoryLimit = memoryLimit
        self.producerIsRealTime = producerIsRealTime
        self.spool = spool
        self.capacity = max(capacity, 1)
        self.overflowRecorder = overflow
        self.events = events
    }

    /// The log of an earlier stream, read back from its spool after a restart, ready to deliver.
    /// When capture never recorded an end (the sender was killed), the stream ends after its last
    /// spooled entry with reason "sender-restarted".
    public convenience init(recovering spool: StreamSpool, memoryLimit: Int = PacketLog.defaultMemoryLimit) throws(SpoolError) {
        let contents = try spool.contents()
        self.init(memoryLimit: memoryLimit, producerIsRealTime: true, spool: spool)
        let now = MonotonicClock.nanoseconds()
        slots = contents.entries.map { Slot(sequence: $0.sequence, packet: $0.replacement, location: $0.location, bytes: $0.bytes, endSample: $0.endSampleTime, appendedAt: now) }
        heldBytes = contents.entries.reduce(0) { $0 + $1.bytes }
        acknowledged = (contents.entries.first?.sequence ?? (contents.acknowledged + 1)) - 1
        cursors = [Cursor(acknowledged: acknowledged, heldBytes: heldBytes)]
        nextSequence = (contents.entries.last?.sequence ?? acknowledged) + 1
        end = contents.end ?? StreamEnd(lastSequence: nextSequence - 1, endSampleTime: contents.endOfLastEntry, remainderFrames: 0, reason: "sender-restarted")
        holdsCapturedAudio = contents.holdsCapturedAudio
    }

    /// Unacknowledged payload bytes held for any destination (memory or spool): what counts against
    /// `--spool-max`.
    public var heldBytesTotal: Int { condition.withLock { heldBytes } }

    /// For a recovered stream: whether its spool ever held captured audio (or the receiver has
    /// some of it). A stream without is never delivered: it must not become a file. Always true for
    /// a new stream.
    public private(set) var holdsCapturedAudio = true

    /// Which listener `removeListener` removes.
    public struct ListenerToken: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    /// Calls `listener` (from the appending thread) whenever an entry is appended or the stream
    /// ends, until it is removed with the token returned.
    @discardableResult
    public func addListener(_ listener: @escaping @Sendable () -> Void) -> ListenerToken {
        condition.withLock {
            nextListener += 1
            listeners.append((nextListener, listener))
            return ListenerToken(id: nextListener)
        }
    }

    /// Calls `listener` (from the appending thread, outside the log's lock) whenever the log gives
    /// a backup up because its backlog reached the room (`BackupRoom`), until it is removed with the
    /// token returned. A backup given up before the listener was added: `givenUpRoom(for:)`.
    @discardableResult
    public func addDropListener(_ listener: @escaping @Sendable (LogDestination, BackupRoom) -> Void) -> ListenerToken {
        condition.withLock {
            nextListener += 1
            dropListeners.append((nextListener, listener))
            return ListenerToken(id: nextListener)
        }
    }

    /// Stops calling the listener `token` names.
    public func removeListener(_ token: ListenerToken) {
        condition.withLock {
            listeners.removeAll { $0.id == token.id }
            dropListeners.removeAll { $0.id == token.id }
        }
    }

    /// Why the log gave `destination` up by itself (its backlog reached the room); nil if it did not.
    public func givenUpRoom(for destination: LogDestination) -> BackupRoom? {
        condition.withLock { cursors.indices.contains(destination.index) ? cursors[destination.index].givenUp : nil }
    }

    /// Appends encoded audio with the levels of the audio it encodes (sent with it while the
    /// entry is held in memory); returns its sequence number, or 0 when the log was full and the
    /// audio went to the overflow file. A non-real-time producer may wait here.
    @discardableResult
    public func append(_ packets: EncodedPackets, levels: AudioLevels? = nil) -> UInt64 {
        if producerIsRealTime {
            let incoming = packets.payload.count
            // Asked before taking this log's lock: the budget reads the other logs under theirs.
            let limit = budget?.limit(for: self) ?? capacity
            let (full, givenUp): (Bool, GivenUp) = condition.withLock {
                let room = BackupRoom(bytes: overflow != nil ? limit / 2 : limit, limit: .spoolMax)
                let givenUp = giveUpBackups(beyond: room, incoming: incoming)
                return (heldBytes > room.bytes - incoming, givenUp)
            }
            announce(givenUp)
            if full {
                keepInOverflow(packets)
                return 0
            }
            endOverflowIfAny()
        }
        return appendEntry(.audio(packets), bytes: packets.payload.count, levels: levels)
    }

    /// Appends a gap of `length` frames at `sampleTime`; returns its sequence number (0 when it
    /// falls inside an overflow episode, whose own Gap covers it).
    @discardableResult
    public func appendGap(sampleTime: Int64, length: Int64, reason: String) -> UInt64 {
        let absorbed: Bool = condition.withLock {
            guard overflow != nil else { return false }
            overflow?.end = sampleTime + length
            return true
        }
        if absorbed { return 0 }
        return appendEntry(.gap(sampleTime: sampleTime, length: length, reason: reason), bytes: 0)
    }

    /// Appends a marker with `label` where the stream's timeline stands now (just past the last
    /// entry appended); returns its sequence number, or 0 when the stream has already ended (or the
    /// log is closed) and nothing more can be recorded in it.
    @discardableResult
    public func appendMarker(label: String) -> UInt64 {
        appendEntry(.marker(sampleTime: 0, label: label), bytes: 0, atTimelineEnd: true)
    }

    /// Appends a gap of `length` frames from `sampleTime` that the packets already appended carry as
    /// encoded silence (`LoggedPacket.Content.filledGap`), where the timeline stands now; returns its
    /// sequence number. Nothing is appended (0 is returned) while an overflow episode runs (its own
    /// Gap covers the stretch), once the stream has ended, or when the packets do not reach
    /// `sampleTime` yet: the caller appends it once they do.
    @discardableResult
    public func appendFilledGap(sampleTime: Int64, length: Int64, reason: String) -> UInt64 {
        let absorbed: Bool = condition.withLock { overflow != nil }
        if absorbed { return 0 }
        return appendEntry(.filledGap(position: 0, sampleTime: sampleTime, length: length, reason: reason), bytes: 0, atTimelineEnd: true)
    }

    /// Appends `content`; `atTimelineEnd`: a marker placed where the timeline stands, decided under
    /// the lock so that no other entry comes between (0 is returned, and nothing appended, once the
    /// stream ended).
    private func appendEntry(_ content: LoggedPacket.Content, bytes: Int, levels: AudioLevels? = nil, atTimelineEnd: Bool = false) -> UInt64 {
        // Asked before taking this log's lock: the budget reads the other logs under theirs.
        let limit = producerIsRealTime ? capacity : (budget?.limit(for: self) ?? capacity)
        condition.lock()
        var content = content
        var givenUp = GivenUp()
        if !producerIsRealTime {
            // The main receiver sets the pace (and the disk, for what waits in memory to be
            // spooled); a backup that would hold the source up is given up instead.
            while !closed {
                givenUp.append(giveUpBackups(beyond: fastSourceRoom(limit: limit), incoming: 0))
                if cursors[0].heldBytes <= memoryLimit && memoryBytes <= memoryLimit { break }
                producersWaiting += 1
                condition.wait()
                producersWaiting -= 1
            }
        }
        if atTimelineEnd, case .marker(_, let label) = content {
            guard end == nil, !closed else {
                condition.unlock()
                announce(givenUp)
                return 0
            }
            // After any wait for room: what others appended meanwhile comes before the marker.
            content = .marker(sampleTime: appendedEnd, label: label)
        }
        if atTimelineEnd, case .filledGap(_, let sampleTime, let length, let reason) = content {
            guard end == nil, !closed, sampleTime <= appendedEnd else {
                condition.unlock()
                announce(givenUp)
                return 0
            }
            content = .filledGap(position: appendedEnd, sampleTime: sampleTime, length: length, reason: reason)
        }
        let sequence = nextSequence
        nextSequence += 1
        let entry = LoggedPacket(sequence: sequence, content: content, levels: levels)
        slots.append(Slot(
            sequence: sequence, packet: entry, location: nil, bytes: bytes, endSample: entry.endSampleTime,
            appendedAt: MonotonicClock.nanoseconds()
        ))
        heldBytes += bytes
        for index in cursors.indices where !cursors[index].dropped { cursors[index].heldBytes += bytes }
        appendedBytesTotal += Int64(bytes)
        appendedEnd = max(appendedEnd, entry.endSampleTime)
        memoryBytes += bytes
        let toNotify = listeners
        condition.unlock()
        announce(givenUp)
        if spool != nil { spoolQueue.async { [self] in spoolWrite(entry) } }
        toNotify.forEach { $0.call() }
        return sequence
    }

    // MARK: - Backups given up for the main receiver's sake

    /// Backups the log gave up in one decision, and what the spool must be told: announced (and
    /// recorded) once the lock is released.
    private struct GivenUp {
        var destinations: [(LogDestination, BackupRoom)] = []
        var acknowledgement: SpoolAcknowledgement?

        mutating func append(_ other: GivenUp) {
            destinations += other.destinations
            acknowledgement = other.acknowledgement ?? acknowledgement
        }
    }

    /// The room a source that is not real time leaves its backups: `limit` (this log's share of
    /// `--spool-max`) on disk with a spool that works (at least `memoryLimit`, what the main may
    /// hold itself), `memoryLimit` in memory without one. Under `condition`.
    private func fastSourceRoom(limit: Int) -> BackupRoom {
        if spool != nil, !spoolFailureReported, limit >= memoryLimit { return BackupRoom(bytes: limit, limit: .spoolMax) }
        return BackupRoom(bytes: memoryLimit, limit: .fastSource)
    }

    /// Gives up (drops) the backups whose backlog, with `incoming` more bytes, would pass `room`
    /// while the main receiver's fits (`BackupRoom.backupsToGiveUp`). Under `condition`; cheap when
    /// every backlog fits (the log's backlog is the largest of its cursors').
    private func giveUpBackups(beyond room: BackupRoom, incoming: Int) -> GivenUp {
        guard cursors.count > 1, heldBytes > room.bytes - incoming else { return GivenUp() }
        let backups = cursors.indices.dropFirst().filter { !cursors[$0].dropped }.map { (destination: LogDestination(index: $0), held: cursors[$0].heldBytes) }
        var givenUp = GivenUp()
        for destination in room.backupsToGiveUp(incoming: incoming, mainHeld: cursors[0].heldBytes, backups: backups) {
            cursors[destination.index].givenUp = room
            givenUp.acknowledgement = drop(destination) ?? givenUp.acknowledgement
            givenUp.destinations.append((destination, room))
        }
        return givenUp
    }

    /// Records what giving backups up released, and tells the drop listeners. Outside `condition`.
    private func announce(_ givenUp: GivenUp) {
        guard !givenUp.destinations.isEmpty else { return }
        record(givenUp.acknowledgement)
        let toNotify = condition.withLock { dropListeners }
        for (destination, room) in givenUp.destinations {
            toNotify.forEach { $0.call(destination, room) }
        }
    }

    // MARK: - Spool

    private func spoolWrite(_ entry: LoggedPacket) {
        guard let spool else { return }
        let location: SpoolLocation
        do throws(SpoolError) {
            location = try spool.append(entry)
        } catch {
            reportSpoolFailure(error)
            return
        }
        condition.withLock {
            guard let index = slotIndex(entry.sequence) else { return }
            slots[index].location = location
            if memoryBytes > memoryLimit || entry.sequence <= sentThrough, slots[index].packet != nil {
                slots[index].packet = nil
                memoryBytes -= slots[index].bytes
                condition.broadcast()  // a source that is not real time may wait for memory
            }
        }
        scheduleSync()
    }

    private func scheduleSync() {
        guard let spool, !syncScheduled else { return }
        syncScheduled = true
        spoolQueue.asyncAfter(deadline: .now() + .seconds(1)) { [self] in
            syncScheduled = false
            do throws(SpoolError) { try spool.synchronize() } catch { reportSpoolFailure(error) }
        }
    }

    private func reportSpoolFailure(_ error: SpoolError) {
        let first: Bool = condition.withLock {
            defer { spoolFailureReported = true }
            condition.broadcast()  // a source waiting for the disk now waits for memory only
            return !spoolFailureReported
        }
        if first { events(.spoolFailed(reason: error.description)) }
    }

    private func slotIndex(_ sequence: UInt64) -> Int? {
        guard head < slots.count else { return nil }
        let first = slots[head].sequence
        guard sequence >= first else { return nil }
        let index = head + Int(sequence - first)
        return index < slots.count ? index : nil
    }

    /// Blocks until every entry appended so far is written to the spool and synced (tests, shutdown).
    public func flushSpool() {
        guard let spool else { return }
        spoolQueue.sync { try? spool.synchronize() }
    }

    // MARK: - Overflow

    /// Keeps `packets` in the overflow file, starting an episode (and its file) if none runs. The
    /// episode's state is decided under the lock once, the file is written outside it, and what
    /// that gave (the file's path, or its failure) is recorded under the lock once.
    private func keepInOverflow(_ packets: EncodedPackets) {
        let end = packets.firstSampleTime + Int64(packets.frameCount)
        let (starting, hasFile): (Bool, Bool) = condition.withLock {
            guard overflow != nil else {
                overflow = Overflow(path: nil, start: packets.firstSampleTime, end: end)
                return (true, false)
            }
            overflow?.end = end
            return (false, overflow?.path != nil)
        }
        var newPath: String?
        if starting {
            if let overflowRecorder {
                do throws(CAFError) {
                    newPath = try overflowRecorder.begin()
                } catch {
                    events(.audioLost(reason: "the log is full (--spool-max \(capacity) bytes) and the overflow file could not be created: \(error.description)"))
                }
            } else {
                events(.audioLost(reason: "the log is full (\(capacity) bytes) and there is no overflow folder"))
            }
        }
        var writeFailure: String?
        if hasFile || newPath != nil, let overflowRecorder {
            do throws(CAFError) {
                try overflowRecorder.write(packets)
            } catch {
                writeFailure = error.description
            }
        }
        if newPath != nil || writeFailure != nil {
            condition.withLock { overflow?.path = writeFailure == nil ? newPath : nil }
        }
        if let newPath { events(.overflowStarted(path: newPath)) }
        if let writeFailure { events(.audioLost(reason: "writing the overflow file failed: \(writeFailure)")) }
    }

    private func endOverflowIfAny() {
        guard let episode = condition.withLock({ () -> Overflow? in
            defer { overflow = nil }
            return overflow
        }) else { return }
        try? overflowRecorder?.end()
        let frames = episode.end - episode.start
        guard frames > 0 else { return }
        let reason: String
        if let path = episode.path {
            reason = "spool-full: the sender kept these \(frames) frames in \(path)"
            events(.overflowEnded(path: path, frames: frames))
        } else {
            reason = "spool-full: \(frames) frames lost at the sender (no overflow file)"
        }
        _ = appendEntry(.gap(sampleTime: episode.start, length: frames, reason: reason), bytes: 0)
    }

    // MARK: - Network side

    /// Records the end of the stream, after the last entry appended; no entry may follow.
    /// `endSampleTime`: just past the last frame; `remainderFrames`: VBR padding at the end of the
    /// last packet; `reason`: why it ended ("duration", "end-of-file", "interrupted"...).
    public func finish(endSampleTime: Int64, remainderFrames: Int, reason: String) {
        endOverflowIfAny()
        let (toNotify, streamEnd) = condition.withLock {
            let streamEnd = StreamEnd(lastSequence: nextSequence - 1, endSampleTime: endSampleTime, remainderFrames: remainderFrames, reason: reason)
            end = streamEnd
            return (listeners, streamEnd)
        }
        if spool != nil {
            // Synced on the spool's usual schedule (within a second), as every entry is: a stream
            // acknowledged whole before then is removed without a write of the spool to disk.
            spoolQueue.async { [self] in
                try? spool?.appendEnd(streamEnd)
                scheduleSync()
            }
        }
        toNotify.forEach { $0.call() }
    }

    /// The network side wrote every entry through `sequence` to `destination`'s connection. With a
    /// spool, payloads leave memory as soon as they are on disk and were sent to every destination
    /// still served: the receivers acknowledge them soon, and a resend after a reconnect reads them
    /// back. Without a spool this changes nothing.
    public func markSent(through sequence: UInt64, for destination: LogDestination = .main) {
        guard spool != nil else { return }
        condition.withLock {
            guard cursors.indices.contains(destination.index), sequence > cursors[destination.index].sentThrough else { return }
            cursors[destination.index].sentThrough = sequence
            dropSentPayloads()
        }
    }

    /// Drops the payloads of spooled entries every destination still served was sent. Under `condition`.
    private func dropSentPayloads() {
        let sentToAll = lowestServed(\.sentThrough)
        guard sentToAll > sentThrough else { return }
        let from = slotIndex(sentThrough + 1) ?? head
        sentThrough = sentToAll
        guard let through = slotIndex(min(sentToAll, nextSequence - 1)), from <= through else { return }
        for index in from...through where slots[index].location != nil && slots[index].packet != nil {
            slots[index].packet = nil
            memoryBytes -= slots[index].bytes
        }
        condition.broadcast()  // a source that is not real time may wait for memory
    }

    /// `destination` holds every entry up to and including `sequence` durably. Entries every
    /// destination still served holds are released. Stale acknowledgements (at or below an earlier
    /// one) release nothing, but count as the destination's latest report of its position
    /// (`Progress.lastAcknowledgementAt`).
    public func acknowledge(through sequence: UInt64, for destination: LogDestination = .main) {
        let now = MonotonicClock.nanoseconds()
        let moved: SpoolAcknowledgement? = condition.withLock {
            guard cursors.indices.contains(destination.index) else { return nil }
            cursors[destination.index].lastAcknowledgedAt = now
            let cursor = cursors[destination.index]
            guard !cursor.dropped, sequence > cursor.acknowledged else { return nil }
            let through = min(sequence, nextSequence - 1)
            if let from = slotIndex(cursor.acknowledged + 1), let to = slotIndex(through), from <= to {
                for index in from...to {
                    cursors[destination.index].heldBytes -= slots[index].bytes
                    cursors[destination.index].acknowledgedEnd = max(cursors[destination.index].acknowledgedEnd, slots[index].endSample)
                }
            }
            if through > cursor.acknowledged {
                cursors[destination.index].lastAdvancedAt = now
                // A source waiting for the main receiver may go on, though nothing leaves the log
                // while a backup still lacks it (that backup may now be the one to give up).
                condition.broadcast()
            }
            cursors[destination.index].acknowledged = max(cursor.acknowledged, through)
            let released = releaseAcknowledged()
            guard released != nil || destination == .main else { return nil }
            return SpoolAcknowledgement(main: cursors[0].acknowledged, mainEnd: cursors[0].acknowledgedEnd, released: acknowledged)
        }
        record(moved)
    }

    /// What the spool is told after an acknowledgement: the main receiver's position (what a
    /// restarted sender delivers from) and what every receiver still served holds (what it may retire).
    private struct SpoolAcknowledgement {
        var main: UInt64
        /// The sample just past the main receiver's acknowledged audio.
        var mainEnd: Int64
        var released: UInt64
    }

    private func record(_ acknowledgement: SpoolAcknowledgement?) {
        guard let acknowledgement, let spool else { return }
        spoolQueue.async { spool.acknowledge(recording: acknowledgement.main, endingAt: acknowledgement.mainEnd, retiringThrough: acknowledgement.released) }
    }

    /// Stops keeping entries for `destination` (a backup receiver given up on): its cursor no
    /// longer holds entries in the log or the spool. It cannot be served again.
    public func dropDestination(_ destination: LogDestination) {
        record(condition.withLock { drop(destination) })
    }

    /// Drops `destination`'s cursor; returns what the spool must be told if entries were released.
    /// Under `condition`.
    private func drop(_ destination: LogDestination) -> SpoolAcknowledgement? {
        guard cursors.indices.contains(destination.index), !cursors[destination.index].dropped else { return nil }
        cursors[destination.index].dropped = true
        cursors[destination.index].heldBytes = 0
        if spool != nil { dropSentPayloads() }
        guard releaseAcknowledged() != nil else { return nil }
        return SpoolAcknowledgement(main: cursors[0].acknowledged, mainEnd: cursors[0].acknowledgedEnd, released: acknowledged)
    }

    /// The lowest `position` among the destinations still served (the last sequence when none is).
    /// Under `condition`; no allocation.
    private func lowestServed(_ position: KeyPath<Cursor, UInt64>) -> UInt64 {
        var lowest = nextSequence - 1
        for cursor in cursors where !cursor.dropped { lowest = min(lowest, cursor[keyPath: position]) }
        return lowest
    }

    /// Releases the entries every destination still served acknowledged; returns the new
    /// released sequence, or nil when nothing moved. Under `condition`.
    private func releaseAcknowledged() -> UInt64? {
        let heldByAll = lowestServed(\.acknowledged)
        guard heldByAll > acknowledged else { return nil }
        acknowledged = min(heldByAll, nextSequence - 1)
        while head < slots.count, slots[head].sequence <= acknowledged {
            acknowledgedEnd = max(acknowledgedEnd, slots[head].endSample)
            heldBytes -= slots[head].bytes
            if slots[head].packet != nil {
                memoryBytes -= slots[head].bytes
                // The payload goes now (an entry may hold a whole capture buffer); the slot
                // itself goes with the next compaction.
                slots[head].packet = nil
            }
            head += 1
        }
        // Compact once released slots are half the array.
        if head >= 16, head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
        condition.broadcast()
        return acknowledged
    }

    /// Stops making producers wait (the stream is being torn down).
    public func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Up to `maxCount` kept entries starting at `sequence` (which must not be acknowledged yet);
    /// entries no longer in memory are read back from the spool, so this may wait on the disk: never
    /// call it on an event loop (a session fetches through its `PacketFetcher`). Throws when an entry
    /// the stream still needs cannot be read back (none of the audio from there on can be sent).
    public func entries(from sequence: UInt64, maxCount: Int) throws(SpoolError) -> [LoggedPacket] {
        let picked: [Slot] = condition.withLock {
            guard let start = slotIndex(sequence) else { return [] }
            return Array(slots[start..<min(slots.count, start + maxCount)])
        }
        var result: [LoggedPacket] = []
        result.reserveCapacity(picked.count)
        for slot in picked {
            if let packet = slot.packet {
                result.append(packet)
            } else if let location = slot.location, let spool {
                do throws(SpoolError) {
                    result.append(try spool.read(location, sequence: slot.sequence))
                } catch {
                    // What was read so far can go; the failure is met again at its own sequence.
                    if result.isEmpty { throw error }
                    return result
                }
            } else if result.isEmpty, slot.sequence > acknowledgedSequence {
                throw SpoolError("spool: entry \(slot.sequence) is neither in memory nor in the spool")
            } else {
                break
            }
        }
        return result
    }

    /// The entries from `sequence` on that are still in memory, up to `maxCount`: stops at the first
    /// that would have to be read back from the spool. Never waits on the disk.
    public func entriesInMemory(from sequence: UInt64, maxCount: Int) -> [LoggedPacket] {
        condition.withLock {
            guard let start = slotIndex(sequence) else { return [] }
            var result: [LoggedPacket] = []
            for slot in slots[start..<min(slots.count, start + maxCount)] {
                guard let packet = slot.packet else { break }
                result.append(packet)
            }
            return result
        }
    }

    /// Deletes the spool: the receiver confirmed the whole stream.
    public func removeSpool() {
        guard let spool else { return }
        spoolQueue.sync { spool.removeAll() }
    }

    /// How many destinations the log serves or served (the main receiver and the backups).
    public var destinationCount: Int { condition.withLock { cursors.count } }

    /// The highest sequence every destination still served acknowledged (0 before any): the
    /// entries up to it are released.
    public var acknowledgedSequence: UInt64 { condition.withLock { acknowledged } }

    /// The highest sequence `destination` acknowledged (0 before any).
    public func acknowledgedSequence(for destination: LogDestination) -> UInt64 {
        condition.withLock { cursors.indices.contains(destination.index) ? cursors[destination.index].acknowledged : 0 }
    }

    /// Where the stream stands, for the status line: what was appended and what acknowledged, and
    /// when (for telling whether acknowledgements are overdue).
    public struct Progress: Sendable, Equatable {
        /// Bytes of audio appended in this run.
        public var appendedBytes: Int64
        /// The sample index just past the newest entry appended in this run.
        public var appendedEndSampleTime: Int64
        /// The sample index just past the newest entry acknowledged in this run.
        public var acknowledgedEndSampleTime: Int64
        /// Bytes not acknowledged.
        public var unacknowledgedBytes: Int
        /// When the receiver last reported its durable position (an acknowledgement, or the resume
        /// point of a handshake), in `MonotonicClock` nanoseconds; `nil` before the first report.
        public var lastAcknowledgementAt: UInt64?
        /// When the oldest entry not yet acknowledged was appended, in `MonotonicClock`
        /// nanoseconds; `nil` when every entry is acknowledged.
        public var oldestUnacknowledgedAppendedAt: UInt64?
        /// When the acknowledged position last advanced (progress: a stale acknowledgement, or one
        /// beyond what was appended, moves nothing), in `MonotonicClock` nanoseconds; `nil` before
        /// the first advance in this run. For one destination only (`progress(for:)`).
        public var lastAdvanceAt: UInt64? = nil
    }

    /// The figures of `Progress` for the log as a whole, read together: acknowledged means held by
    /// every destination still served, unacknowledged bytes are what the log (and spool) keeps,
    /// and the last acknowledgement is the latest from any destination.
    public var progress: Progress {
        condition.withLock {
            Progress(appendedBytes: appendedBytesTotal, appendedEndSampleTime: appendedEnd,
                     acknowledgedEndSampleTime: acknowledgedEnd, unacknowledgedBytes: heldBytes,
                     lastAcknowledgementAt: cursors.compactMap(\.lastAcknowledgedAt).max(),
                     oldestUnacknowledgedAppendedAt: head < slots.count ? slots[head].appendedAt : nil)
        }
    }

    /// The figures of `Progress` for one destination, read together.
    public func progress(for destination: LogDestination) -> Progress {
        condition.withLock {
            guard cursors.indices.contains(destination.index) else {
                return Progress(appendedBytes: appendedBytesTotal, appendedEndSampleTime: appendedEnd, acknowledgedEndSampleTime: 0, unacknowledgedBytes: 0)
            }
            let cursor = cursors[destination.index]
            let oldest = cursor.dropped ? nil : slotIndex(cursor.acknowledged + 1).map { slots[$0].appendedAt }
            return Progress(appendedBytes: appendedBytesTotal, appendedEndSampleTime: appendedEnd,
                            acknowledgedEndSampleTime: cursor.acknowledgedEnd, unacknowledgedBytes: cursor.heldBytes,
                            lastAcknowledgementAt: cursor.lastAcknowledgedAt, oldestUnacknowledgedAppendedAt: oldest,
                            lastAdvanceAt: cursor.lastAdvancedAt)
        }
    }

    /// The highest sequence appended (0 before any).
    public var lastSequence: UInt64 { condition.withLock { nextSequence - 1 } }
    /// Whether a source that is not real time is waiting in `append` now: for the main receiver
    /// to acknowledge, or for the disk to take what waits in memory.
    public var isProducerWaiting: Bool { condition.withLock { producersWaiting > 0 } }
    /// The oldest sequence still kept (the next that a destination still served has not acknowledged).
    public var oldestKeptSequence: UInt64 { condition.withLock { acknowledged + 1 } }
    /// Bytes kept (in memory or spooled), not yet acknowledged by every destination still served.
    public var unacknowledgedBytes: Int { condition.withLock { heldBytes } }
    /// Bytes `destination` has not acknowledged.
    public func unacknowledgedBytes(for destination: LogDestination) -> Int {
        condition.withLock { cursors.indices.contains(destination.index) ? cursors[destination.index].heldBytes : 0 }
    }
    /// Unacknowledged bytes held in memory.
    public var memoryBytesHeld: Int { condition.withLock { memoryBytes } }
    /// The end of the stream, once recorded.
    public var streamEnd: StreamEnd? { condition.withLock { end } }
    /// Whether the stream ended and every destination still served acknowledged every entry.
    public var isComplete: Bool { condition.withLock { end != nil && acknowledged == nextSequence - 1 } }
    /// Whether the stream ended and `destination` acknowledged every entry.
    public func isComplete(for destination: LogDestination) -> Bool {
        condition.withLock {
            guard end != nil, cursors.indices.contains(destination.index) else { return false }
            return cursors[destination.index].acknowledged == nextSequence - 1
        }
    }
}
