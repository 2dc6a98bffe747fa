import CaptureCore
import CaptureWire
import Foundation

/// The receiver's in-memory table of the streams it has seen, for the console and the HTTP API:
/// one `StreamSnapshot` per stream (live, reconnecting or finished), and an event feed (opened,
/// resumed, gap, closed, levels, alarm) for Server-Sent Events. Each stream runs its own
/// `StreamAlarmMachine` (unless alarms are off); what it raises and clears goes to the feed and to
/// the alarm observer.
///
/// Connections update their own stream's entry under that entry's lock only, so thousands of
/// streams updating at once do not contend; the table's lock is taken when a stream opens, for
/// snapshots and for the periodic `sweep()`. Finished streams leave the table after
/// `Settings.finishedRetention`, and at most `Settings.maximumFinished` of them are kept.
///
/// Sendability (`@unchecked Sendable`): `lock` guards `entries`, each `StreamEntry` guards its own state with its own lock, the rest is immutable.
public final class StreamDirectory: @unchecked Sendable {
    /// How long entries stay and how the event feed is paced.
    public struct Settings: Sendable, Equatable {
        /// The receiver's resume window: a reconnecting stream whose sender has not come back
        /// within it is finished (`--resume-window`).
        public var resumeWindow: TimeInterval
        /// How long a finished stream stays in the table.
        public var finishedRetention: TimeInterval
        /// The most finished streams kept; the oldest go first.
        public var maximumFinished: Int
        /// The shortest time between two levels events of one stream.
        public var levelsInterval: TimeInterval
        /// Events a subscriber may have unread before it is dropped.
        public var subscriberBufferLimit: Int
        /// When each stream's alarms are raised and cleared (`StreamAlarmPolicy.off`: never).
        public var alarms: StreamAlarmPolicy

        public init(
            resumeWindow: TimeInterval, finishedRetention: TimeInterval = 600, maximumFinished: Int = 1_000, levelsInterval: TimeInterval = 0.1,
            subscriberBufferLimit: Int = 4_096, alarms: StreamAlarmPolicy = StreamAlarmPolicy()
        ) {
            self.alarms = alarms
            self.resumeWindow = resumeWindow
            self.finishedRetention = finishedRetention
            self.maximumFinished = maximumFinished
            self.levelsInterval = levelsInterval
            self.subscriberBufferLimit = subscriberBufferLimit
        }
    }

    private let settings: Settings
    private let now: @Sendable () -> Date
    private let hub: StreamEventHub
    private let alarmObserver: @Sendable (StreamAlarmEvent) -> Void
    private let restoredAlarms: @Sendable (UUID) -> [StreamAlarmKind]
    /// Guards `entries`.
    private let lock = NSLock()
    private var entries: [UUID: StreamEntry] = [:]

    /// An empty directory; `now` is the clock (tests give their own); `alarmObserver` hears every
    /// alarm raised or cleared (the receiver logs it and sets its metric), on the thread that
    /// caused it, in each stream's order. `restoredAlarms` names the alarms a stream had raised
    /// before the receiver restarted (`AlarmHook.restoredAlarms(of:)`): a stream that resumes here
    /// gets them back.
    public init(
        settings: Settings, now: @escaping @Sendable () -> Date = { Date() }, alarmObserver: @escaping @Sendable (StreamAlarmEvent) -> Void = { _ in },
        restoredAlarms: @escaping @Sendable (UUID) -> [StreamAlarmKind] = { _ in [] }
    ) {
        self.settings = settings
        self.now = now
        self.alarmObserver = alarmObserver
        self.restoredAlarms = restoredAlarms
        hub = StreamEventHub(bufferLimit: settings.subscriberBufferLimit)
    }

    /// Every stream in the table, oldest first (by start time, then name).
    public func snapshot() -> [StreamSnapshot] {
        sweep()
        let all = lock.withLock { Array(entries.values) }
        return all.map { $0.snapshot() }.sorted { ($0.started, $0.name, $0.id.uuidString) < ($1.started, $1.name, $1.id.uuidString) }
    }

