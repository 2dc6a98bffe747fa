import CaptureCodecs
import CaptureCore
import CaptureWire

/// Everything a `PacketLog` keeps that changes (its entries, each destination's cursor, the
/// overflow episode, the memory and backlog figures, the stream's end, the producers waiting, the
/// listeners), as one value that the log holds under its lock, with every decision the log makes
/// about it: a pure machine.
///
/// Its mutating methods take facts (the time, in `MonotonicClock` nanoseconds; the budget's
/// answer; what a file write gave) and say what the log must do once its lock is released
/// (`Effects`, and for some a decision of their own). It reads no clock, takes no lock and does
/// no I/O: the log does, around it.
struct PacketLogState: Sendable {
    /// What the log was made with: fixed for its life.
    struct Configuration: Sendable, Equatable {
        /// Unacknowledged bytes kept in memory at most (`PacketLog.memoryLimit`).
        var memoryLimit: Int
        /// Unacknowledged bytes kept at most before audio overflows (`PacketLog.capacity`).
        var capacity: Int
        /// Whether the producer is real time (never waits; overflows when the log is full).
        var producerIsRealTime: Bool
        /// Whether the log writes its entries to a disk spool.
        var hasSpool: Bool
        /// Whether the log has an overflow folder (`OverflowRecorder`) for audio when it is full.
        var hasOverflowFolder: Bool
    }

    /// Where an entry is: in memory, in the spool, or both.
    enum Storage: Sendable, Equatable {
        /// In memory only: not written to the spool yet (or the log has none, or the entry was made
        /// up in place of damaged records).
        case memory(LoggedPacket)
        /// In memory, and in the spool at `location`.
        case memoryAndSpool(LoggedPacket, location: SpoolLocation)
        /// In the spool only, at `location`: read back when it must be sent.
        case spool(location: SpoolLocation)
        /// Neither in memory nor in the spool: a released entry without a spool, whose slot goes
        /// with the next compaction.
        case gone

        /// The entry, while it is held in memory.
        var packet: LoggedPacket? {
            switch self {
            case .memory(let packet), .memoryAndSpool(let packet, _): return packet
            case .spool, .gone: return nil
            }
        }

        /// Where the spool holds it, once written there.
        var location: SpoolLocation? {
            switch self {
            case .memoryAndSpool(_, let location), .spool(let location): return location
            case .memory, .gone: return nil
            }
        }

        /// The same entry without its payload in memory (still in the spool if it was).
        var withoutPayload: Storage {
            location.map { .spool(location: $0) } ?? .gone
        }
    }

    /// One entry of the log, kept or released (until the next compaction).
    struct Slot: Sendable, Equatable {
        var sequence: UInt64
        /// Where the entry is.
        var storage: Storage
        /// Payload bytes.
        var bytes: Int
        /// The sample index just past the entry (0 when not known, as for recovered entries).
        var endSample: Int64 = 0
        /// When the entry was appended (`MonotonicClock` nanoseconds; for recovered entries, when
        /// they were read back).
        var appendedAt: UInt64 = 0
    }

    /// Whether a destination is still served, and if not, why.
    enum Service: Sendable, Equatable {
        /// Its cursor holds entries in the log.
        case served
        /// Dropped by its sender (`PacketLog.dropDestination`).
        case dropped
        /// Given up by the log itself: its backlog reached `room` (`BackupRoom`).
        case givenUp(room: BackupRoom)
    }

    /// Where one destination stands.
    struct Cursor: Sendable, Equatable {
        /// The highest sequence it acknowledged.
        var acknowledged: UInt64
        /// The highest sequence sent to it.
        var sentThrough: UInt64 = 0
        /// The sample index just past the newest entry it acknowledged in this run.
        var acknowledgedEnd: Int64 = 0
        /// Bytes it has not acknowledged (0 once it is no longer served).
        var heldBytes = 0
        /// When it last reported its durable position.
        var lastAcknowledgedAt: UInt64?
        /// When its acknowledged position last advanced (its progress).
        var lastAdvancedAt: UInt64?
        /// Whether it still holds entries in the log.
        var service: Service = .served

