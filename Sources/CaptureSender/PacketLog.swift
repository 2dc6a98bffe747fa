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
    case audioLost(AudioLoss)
    /// The disk spool failed: audio stays in memory only (it would not survive a crash of the sender).
    case spoolFailed(reason: String)
}

/// Why a packet log could not keep audio, as data; `message(naming:)` words it where it is shown.
public enum AudioLoss: Sendable, Equatable {
    /// The log is full (`capacity` bytes) and there is no overflow folder.
    case logFullWithoutOverflow(capacity: Int)
    /// The log is full (`capacity` bytes) and the overflow file could not be created (`reason`).
    case overflowFileNotCreated(capacity: Int, reason: String)
    /// Writing the overflow file failed (`reason`).
    case overflowWriteFailed(reason: String)

    /// The loss's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch self {
        case .logFullWithoutOverflow(let capacity):
            return "the log is full (\(capacity) bytes) and there is no overflow folder"
        case .overflowFileNotCreated(let capacity, let reason):
            return "the log is full (\(naming.name(of: .spoolLimit)) \(capacity) bytes) and the overflow file could not be created: \(reason)"
        case .overflowWriteFailed(let reason):
            return "writing the overflow file failed: \(reason)"
        }
    }
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
/// Every decision about the log's state is `PacketLogState`'s, a pure machine with table tests:
/// each operation takes `condition` once to decide (and to change the state), then, with the lock
/// released, carries out what the decision asks (the spool's writes, the overflow file, the
/// listeners). Only the overflow file's creation and writes report back, under the lock once more.
///
/// Sendability (`@unchecked Sendable`): `state` is read and written only under `condition` (stays
/// a condition: with a source that is not real time, every append waits on it for room, on the
/// capture queue's delivery thread or a marker's thread, until an acknowledgement, a spool write,
/// a spool failure or `close` broadcasts); `syncScheduled` is touched on `spoolQueue` only,
/// `holdsCapturedAudio` is set in `init` only; the spool is written on `spoolQueue` and is
/// thread-safe itself; the overflow recorder is used by the producer only (`OverflowRecorder`).
public final class PacketLog: @unchecked Sendable {
    private let condition = NSCondition()
    /// Everything that changes, under `condition`.
    private var state: PacketLogState
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
        self.memoryLimit = memoryLimit
        self.producerIsRealTime = producerIsRealTime
        self.spool = spool
        self.capacity = max(capacity, 1)
        self.overflowRecorder = overflow
        self.events = events
        state = PacketLogState(
            configuration: PacketLogState.Configuration(
                memoryLimit: memoryLimit, capacity: max(capacity, 1), producerIsRealTime: producerIsRealTime,
                hasSpool: spool != nil, hasOverflowFolder: overflow != nil),
            destinations: destinations)
    }

    /// The log of an earlier stream, read back from its spool after a restart, ready to deliver.
    /// When capture never recorded an end (the sender was killed), the stream ends after its last
    /// spooled entry with reason "sender-restarted".
    public convenience init(recovering spool: StreamSpool, memoryLimit: Int = PacketLog.defaultMemoryLimit) throws(SpoolError) {
        let contents = try spool.contents()
        self.init(memoryLimit: memoryLimit, producerIsRealTime: true, spool: spool)
        state = PacketLogState(recovering: contents, configuration: state.configuration, now: MonotonicClock.nanoseconds())
        holdsCapturedAudio = contents.holdsCapturedAudio
    }

    /// Unacknowledged payload bytes held for any destination (memory or spool): what counts against
    /// `--spool-max`.
    public var heldBytesTotal: Int { condition.withLock { state.heldBytes } }

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
        ListenerToken(id: condition.withLock { state.addListener(listener) })
    }

    /// Calls `listener` (from the appending thread, outside the log's lock) whenever the log gives
    /// a backup up because its backlog reached the room (`BackupRoom`), until it is removed with the
    /// token returned. A backup given up before the listener was added: `givenUpRoom(for:)`.
    @discardableResult
    public func addDropListener(_ listener: @escaping @Sendable (LogDestination, BackupRoom) -> Void) -> ListenerToken {
        ListenerToken(id: condition.withLock { state.addDropListener(listener) })
    }

    /// Stops calling the listener `token` names.
    public func removeListener(_ token: ListenerToken) {
        condition.withLock { state.removeListener(id: token.id) }
    }

    /// Why the log gave `destination` up by itself (its backlog reached the room); nil if it did not.
    public func givenUpRoom(for destination: LogDestination) -> BackupRoom? {
        condition.withLock {
            guard case .givenUp(let room)? = state.cursor(destination)?.service else { return nil }
            return room
        }
    }

    /// Appends encoded audio with the levels of the audio it encodes (sent with it while the
    /// entry is held in memory); returns its sequence number, or 0 when the log was full and the
    /// audio went to the overflow file. A non-real-time producer may wait here.
    @discardableResult
    public func append(_ packets: EncodedPackets, levels: AudioLevels? = nil) -> UInt64 {
        // Asked before taking this log's lock: the budget reads the other logs under theirs.
        let limit = budget?.limit(for: self) ?? capacity
        let (decision, aftermath): (PacketLogState.AudioAppend, Aftermath) = condition.withLock {
            var effects = waitForRoom(limit: limit)
            let step = state.appendAudio(packets, levels: levels, limit: limit, now: MonotonicClock.nanoseconds())
            effects.add(step.effects)
            return (step.decision, settle(effects))
        }
        switch decision {
        case .overflow(let write):
            carryOut(aftermath)
            keepInOverflow(packets, write)
            return 0
        case .appended(let sequence, let endedOverflow):
            if let endedOverflow { finishOverflowFile(endedOverflow) }
            carryOut(aftermath)
            return sequence
        }
    }

    /// Appends a gap of `length` frames at `sampleTime`; returns its sequence number (0 when it
    /// falls inside an overflow episode, whose own Gap covers it).
    @discardableResult
    public func appendGap(sampleTime: Int64, length: Int64, reason: String) -> UInt64 {
        appendEntry { state, now in state.appendGap(sampleTime: sampleTime, length: length, reason: reason, now: now) }
    }

    /// Appends a marker with `label` where the stream's timeline stands now (just past the last
    /// entry appended); returns its sequence number, or 0 when the stream has already ended (or the
    /// log is closed) and nothing more can be recorded in it.
    @discardableResult
    public func appendMarker(label: String) -> UInt64 {
        // Placed after any wait for room: what others appended meanwhile comes before the marker.
        appendEntry { state, now in state.appendMarker(label: label, now: now) }
    }

    /// Appends a gap of `length` frames from `sampleTime` that the packets already appended carry as
    /// encoded silence (`LoggedPacket.Content.filledGap`), where the timeline stands now; returns its
    /// sequence number. Nothing is appended (0 is returned) while an overflow episode runs (its own
    /// Gap covers the stretch), once the stream has ended, or when the packets do not reach
    /// `sampleTime` yet: the caller appends it once they do.
    @discardableResult
    public func appendFilledGap(sampleTime: Int64, length: Int64, reason: String) -> UInt64 {
        appendEntry { state, now in state.appendFilledGap(sampleTime: sampleTime, length: length, reason: reason, now: now) }
    }

    /// Appends what `decide` decides, under the lock once (after any wait for room, for a producer
    /// that is not real time), at the time read there; returns its sequence (0: nothing appended).
    private func appendEntry(_ decide: (inout PacketLogState, UInt64) -> PacketLogState.Step<UInt64>) -> UInt64 {
        // Asked before taking this log's lock: the budget reads the other logs under theirs.
        let limit = producerIsRealTime ? capacity : (budget?.limit(for: self) ?? capacity)
        let (sequence, aftermath): (UInt64, Aftermath) = condition.withLock {
            var effects = waitForRoom(limit: limit)
            let step = decide(&state, MonotonicClock.nanoseconds())
            effects.add(step.effects)
            return (step.decision, settle(effects))
        }
        carryOut(aftermath)
        return sequence
    }

    /// For a producer that is not real time: waits on `condition` until the main receiver (and the
    /// disk) leave room, giving up the backups that would hold it up. Under `condition`.
    private func waitForRoom(limit: Int) -> PacketLogState.Effects {
        var effects = PacketLogState.Effects()
        guard !producerIsRealTime else { return effects }
        while true {
            let step = state.roomForFastSource(limit: limit)
            effects.add(step.effects)
            if step.effects.wakesProducers { condition.broadcast() }
            guard step.decision == .waitForRoom else { return effects }
            condition.wait()
            state.stopWaitingForRoom()
        }
    }

    // MARK: - Carrying decisions out

    /// What a decision asks for once the lock is released, with the listeners to call, copied
    /// (not rebuilt: an array shares its storage until written) under the lock.
    private struct Aftermath {
        var effects: PacketLogState.Effects
        var listeners: [(id: UInt64, call: @Sendable () -> Void)] = []
        var dropListeners: [(id: UInt64, call: @Sendable (LogDestination, BackupRoom) -> Void)] = []
    }

    /// Wakes the producers waiting if the decision asks, and copies the listeners it must call.
    /// Under `condition`.
    private func settle(_ effects: PacketLogState.Effects) -> Aftermath {
        if effects.wakesProducers { condition.broadcast() }
        var aftermath = Aftermath(effects: effects)
        if effects.notifiesListeners { aftermath.listeners = state.listeners.appended }
        if !effects.givenUp.isEmpty { aftermath.dropListeners = state.listeners.givenUp }
        return aftermath
    }

    /// Takes the lock once for `change`, then carries out what it asks for.
    private func perform(_ change: (inout PacketLogState) -> PacketLogState.Effects) {
        carryOut(condition.withLock { settle(change(&state)) })
    }

    /// Carries out a decision, outside `condition`: tells the spool the acknowledgement, the drop
    /// listeners the backups given up, writes the entries appended (and the end) to the spool, and
    /// calls the listeners.
    private func carryOut(_ aftermath: Aftermath) {
        let effects = aftermath.effects
        if let acknowledgement = effects.spoolAcknowledgement, let spool {
            spoolQueue.async { spool.acknowledge(recording: acknowledgement.main, retiringThrough: acknowledgement.released) }
        }
        for backup in effects.givenUp {
            aftermath.dropListeners.forEach { $0.call(backup.destination, backup.room) }
        }
        if let spool {
            for entry in effects.appended { spoolQueue.async { [self] in spoolWrite(entry) } }
            if let streamEnd = effects.recordedEnd {
                // Synced on the spool's usual schedule (within a second), as every entry is: a stream
                // acknowledged whole before then is removed without a write of the spool to disk.
                spoolQueue.async { [self] in
                    try? spool.appendEnd(streamEnd)
                    scheduleSync()
                }
            }
        }
        aftermath.listeners.forEach { $0.call() }
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
        perform { $0.entrySpooled(entry.sequence, at: location) }
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
            let step = state.spoolFailed()
            _ = settle(step.effects)
            return step.decision
        }
        if first { events(.spoolFailed(reason: error.description)) }
    }

    /// Blocks until every entry appended so far is written to the spool and synced (tests, shutdown).
    public func flushSpool() {
        guard let spool else { return }
        spoolQueue.sync { try? spool.synchronize() }
    }

    // MARK: - Overflow

    /// Keeps `packets` in the overflow file as `write` says; what creating or writing the file gave
    /// (its path, or its failure) is recorded under the lock once.
    private func keepInOverflow(_ packets: EncodedPackets, _ write: PacketLogState.OverflowWrite) {
        switch write {
        case .discard:
            return
        case .lostWithoutFolder:
            events(.audioLost(.logFullWithoutOverflow(capacity: capacity)))
        case .write:
            guard let overflowRecorder else { return }
            do throws(CAFError) {
                try overflowRecorder.write(packets)
            } catch {
                condition.withLock { state.overflowFile(.failed) }
                events(.audioLost(.overflowWriteFailed(reason: error.description)))
            }
        case .createFileAndWrite:
            guard let overflowRecorder else { return }
            let path: String
            do throws(CAFError) {
                path = try overflowRecorder.begin()
            } catch {
                condition.withLock { state.overflowFile(.failed) }
                events(.audioLost(.overflowFileNotCreated(capacity: capacity, reason: error.description)))
                return
            }
            var writeFailure: String?
            do throws(CAFError) {
                try overflowRecorder.write(packets)
            } catch {
                writeFailure = error.description
            }
            condition.withLock { state.overflowFile(writeFailure == nil ? .written(path: path) : .failed) }
            events(.overflowStarted(path: path))
            if let writeFailure { events(.audioLost(.overflowWriteFailed(reason: writeFailure))) }
        }
    }

    /// Finishes the file of an overflow episode that ended (its Gap is in the log) and tells the user.
    private func finishOverflowFile(_ episode: PacketLogState.EndedOverflow) {
        try? overflowRecorder?.end()
        if episode.frames > 0, let path = episode.path { events(.overflowEnded(path: path, frames: episode.frames)) }
    }

    // MARK: - Network side

    /// Records the end of the stream, after the last entry appended; no entry may follow.
    /// `endSampleTime`: just past the last frame; `remainderFrames`: VBR padding at the end of the
    /// last packet; `reason`: why it ended ("duration", "end-of-file", "interrupted"...).
    public func finish(endSampleTime: Int64, remainderFrames: Int, reason: String) {
        let (endedOverflow, aftermath): (PacketLogState.EndedOverflow?, Aftermath) = condition.withLock {
            let step = state.finish(endSampleTime: endSampleTime, remainderFrames: remainderFrames, reason: reason, now: MonotonicClock.nanoseconds())
            return (step.decision, settle(step.effects))
        }
        if let endedOverflow { finishOverflowFile(endedOverflow) }
        carryOut(aftermath)
    }

    /// The network side wrote every entry through `sequence` to `destination`'s connection. With a
    /// spool, payloads leave memory as soon as they are on disk and were sent to every destination
    /// still served: the receivers acknowledge them soon, and a resend after a reconnect reads them
    /// back. Without a spool this changes nothing.
    public func markSent(through sequence: UInt64, for destination: LogDestination = .main) {
        guard spool != nil else { return }
        perform { $0.markSent(through: sequence, for: destination) }
    }

    /// `destination` holds every entry up to and including `sequence` durably. Entries every
    /// destination still served holds are released. Stale acknowledgements (at or below an earlier
    /// one) release nothing, but count as the destination's latest report of its position
    /// (`Progress.lastAcknowledgementAt`).
    public func acknowledge(through sequence: UInt64, for destination: LogDestination = .main) {
        let now = MonotonicClock.nanoseconds()
        perform { $0.acknowledge(through: sequence, for: destination, now: now) }
    }

    /// Stops keeping entries for `destination` (a backup receiver given up on): its cursor no
    /// longer holds entries in the log or the spool. It cannot be served again.
    public func dropDestination(_ destination: LogDestination) {
        perform { $0.dropDestination(destination) }
    }

    /// Stops making producers wait (the stream is being torn down).
    public func close() {
        perform { $0.close() }
    }

    /// Up to `maxCount` kept entries starting at `sequence` (which must not be acknowledged yet);
    /// entries no longer in memory are read back from the spool, so this may wait on the disk: never
    /// call it on an event loop (a session fetches through its `PacketFetcher`). Throws when an entry
    /// the stream still needs cannot be read back (none of the audio from there on can be sent).
    public func entries(from sequence: UInt64, maxCount: Int) throws(SpoolError) -> [LoggedPacket] {
        let picked: [PacketLogState.Slot] = condition.withLock { Array(state.keptSlots(from: sequence, maxCount: maxCount)) }
        var result: [LoggedPacket] = []
        result.reserveCapacity(picked.count)
        for slot in picked {
            if let packet = slot.storage.packet {
                result.append(packet)
            } else if let location = slot.storage.location, let spool {
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
            var result: [LoggedPacket] = []
            for slot in state.keptSlots(from: sequence, maxCount: maxCount) {
                guard let packet = slot.storage.packet else { break }
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
    public var destinationCount: Int { condition.withLock { state.cursors.count } }

    /// The highest sequence every destination still served acknowledged (0 before any): the
    /// entries up to it are released.
    public var acknowledgedSequence: UInt64 { condition.withLock { state.released } }

    /// The highest sequence `destination` acknowledged (0 before any).
    public func acknowledgedSequence(for destination: LogDestination) -> UInt64 {
        condition.withLock { state.cursor(destination)?.acknowledged ?? 0 }
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
    public var progress: Progress { condition.withLock { state.progress } }

    /// The figures of `Progress` for one destination, read together.
    public func progress(for destination: LogDestination) -> Progress {
        condition.withLock { state.progress(for: destination) }
    }

    /// The highest sequence appended (0 before any).
    public var lastSequence: UInt64 { condition.withLock { state.lastSequence } }
    /// Where the entries appended reach: the newest one and the sample just past the audio appended.
    public var appended: StreamPosition { condition.withLock { state.appended } }
    /// Whether a source that is not real time is waiting in `append` now: for the main receiver
    /// to acknowledge, or for the disk to take what waits in memory.
    public var isProducerWaiting: Bool { condition.withLock { state.producersWaiting > 0 } }
    /// The oldest sequence still kept (the next that a destination still served has not acknowledged).
    public var oldestKeptSequence: UInt64 { condition.withLock { state.released + 1 } }
    /// Bytes kept (in memory or spooled), not yet acknowledged by every destination still served.
    public var unacknowledgedBytes: Int { condition.withLock { state.heldBytes } }
    /// Bytes `destination` has not acknowledged.
    public func unacknowledgedBytes(for destination: LogDestination) -> Int {
        condition.withLock { state.cursor(destination)?.heldBytes ?? 0 }
    }
    /// Unacknowledged bytes held in memory.
    public var memoryBytesHeld: Int { condition.withLock { state.memoryBytes } }
    /// The end of the stream, once recorded.
    public var streamEnd: StreamEnd? { condition.withLock { state.end } }
    /// Whether the stream ended and every destination still served acknowledged every entry.
    public var isComplete: Bool { condition.withLock { state.isComplete } }
    /// Whether the stream ended and `destination` acknowledged every entry.
    public func isComplete(for destination: LogDestination) -> Bool {
        condition.withLock { state.isComplete(for: destination) }
    }
}