    /// One stream's timeline (connections, gaps, pauses, markers, alarms), or nil when the table
    /// does not hold it.
    public func timeline(of id: UUID) -> StreamTimelineSnapshot? {
        lock.withLock { entries[id] }?.timelineSnapshot()
    }

    /// One stream's row, or nil when the table does not hold it.
    public func snapshot(of id: UUID) -> StreamSnapshot? {
        sweep()
        return lock.withLock { entries[id] }?.snapshot()
    }

    /// The streams in the table (finished ones included).
    public var count: Int { lock.withLock { entries.count } }

    /// A new subscriber's events, from now on. A subscriber that leaves
    /// `Settings.subscriberBufferLimit` events unread is dropped: its sequence ends with
    /// `StreamEventFeedError.fellBehind` (it should reconnect and take a fresh snapshot).
    public func events() -> AsyncThrowingStream<StreamEvent, any Error> {
        hub.subscribe()
    }

    /// Subscribers now.
    public var subscriberCount: Int { hub.count }

    /// Finishes reconnecting streams whose resume window has passed (a `closed` event each),
    /// gives each stream's alarms the time (link down, no audio, the clipping window), and
    /// removes finished streams beyond their retention. Snapshots sweep first; the receiver also
    /// calls it every second.
    public func sweep() {
        let time = now()
        let all = lock.withLock { entries }
        var finished: [(id: UUID, since: Date)] = []
        for (id, entry) in all {
            entry.tick(at: time)
            if let since = entry.expireIfReconnecting(before: time.addingTimeInterval(-settings.resumeWindow), at: time) {
                finished.append((id, since))
            } else if let since = entry.finishedSince {
                finished.append((id, since))
            }
        }
        let cutoff = time.addingTimeInterval(-settings.finishedRetention)
        var leaving = Set(finished.filter { $0.since < cutoff }.map(\.id))
        let kept = finished.filter { !leaving.contains($0.id) }
        if kept.count > settings.maximumFinished {
            for oldest in kept.sorted(by: { $0.since < $1.since }).prefix(kept.count - settings.maximumFinished) {
                leaving.insert(oldest.id)
            }
        }
        guard !leaving.isEmpty else { return }
        lock.withLock {
            for id in leaving where entries[id]?.finishedSince != nil { entries[id] = nil }
        }
    }
}

extension StreamDirectory: StreamDirectoryFeed {
    func streamOpened(_ opening: StreamOpening) -> any StreamActivityRecorder {
        let (entry, isNew) = lock.withLock { () -> (StreamEntry, Bool) in
            if let existing = entries[opening.id] { return (existing, false) }
            let entry = StreamEntry(
                opening: opening, hub: hub, levelsInterval: settings.levelsInterval, alarms: settings.alarms, alarmObserver: alarmObserver, now: now)
            entries[opening.id] = entry
            return (entry, true)
        }
        let epoch = isNew ? entry.currentEpoch : entry.reopen(opening)
        let row = entry.snapshot()
        hub.publish(opening.resumed ? .resumed(row) : .opened(row))
        if isNew, opening.resumed {
            // Resumed after a restart: the alarms it had raised are raised again.
            let kinds = restoredAlarms(opening.id)
            if !kinds.isEmpty { entry.restoreAlarms(kinds) }
        }
        return StreamEntryRecorder(entry: entry, epoch: epoch)
    }
}

/// Why an event subscriber's sequence ended.
public enum StreamEventFeedError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The subscriber left this many events unread and was dropped.
    case fellBehind(unread: Int)

    public var description: String {
        switch self {
        case .fellBehind(let unread):
            return "the stream event feed dropped this subscriber: it left \(unread) events unread; reconnect and take a fresh list of streams"
        }
    }
}

/// One connection's handle on its stream's entry: updates from an earlier connection of the same
/// stream (a late close) are ignored once a newer one opened it.
final class StreamEntryRecorder: StreamActivityRecorder {
    private let entry: StreamEntry
    private let epoch: Int

    init(entry: StreamEntry, epoch: Int) {
        self.entry = entry
        self.epoch = epoch
    }

    func audioReceived(endSampleTime: Int64, levels: AudioLevels?) {
        entry.audioReceived(endSampleTime: endSampleTime, levels: levels, epoch: epoch)
    }