        /// Whether it still holds entries in the log.
        var isServed: Bool { service == .served }
    }

    /// The overflow file of a running episode.
    enum OverflowFile: Sendable, Equatable {
        /// Decided, not yet created (the producer is creating it outside the lock).
        case creating
        /// Open at `path`: the episode's audio goes there.
        case open(path: String)
        /// There is none (no overflow folder, or it could not be created or written): the
        /// episode's audio is lost, and its Gap says so.
        case lost

        /// The file's path while it is open.
        var path: String? {
            if case .open(let path) = self { return path }
            return nil
        }
    }

    /// Whether the log is full and new audio goes to an overflow file instead.
    enum OverflowEpisode: Sendable, Equatable {
        /// Audio goes into the log.
        case none
        /// Audio from `start` to `end` (sample indexes) went, or goes, to `file`.
        case running(start: Int64, end: Int64, file: OverflowFile)
    }

    /// The disk spool's condition.
    enum SpoolCondition: Sendable, Equatable {
        /// The log has no spool.
        case absent
        /// Entries are written to the spool.
        case working
        /// A write or sync failed (reported once): audio stays in memory only.
        case failed
    }

    /// Who is told about the log, by the id of their token (`PacketLog.ListenerToken`).
    struct Listeners: Sendable {
        /// Called whenever an entry is appended or the stream ends.
        var appended: [(id: UInt64, call: @Sendable () -> Void)] = []
        /// Called whenever the log gives a backup up.
        var givenUp: [(id: UInt64, call: @Sendable (LogDestination, BackupRoom) -> Void)] = []
        /// The last id handed out.
        var lastID: UInt64 = 0
    }

    /// A backup the log gave up, and the room its backlog reached.
    struct GivenUpBackup: Sendable, Equatable {
        var destination: LogDestination
        var room: BackupRoom
    }

    /// What the spool is told after an acknowledgement: the main receiver's position (what a
    /// restarted sender delivers from) and what every receiver still served holds (what it may retire).
    struct SpoolAcknowledgement: Sendable, Equatable {
        /// The main receiver's acknowledged sequence and the sample just past its audio.
        var main: StreamPosition
        var released: UInt64
    }

    /// What the log must do once a decision is made: under its lock, wake the producers waiting
    /// (`wakesProducers`); once it is released, in this order, tell the spool the acknowledgement,
    /// tell the drop listeners about the backups given up, write the entries appended (and the
    /// end) to the spool, and call the listeners when anything was appended or the stream ended.
    struct Effects: Sendable, Equatable {
        /// Backups given up, for the drop listeners.
        var givenUp: [GivenUpBackup] = []
        /// What the spool must record (nil: nothing moved, or there is no spool).
        var spoolAcknowledgement: SpoolAcknowledgement?
        /// Entries appended, oldest first: spooled, and the listeners told.
        var appended: [LoggedPacket] = []
        /// The end of the stream, just recorded: spooled after the entries, and the listeners told.
        var recordedEnd: StreamEnd?
        /// Whether producers waiting for room must be woken (room may have come).
        var wakesProducers = false

        /// Whether the listeners (`Listeners.appended`) must be called.
        var notifiesListeners: Bool { !appended.isEmpty || recordedEnd != nil }

        /// Adds what a later decision asks for.
        mutating func add(_ later: Effects) {
            givenUp += later.givenUp
            spoolAcknowledgement = later.spoolAcknowledgement ?? spoolAcknowledgement
            appended += later.appended
            recordedEnd = later.recordedEnd ?? recordedEnd
            wakesProducers = wakesProducers || later.wakesProducers
        }
    }

    /// A decision and what the log must do for it.
    struct Step<Decision: Sendable & Equatable>: Sendable, Equatable {
        var decision: Decision
        var effects: Effects
    }

    /// An overflow episode that just ended (audio fits again, or the stream ended).
    struct EndedOverflow: Sendable, Equatable {
        /// The episode's file, if it kept the audio.
        var path: String?
        /// Frames the episode covered (the Gap appended for it, when more than 0).
        var frames: Int64
    }