    func gapRecorded(sampleTime: Int64, lengthFrames: Int64, reason: String) {
        entry.gapRecorded(sampleTime: sampleTime, lengthFrames: lengthFrames, reason: reason, epoch: epoch)
    }

    func markerRecorded(sampleTime: Int64, label: String) {
        entry.markerRecorded(sampleTime: sampleTime, label: label, epoch: epoch)
    }

    func positionsChanged(durableSampleTime: Int64, acknowledgedSampleTime: Int64?) {
        entry.positionsChanged(durableSampleTime: durableSampleTime, acknowledgedSampleTime: acknowledgedSampleTime, epoch: epoch)
    }

    func connectionEnded(resumable: Bool) {
        entry.connectionEnded(resumable: resumable, epoch: epoch)
    }
}

/// One stream's entry. Every field is guarded by `lock`; events are published while holding it,
/// so a stream's events reach subscribers in the order they happened (the hub's lock is always
/// taken after an entry's, never before).
///
/// Sendability (`@unchecked Sendable`): every mutable field is read and written only under `lock`.
final class StreamEntry: @unchecked Sendable {
    private let lock = NSLock()
    private let hub: StreamEventHub
    private let levelsInterval: TimeInterval
    private let now: @Sendable () -> Date
    private var opening: StreamOpening
    private var epoch = 0
    private var state: StreamState = .live
    /// When the state last changed to reconnecting or finished.
    private var stateSince: Date?
    private var durableSampleTime: Int64
    private var acknowledgedSampleTime: Int64
    private var lastAudio: Date?
    private var gapCount = 0
    private var gapFrames: Int64 = 0
    private var levels: AudioLevels?
    private var lastLevelsEvent = Date.distantPast
    private var alarms: StreamAlarmMachine?
    private let policy: StreamAlarmPolicy
    private let alarmObserver: @Sendable (StreamAlarmEvent) -> Void
    private var timeline = StreamTimeline()

    init(
        opening: StreamOpening, hub: StreamEventHub, levelsInterval: TimeInterval, alarms policy: StreamAlarmPolicy,
        alarmObserver: @escaping @Sendable (StreamAlarmEvent) -> Void, now: @escaping @Sendable () -> Date
    ) {
        self.opening = opening
        self.hub = hub
        self.levelsInterval = levelsInterval
        self.alarmObserver = alarmObserver
        self.now = now
        durableSampleTime = opening.durableSampleTime
        acknowledgedSampleTime = opening.durableSampleTime
        self.policy = policy
        alarms = policy.conditions(forStream: opening.name).map { StreamAlarmMachine(conditions: $0, startedAt: now()) }
        timeline.append(Self.connected(opening, at: now()))
    }

    /// The timeline entry of a connection accepted.
    private static func connected(_ opening: StreamOpening, at time: Date) -> StreamTimelineEntry {
        StreamTimelineEntry(
            at: time, kind: opening.resumed ? .resumed : .opened,
            detail: (opening.resumed ? "resumed from " : "from ") + opening.peer + " into " + opening.file)
    }

    /// The stream's timeline, oldest first.
    func timelineSnapshot() -> StreamTimelineSnapshot {
        lock.withLock { StreamTimelineSnapshot(id: opening.id, dropped: timeline.dropped, entries: timeline.entries) }
    }

    /// Feeds the stream's alarm machine; publishes and reports what it raised or cleared. Call
    /// with `lock` held, so a stream's alarms are reported in order.
    private func feedAlarms(_ event: StreamAlarmMachine.Event, at time: Date) {
        guard var machine = alarms else { return }
        let transitions = machine.handle(event, at: time)
        alarms = machine
        publish(transitions, raised: machine.raised)
    }

    /// Publishes and reports alarms raised or cleared. Call with `lock` held.
    private func publish(_ transitions: [StreamAlarmTransition], raised: [StreamAlarmKind]) {
        for transition in transitions {
            timeline.append(StreamTimelineEntry(
                at: now(), kind: transition.change == .raised ? .alarmRaised : .alarmCleared,
                detail: transition.kind.rawValue + ": " + transition.detail))
            let alarm = StreamAlarmEvent(id: opening.id, name: opening.name, transition: transition, raised: raised)
            hub.publish(.alarm(alarm))
            alarmObserver(alarm)
        }
    }