    /// What happens to audio appended.
    enum AudioAppend: Sendable, Equatable {
        /// Kept in the log as entry `sequence`; `endedOverflow`: the overflow episode that this
        /// ended (its Gap is the entry just before), whose file the producer must finish.
        case appended(sequence: UInt64, endedOverflow: EndedOverflow?)
        /// The log is full: the audio goes to the overflow file, as `OverflowWrite` says.
        case overflow(OverflowWrite)
    }

    /// What the producer does with audio that does not fit in the log.
    enum OverflowWrite: Sendable, Equatable {
        /// A new episode: create its file, write the audio, and report what that gave
        /// (`overflowFile(_:)`).
        case createFileAndWrite
        /// A new episode, but there is no overflow folder: the audio is lost, say so.
        case lostWithoutFolder
        /// Write the audio to the episode's open file (report a failure).
        case write
        /// The episode has no file (it failed): the audio is lost, as was already said.
        case discard
    }

    /// What creating or writing the overflow file gave.
    enum OverflowFileResult: Sendable, Equatable {
        /// The file at `path` holds the audio.
        case written(path: String)
        /// It could not be created or written.
        case failed
    }

    /// Whether a producer that is not real time may append now.
    enum FastSourceRoom: Sendable, Equatable {
        /// There is room (or the log is closed): append.
        case enough
        /// Wait for an acknowledgement, a spool write or failure, or `close` (counted as waiting).
        case waitForRoom
    }

    let configuration: Configuration
    /// The entries, oldest first; those before `head` are released (gone at the next compaction).
    private(set) var slots: [Slot] = []
    /// Index in `slots` of the oldest kept entry.
    private(set) var head = 0
    /// Where the entries appended reach: the newest one's sequence and the sample index just past
    /// the audio appended (`.start` before any; after a restart, what the spool held).
    private(set) var appended: StreamPosition = .start
    /// The highest sequence every destination still served acknowledged: entries up to it are released.
    private(set) var released: UInt64 = 0
    /// The highest sequence sent to every destination still served (`markSent`).
    private(set) var sentToAll: UInt64 = 0
    /// Each destination's cursor, by `LogDestination.index`.
    private(set) var cursors: [Cursor]
    /// Unacknowledged payload bytes, wherever they are kept.
    private(set) var heldBytes = 0
    /// Bytes of audio appended in this run.
    private(set) var appendedBytes: Int64 = 0
    /// The sample index just past the newest entry appended in this run.
    private(set) var appendedEnd: Int64 = 0
    /// The sample index just past the newest entry released in this run.
    private(set) var releasedEnd: Int64 = 0
    /// Unacknowledged payload bytes held in memory.
    private(set) var memoryBytes = 0
    /// The end of the stream, once recorded.
    private(set) var end: StreamEnd?
    /// Whether the stream is being torn down: producers no longer wait.
    private(set) var closed = false
    /// The overflow episode.
    private(set) var overflow: OverflowEpisode = .none
    /// The disk spool's condition.
    private(set) var spool: SpoolCondition
    /// Producers waiting for room (a source that is not real time).
    private(set) var producersWaiting = 0
    /// Who is told about appends and backups given up.
    private(set) var listeners = Listeners()

    /// The state of a new log with `destinations` cursors (at least one: the main receiver).
    init(configuration: Configuration, destinations: Int) {
        self.configuration = configuration
        cursors = Array(repeating: Cursor(acknowledged: 0), count: max(1, destinations))
        spool = configuration.hasSpool ? .working : .absent
    }

    /// The state of an earlier stream's log read back from its spool at `now`: one destination,
    /// the entries to deliver, and the end (made up as "sender-restarted" when none was recorded).
    init(recovering contents: SpoolContents, configuration: Configuration, now: UInt64) {
        self.init(configuration: configuration, destinations: 1)
        slots = contents.entries.map {
            Slot(sequence: $0.sequence, storage: Self.storage(recovered: $0), bytes: $0.bytes, endSample: $0.endSampleTime, appendedAt: now)
        }
        heldBytes = contents.entries.reduce(0) { $0 + $1.bytes }
        released = (contents.entries.first?.sequence ?? (contents.acknowledged + 1)) - 1
        cursors = [Cursor(acknowledged: released, heldBytes: heldBytes)]
        appended = StreamPosition(lastSequence: contents.entries.last?.sequence ?? released, endSampleTime: contents.endOfLastEntry)
        end = contents.end
            ?? StreamEnd(position: appended, remainderFrames: 0, reason: "sender-restarted")
    }

    /// Where an entry read back from the spool is: in memory when it was made up in place of
    /// damaged records, in the spool otherwise.
    private static func storage(recovered entry: SpoolContents.Entry) -> Storage {
        switch (entry.replacement, entry.location) {
        case (let packet?, let location?): return .memoryAndSpool(packet, location: location)
        case (let packet?, nil): return .memory(packet)
        case (nil, let location?): return .spool(location: location)
        case (nil, nil): return .gone
        }
    }

    // MARK: - Listeners

    /// Adds a listener called on appends and the stream's end; returns its id.
    mutating func addListener(_ call: @escaping @Sendable () -> Void) -> UInt64 {
        listeners.lastID += 1
        listeners.appended.append((listeners.lastID, call))
        return listeners.lastID
    }

    /// Adds a listener called for each backup given up; returns its id.
    mutating func addDropListener(_ call: @escaping @Sendable (LogDestination, BackupRoom) -> Void) -> UInt64 {
        listeners.lastID += 1
        listeners.givenUp.append((listeners.lastID, call))
        return listeners.lastID
    }

    /// Removes the listener `id` names.
    mutating func removeListener(id: UInt64) {
        listeners.appended.removeAll { $0.id == id }
        listeners.givenUp.removeAll { $0.id == id }
    }

    // MARK: - Appending

    /// Audio from the producer at `now`, when the log may hold `limit` bytes (its share of
    /// `--spool-max`). A real-time producer's audio goes to the overflow file while the log is
    /// full (its room is halved while an episode runs); otherwise it is appended, after the
    /// Gap of any episode this ends. Backups whose backlog would cost the main its audio are given
    /// up first. A producer that is not real time has already waited for room
    /// (`roomForFastSource`): its audio is appended.
    mutating func appendAudio(_ packets: EncodedPackets, levels: AudioLevels?, limit: Int, now: UInt64) -> Step<AudioAppend> {
        var effects = Effects()
        let incoming = packets.payload.count
        var endedOverflow: EndedOverflow?
        if configuration.producerIsRealTime {
            let room = BackupRoom(bytes: overflow == .none ? limit : limit / 2, limit: .spoolMax)
            effects.add(giveUpBackups(beyond: room, incoming: incoming))
            if heldBytes > room.bytes - incoming {
                return Step(decision: .overflow(keepInOverflow(packets)), effects: effects)
            }
            endedOverflow = endOverflow(now: now, effects: &effects)
        }
        let sequence = appendEntry(.audio(packets), bytes: incoming, levels: levels, now: now, effects: &effects)
        return Step(decision: .appended(sequence: sequence, endedOverflow: endedOverflow), effects: effects)
    }

    /// A gap of `length` frames at `sampleTime`: appended (its sequence), or 0 when it falls inside
    /// an overflow episode, whose own Gap then covers it.
    mutating func appendGap(sampleTime: Int64, length: Int64, reason: String, now: UInt64) -> Step<UInt64> {
        if case .running(let start, _, let file) = overflow {
            overflow = .running(start: start, end: sampleTime + length, file: file)
            return Step(decision: 0, effects: Effects())
        }
        var effects = Effects()
        let sequence = appendEntry(.gap(sampleTime: sampleTime, length: length, reason: reason), bytes: 0, now: now, effects: &effects)
        return Step(decision: sequence, effects: effects)
    }