    /// Raises again the alarms the stream had raised before the receiver restarted.
    func restoreAlarms(_ kinds: [StreamAlarmKind]) {
        lock.withLock {
            guard var machine = alarms else { return }
            let transitions = machine.restore(kinds, at: now())
            alarms = machine
            publish(transitions, raised: machine.raised)
        }
    }

    /// Gives the stream's alarms the time.
    func tick(at time: Date) {
        lock.withLock { feedAlarms(.tick, at: time) }
    }

    var currentEpoch: Int { lock.withLock { epoch } }

    /// The stream is accepted again (a resume, or a new stream reusing the id of a finished one):
    /// live again, with the new connection's details. Returns the new connection's epoch.
    func reopen(_ newOpening: StreamOpening) -> Int {
        lock.withLock {
            epoch += 1
            if !newOpening.resumed {
                // A new recording under a known id: its counters and its alarms start afresh.
                gapCount = 0
                gapFrames = 0
                lastAudio = nil
                levels = nil
                feedAlarms(.connection(.finished), at: now())
                alarms = policy.conditions(forStream: newOpening.name).map { StreamAlarmMachine(conditions: $0, startedAt: now()) }
            }
            opening = newOpening
            state = .live
            stateSince = nil
            timeline.append(Self.connected(newOpening, at: now()))
            feedAlarms(.connection(.live), at: now())
            durableSampleTime = newOpening.durableSampleTime
            acknowledgedSampleTime = newOpening.durableSampleTime
            return epoch
        }
    }

    func audioReceived(endSampleTime: Int64, levels newLevels: AudioLevels?, epoch caller: Int) {
        let time = now()
        lock.withLock {
            guard caller == epoch else { return }
            lastAudio = time
            feedAlarms(.audio(levels: newLevels), at: time)
            guard let newLevels else { return }
            levels = newLevels
            if time.timeIntervalSince(lastLevelsEvent) >= levelsInterval, hub.hasSubscribers {
                lastLevelsEvent = time
                hub.publish(.levels(StreamLevelsUpdate(id: opening.id, levels: StreamLevels(newLevels))))
            }
        }
    }

    func gapRecorded(sampleTime: Int64, lengthFrames: Int64, reason: String, epoch caller: Int) {
        lock.withLock {
            guard caller == epoch else { return }
            gapCount += 1
            let at = seconds(sampleTime - opening.startSampleTime)
            let length = seconds(lengthFrames)
            timeline.append(StreamTimelineEntry(
                at: now(), kind: reason == "paused" ? .pause : .gap, streamSeconds: at,
                detail: String(format: "%.3f s", length) + (reason == "paused" ? "" : ", " + reason)))
            // The protocol keeps gaps within the sample timeline; saturate anyway rather than trap.
            let (sum, overflow) = gapFrames.addingReportingOverflow(max(0, lengthFrames))
            gapFrames = overflow ? .max : sum
            hub.publish(.gap(StreamGap(id: opening.id, atSeconds: at, seconds: length, reason: reason, gapCount: gapCount)))
        }
    }

    /// A marker the person recording dropped: published as a `marker` event.
    func markerRecorded(sampleTime: Int64, label: String, epoch caller: Int) {
        lock.withLock {
            guard caller == epoch else { return }
            let at = seconds(sampleTime - opening.startSampleTime)
            timeline.append(StreamTimelineEntry(at: now(), kind: .marker, streamSeconds: at, detail: label.isEmpty ? "marker" : label))
            hub.publish(.marker(StreamMarker(id: opening.id, atSeconds: at, label: label)))
        }
    }

    func positionsChanged(durableSampleTime durable: Int64, acknowledgedSampleTime acknowledged: Int64?, epoch caller: Int) {
        lock.withLock {
            guard caller == epoch else { return }
            durableSampleTime = max(durableSampleTime, durable)
            if let acknowledged { acknowledgedSampleTime = max(acknowledgedSampleTime, acknowledged) }
        }
    }