    /// A marker with `label` where the timeline stands (just past the last entry appended): its
    /// sequence, or 0 once the stream ended or the log is closed.
    mutating func appendMarker(label: String, now: UInt64) -> Step<UInt64> {
        guard end == nil, !closed else { return Step(decision: 0, effects: Effects()) }
        var effects = Effects()
        let sequence = appendEntry(.marker(sampleTime: appendedEnd, label: label), bytes: 0, now: now, effects: &effects)
        return Step(decision: sequence, effects: effects)
    }

    /// A gap that the packets appended carry as encoded silence, where the timeline stands: its
    /// sequence, or 0 while an overflow episode runs, once the stream ended or the log is closed,
    /// or while the packets do not reach `sampleTime`.
    mutating func appendFilledGap(sampleTime: Int64, length: Int64, reason: String, now: UInt64) -> Step<UInt64> {
        guard overflow == .none, end == nil, !closed, sampleTime <= appendedEnd else { return Step(decision: 0, effects: Effects()) }
        var effects = Effects()
        let content = LoggedPacket.Content.filledGap(position: appendedEnd, sampleTime: sampleTime, length: length, reason: reason)
        let sequence = appendEntry(content, bytes: 0, now: now, effects: &effects)
        return Step(decision: sequence, effects: effects)
    }

    /// Whether a producer that is not real time may append, when the log may hold `limit` bytes:
    /// the main receiver sets the pace (and the disk, for what waits in memory to be spooled); a
    /// backup that would hold the source up is given up instead. `.waitForRoom` counts the
    /// producer as waiting until `stopWaitingForRoom()`.
    mutating func roomForFastSource(limit: Int) -> Step<FastSourceRoom> {
        guard !closed else { return Step(decision: .enough, effects: Effects()) }
        let effects = giveUpBackups(beyond: fastSourceRoom(limit: limit), incoming: 0)
        if cursors[0].heldBytes <= configuration.memoryLimit && memoryBytes <= configuration.memoryLimit {
            return Step(decision: .enough, effects: effects)
        }
        producersWaiting += 1
        return Step(decision: .waitForRoom, effects: effects)
    }

    /// A producer told to wait for room woke up.
    mutating func stopWaitingForRoom() {
        producersWaiting -= 1
    }

    /// Records the end of the stream after the last entry (and after the Gap of an overflow
    /// episode, which this ends); returns that episode, whose file the producer must finish.
    mutating func finish(endSampleTime: Int64, remainderFrames: Int, reason: String, now: UInt64) -> Step<EndedOverflow?> {
        var effects = Effects()
        let endedOverflow = endOverflow(now: now, effects: &effects)
        let streamEnd = StreamEnd(position: StreamPosition(lastSequence: lastSequence, endSampleTime: endSampleTime), remainderFrames: remainderFrames, reason: reason)
        end = streamEnd
        effects.recordedEnd = streamEnd
        return Step(decision: endedOverflow, effects: effects)
    }

    /// Stops making producers wait (the stream is being torn down).
    mutating func close() -> Effects {
        closed = true
        return Effects(wakesProducers: true)
    }

    private mutating func appendEntry(_ content: LoggedPacket.Content, bytes: Int, levels: AudioLevels? = nil, now: UInt64, effects: inout Effects) -> UInt64 {
        let sequence = appended.nextSequence
        let entry = LoggedPacket(sequence: sequence, content: content, levels: levels)
        appended = appended.appendingEntry(endingAt: max(appended.endSampleTime, entry.endSampleTime))
        slots.append(Slot(sequence: sequence, storage: .memory(entry), bytes: bytes, endSample: entry.endSampleTime, appendedAt: now))
        heldBytes += bytes
        for index in cursors.indices where cursors[index].isServed { cursors[index].heldBytes += bytes }
        appendedBytes += Int64(bytes)
        appendedEnd = max(appendedEnd, entry.endSampleTime)
        memoryBytes += bytes
        effects.appended.append(entry)
        return sequence
    }

    // MARK: - Overflow

    /// Starts an overflow episode for `packets`, or extends the one running, and says where the
    /// audio goes.
    private mutating func keepInOverflow(_ packets: EncodedPackets) -> OverflowWrite {
        let audioEnd = packets.firstSampleTime + Int64(packets.frameCount)
        switch overflow {
        case .none:
            let hasFolder = configuration.hasOverflowFolder
            overflow = .running(start: packets.firstSampleTime, end: audioEnd, file: hasFolder ? .creating : .lost)
            return hasFolder ? .createFileAndWrite : .lostWithoutFolder
        case .running(let start, _, let file):
            overflow = .running(start: start, end: audioEnd, file: file)
            return file.path != nil ? .write : .discard
        }
    }

    /// Records what creating or writing the overflow file gave: the episode keeps its audio
    /// there, or has no file from now on.
    mutating func overflowFile(_ result: OverflowFileResult) {
        guard case .running(let start, let end, _) = overflow else { return }
        switch result {
        case .written(let path): overflow = .running(start: start, end: end, file: .open(path: path))
        case .failed: overflow = .running(start: start, end: end, file: .lost)
        }
    }

    /// Ends the overflow episode if one runs, appending its Gap (when it covered any frames).
    private mutating func endOverflow(now: UInt64, effects: inout Effects) -> EndedOverflow? {
        guard case .running(let start, let end, let file) = overflow else { return nil }
        overflow = .none
        let ended = EndedOverflow(path: file.path, frames: end - start)
        guard ended.frames > 0 else { return ended }
        let reason: String
        if let path = ended.path {
            reason = "spool-full: the sender kept these \(ended.frames) frames in \(path)"
        } else {
            reason = "spool-full: \(ended.frames) frames lost at the sender (no overflow file)"
        }
        _ = appendEntry(.gap(sampleTime: start, length: ended.frames, reason: reason), bytes: 0, now: now, effects: &effects)
        return ended
    }

    // MARK: - Backups given up for the main receiver's sake

    /// The room a source that is not real time leaves its backups: `limit` (this log's share of
    /// `--spool-max`) on disk with a spool that works (at least `memoryLimit`, what the main may
    /// hold itself), `memoryLimit` in memory without one.
    private func fastSourceRoom(limit: Int) -> BackupRoom {
        if spool == .working, limit >= configuration.memoryLimit { return BackupRoom(bytes: limit, limit: .spoolMax) }
        return BackupRoom(bytes: configuration.memoryLimit, limit: .fastSource)
    }

    /// Gives up the backups whose backlog, with `incoming` more bytes, would pass `room` while
    /// the main receiver's fits (`BackupRoom.backupsToGiveUp`). Cheap when every backlog fits (the
    /// log's backlog is the largest of its cursors').
    private mutating func giveUpBackups(beyond room: BackupRoom, incoming: Int) -> Effects {
        var effects = Effects()
        guard cursors.count > 1, heldBytes > room.bytes - incoming else { return effects }
        let backups = cursors.indices.dropFirst().filter { cursors[$0].isServed }.map {
            (destination: LogDestination(index: $0), held: cursors[$0].heldBytes)
        }
        for destination in room.backupsToGiveUp(incoming: incoming, mainHeld: cursors[0].heldBytes, backups: backups) {
            effects.add(drop(destination, as: .givenUp(room: room)))
            effects.givenUp.append(GivenUpBackup(destination: destination, room: room))
        }
        return effects
    }

    // MARK: - Spool

    /// The spool wrote entry `sequence` at `location`: its payload leaves memory if memory is
    /// over its limit or the entry was sent to every destination still served.
    mutating func entrySpooled(_ sequence: UInt64, at location: SpoolLocation) -> Effects {
        guard let index = slotIndex(sequence) else { return Effects() }
        guard let packet = slots[index].storage.packet else {
            slots[index].storage = .spool(location: location)
            return Effects()
        }
        guard memoryBytes > configuration.memoryLimit || sequence <= sentToAll else {
            slots[index].storage = .memoryAndSpool(packet, location: location)
            return Effects()
        }
        slots[index].storage = .spool(location: location)
        memoryBytes -= slots[index].bytes
        return Effects(wakesProducers: true)  // a source that is not real time may wait for memory
    }