    func connectionEnded(resumable: Bool, epoch caller: Int) {
        lock.withLock {
            guard caller == epoch, state == .live else { return }
            state = resumable ? .reconnecting : .finished
            let time = now()
            stateSince = time
            timeline.append(StreamTimelineEntry(
                at: time, kind: resumable ? .reconnecting : .finished,
                detail: resumable ? "the connection was lost; the file waits for the sender to resume it" : "the stream ended"))
            hub.publish(.closed(row()))
            feedAlarms(.connection(state), at: time)
        }
    }

    /// Finishes the stream when it has been reconnecting since before `cutoff` (a `closed` event);
    /// returns when it finished, or nil when it is not finished now.
    func expireIfReconnecting(before cutoff: Date, at time: Date) -> Date? {
        lock.withLock {
            if state == .reconnecting, let since = stateSince, since < cutoff {
                state = .finished
                stateSince = time
                timeline.append(StreamTimelineEntry(at: time, kind: .finished, detail: "the sender did not resume within the resume window"))
                hub.publish(.closed(row()))
                feedAlarms(.connection(.finished), at: time)
            }
            return state == .finished ? stateSince : nil
        }
    }

    /// When the stream finished, or nil while it is live or reconnecting.
    var finishedSince: Date? { lock.withLock { state == .finished ? stateSince : nil } }

    func snapshot() -> StreamSnapshot { lock.withLock { row() } }

    /// The stream's row; call with `lock` held.
    private func row() -> StreamSnapshot {
        StreamSnapshot(
            id: opening.id, name: opening.name, peer: opening.peer, format: opening.format.description, state: state, started: opening.started,
            secondsOnDisk: seconds(durableSampleTime - opening.startSampleTime),
            secondsAcknowledged: seconds(acknowledgedSampleTime - opening.startSampleTime), lastAudioReceived: lastAudio, gapCount: gapCount,
            gapSeconds: seconds(gapFrames), file: opening.file, levels: levels.map(StreamLevels.init), alarms: alarms?.raised ?? [],
            captureID: opening.capture?.id, encoding: opening.capture?.encoding)
    }

    private func seconds(_ frames: Int64) -> Double { opening.format.seconds(frames: max(0, frames)) }
}

/// The subscribers of the directory's event feed, each with a bounded buffer.
///
/// Sendability (`@unchecked Sendable`): `lock` guards `subscribers` and `nextID`; the continuations are thread-safe.
final class StreamEventHub: @unchecked Sendable {
    typealias Continuation = AsyncThrowingStream<StreamEvent, any Error>.Continuation

    private let bufferLimit: Int
    /// Guards `subscribers` and `nextID`.
    private let lock = NSLock()
    private var subscribers: [Int: Continuation] = [:]
    private var nextID = 0

    init(bufferLimit: Int) {
        self.bufferLimit = max(1, bufferLimit)
    }

    var count: Int { lock.withLock { subscribers.count } }
    var hasSubscribers: Bool { lock.withLock { !subscribers.isEmpty } }

    func subscribe() -> AsyncThrowingStream<StreamEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: StreamEvent.self, bufferingPolicy: .bufferingOldest(bufferLimit))
        let id = lock.withLock {
            nextID += 1
            subscribers[nextID] = continuation
            return nextID
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return stream
    }

    /// Hands `event` to every subscriber; one whose buffer is full is dropped.
    func publish(_ event: StreamEvent) {
        let dropped: [Continuation] = lock.withLock {
            guard !subscribers.isEmpty else { return [] }
            var dropped: [Continuation] = []
            for (id, continuation) in subscribers {
                if case .dropped = continuation.yield(event) {
                    subscribers[id] = nil
                    dropped.append(continuation)
                }
            }
            return dropped
        }
        // Finished outside the lock: finishing runs `onTermination`, which takes it.
        for continuation in dropped {
            continuation.finish(throwing: StreamEventFeedError.fellBehind(unread: bufferLimit))
        }
    }

    private func remove(_ id: Int) {
        _ = lock.withLock { subscribers.removeValue(forKey: id) }
    }
}