    /// A spool write or sync failed: whether this is the first failure (the one to report). A
    /// source waiting for the disk now waits for memory only.
    mutating func spoolFailed() -> Step<Bool> {
        let first = spool == .working
        if first { spool = .failed }
        return Step(decision: first, effects: Effects(wakesProducers: true))
    }

    // MARK: - Network side

    /// Entries through `sequence` were sent to `destination`. With a spool, payloads spooled and
    /// sent to every destination still served leave memory; without one this changes nothing.
    mutating func markSent(through sequence: UInt64, for destination: LogDestination) -> Effects {
        guard spool != .absent, cursors.indices.contains(destination.index), sequence > cursors[destination.index].sentThrough else { return Effects() }
        cursors[destination.index].sentThrough = sequence
        var effects = Effects()
        dropSentPayloads(effects: &effects)
        return effects
    }

    /// `destination` holds every entry through `sequence` durably, as it reported at `now`.
    /// Entries every destination still served holds are released. A stale acknowledgement
    /// releases nothing but counts as the destination's latest report.
    mutating func acknowledge(through sequence: UInt64, for destination: LogDestination, now: UInt64) -> Effects {
        var effects = Effects()
        guard cursors.indices.contains(destination.index) else { return effects }
        let index = destination.index
        cursors[index].lastAcknowledgedAt = now
        let cursor = cursors[index]
        guard cursor.isServed, sequence > cursor.acknowledged else { return effects }
        let through = min(sequence, lastSequence)
        if let from = slotIndex(cursor.acknowledged + 1), let to = slotIndex(through), from <= to {
            for slot in slots[from...to] {
                cursors[index].heldBytes -= slot.bytes
                cursors[index].acknowledgedEnd = max(cursors[index].acknowledgedEnd, slot.endSample)
            }
        }
        if through > cursor.acknowledged {
            cursors[index].lastAdvancedAt = now
            // A source waiting for the main receiver may go on, though nothing leaves the log
            // while a backup still lacks it (that backup may now be the one to give up).
            effects.wakesProducers = true
        }
        cursors[index].acknowledged = max(cursor.acknowledged, through)
        let releasedAny = releaseAcknowledged(effects: &effects)
        if releasedAny || destination == .main { effects.spoolAcknowledgement = spoolAcknowledgement() }
        return effects
    }

    /// Stops keeping entries for `destination` (dropped by its sender): it cannot be served again.
    mutating func dropDestination(_ destination: LogDestination) -> Effects {
        drop(destination, as: .dropped)
    }

    /// Drops `destination`'s cursor for `reason` if it is still served, releasing what only it held.
    private mutating func drop(_ destination: LogDestination, as reason: Service) -> Effects {
        var effects = Effects()
        guard cursors.indices.contains(destination.index), cursors[destination.index].isServed else { return effects }
        cursors[destination.index].service = reason
        cursors[destination.index].heldBytes = 0
        if spool != .absent { dropSentPayloads(effects: &effects) }
        if releaseAcknowledged(effects: &effects) { effects.spoolAcknowledgement = spoolAcknowledgement() }
        return effects
    }

    /// What the spool must record now: nil without a spool.
    private func spoolAcknowledgement() -> SpoolAcknowledgement? {
        guard spool != .absent else { return nil }
        return SpoolAcknowledgement(main: StreamPosition(lastSequence: cursors[0].acknowledged, endSampleTime: cursors[0].acknowledgedEnd), released: released)
    }

    /// Drops the payloads of spooled entries every destination still served was sent.
    private mutating func dropSentPayloads(effects: inout Effects) {
        let sentToEveryone = lowestServed(\.sentThrough)
        guard sentToEveryone > sentToAll else { return }
        let from = slotIndex(sentToAll + 1) ?? head
        sentToAll = sentToEveryone
        guard let through = slotIndex(min(sentToEveryone, lastSequence)), from <= through else { return }
        for index in from...through {
            guard case .memoryAndSpool(_, let location) = slots[index].storage else { continue }
            slots[index].storage = .spool(location: location)
            memoryBytes -= slots[index].bytes
        }
        effects.wakesProducers = true  // a source that is not real time may wait for memory
    }

    /// Releases the entries every destination still served acknowledged; whether any was.
    private mutating func releaseAcknowledged(effects: inout Effects) -> Bool {
        let heldByAll = lowestServed(\.acknowledged)
        guard heldByAll > released else { return false }
        released = min(heldByAll, lastSequence)
        while head < slots.count, slots[head].sequence <= released {
            releasedEnd = max(releasedEnd, slots[head].endSample)
            heldBytes -= slots[head].bytes
            if slots[head].storage.packet != nil {
                memoryBytes -= slots[head].bytes
                // The payload goes now (an entry may hold a whole capture buffer); the slot
                // itself goes with the next compaction.
                slots[head].storage = slots[head].storage.withoutPayload
            }
            head += 1
        }
        // Compact once released slots are half the array.
        if head >= 16, head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
        effects.wakesProducers = true
        return true
    }

    /// The lowest `position` among the destinations still served (the last sequence when none
    /// is). No allocation.
    private func lowestServed(_ position: KeyPath<Cursor, UInt64>) -> UInt64 {
        var lowest = lastSequence
        for cursor in cursors where cursor.isServed { lowest = min(lowest, cursor[keyPath: position]) }
        return lowest
    }

    // MARK: - Reading

    /// The index in `slots` of kept entry `sequence`; nil when it is released or not appended yet.
    func slotIndex(_ sequence: UInt64) -> Int? {
        guard head < slots.count else { return nil }
        let first = slots[head].sequence
        guard sequence >= first else { return nil }
        let index = head + Int(sequence - first)
        return index < slots.count ? index : nil
    }

    /// Up to `maxCount` kept slots from `sequence` on.
    func keptSlots(from sequence: UInt64, maxCount: Int) -> ArraySlice<Slot> {
        guard let start = slotIndex(sequence) else { return [] }
        return slots[start..<min(slots.count, start + maxCount)]
    }

    /// The highest sequence appended (0 before any).
    var lastSequence: UInt64 { appended.lastSequence }

    /// Whether the stream ended and every destination still served acknowledged every entry.
    var isComplete: Bool { end != nil && released == lastSequence }

    /// Whether the stream ended and `destination` acknowledged every entry.
    func isComplete(for destination: LogDestination) -> Bool {
        guard end != nil, let cursor = cursor(destination) else { return false }
        return cursor.acknowledged == lastSequence
    }

    /// `destination`'s cursor; nil for a destination the log never had.
    func cursor(_ destination: LogDestination) -> Cursor? {
        cursors.indices.contains(destination.index) ? cursors[destination.index] : nil
    }

    /// The log's figures of `PacketLog.Progress`: acknowledged means released, and the last
    /// acknowledgement is the latest from any destination.
    var progress: PacketLog.Progress {
        PacketLog.Progress(
            appendedBytes: appendedBytes, appendedEndSampleTime: appendedEnd, acknowledgedEndSampleTime: releasedEnd,
            unacknowledgedBytes: heldBytes, lastAcknowledgementAt: cursors.compactMap(\.lastAcknowledgedAt).max(),
            oldestUnacknowledgedAppendedAt: head < slots.count ? slots[head].appendedAt : nil)
    }

    /// `destination`'s figures of `PacketLog.Progress`.
    func progress(for destination: LogDestination) -> PacketLog.Progress {
        guard let cursor = cursor(destination) else {
            return PacketLog.Progress(appendedBytes: appendedBytes, appendedEndSampleTime: appendedEnd, acknowledgedEndSampleTime: 0, unacknowledgedBytes: 0)
        }
        let oldest = cursor.isServed ? slotIndex(cursor.acknowledged + 1).map { slots[$0].appendedAt } : nil
        return PacketLog.Progress(
            appendedBytes: appendedBytes, appendedEndSampleTime: appendedEnd, acknowledgedEndSampleTime: cursor.acknowledgedEnd,
            unacknowledgedBytes: cursor.heldBytes, lastAcknowledgementAt: cursor.lastAcknowledgedAt, oldestUnacknowledgedAppendedAt: oldest,
            lastAdvanceAt: cursor.lastAdvancedAt)
    }
}
