import CaptureCore
import CaptureWire
import Foundation
import Synchronization

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
/// Sendability: `entries` is in a `Mutex`, each `StreamEntry` keeps its own state in a `Mutex` of its own, the rest is immutable.
public final class StreamDirectory: Sendable {
    /// How long entries stay and how the event feed is paced.
    public struct Settings: Sendable, Equatable {
        /// The receiver's resume window: a reconnecting stream whose sender has not come back
        /// within it is finished (`--resume-window`).
        public var resumeWindow: Duration
        /// How long a finished stream stays in the table before the sweep removes it.
        public var finishedRetention: Duration
        /// The most finished streams kept; the oldest go first.
        public var maximumFinished: Int
        /// The shortest time between two levels events of one stream, so subscribers are not
        /// flooded with one per AudioData; zero publishes every one.
        public var levelsInterval: Duration
        /// Events a subscriber may have unread before it is dropped.
        public var subscriberBufferLimit: Int
        /// When each stream's alarms are raised and cleared (`StreamAlarmPolicy.off`: never).
        public var alarms: StreamAlarmPolicy

        public init(
            resumeWindow: Duration, finishedRetention: Duration = .seconds(600), maximumFinished: Int = 1_000, levelsInterval: Duration = .milliseconds(100),
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
    private let entries = Mutex<[UUID: StreamEntry]>([:])

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
        let all = entries.withLock { Array($0.values) }
        return all.map { $0.snapshot() }.sorted { ($0.started, $0.name, $0.id.uuidString) < ($1.started, $1.name, $1.id.uuidString) }
    }

    /// One stream's timeline (connections, gaps, pauses, markers, alarms), or nil when the table
    /// does not hold it.
    public func timeline(of id: UUID) -> StreamTimelineSnapshot? {
        entries.withLock { $0[id] }?.timelineSnapshot()
    }

    /// One stream's row, or nil when the table does not hold it.
    public func snapshot(of id: UUID) -> StreamSnapshot? {
        sweep()
        return entries.withLock { $0[id] }?.snapshot()
    }

    /// The streams in the table (finished ones included).
    public var count: Int { entries.withLock { $0.count } }

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
        let all = entries.withLock { $0 }
        var finished: [(id: UUID, since: Date)] = []
        for (id, entry) in all {
            entry.tick(at: time)
            if let since = entry.expireIfReconnecting(before: time.addingTimeInterval(-settings.resumeWindow.inSeconds), at: time) {
                finished.append((id, since))
            } else if let since = entry.finishedSince {
                finished.append((id, since))
            }
        }
        let cutoff = time.addingTimeInterval(-settings.finishedRetention.inSeconds)
        var leaving = Set(finished.filter { $0.since < cutoff }.map(\.id))
        let kept = finished.filter { !leaving.contains($0.id) }
        if kept.count > settings.maximumFinished {
            for oldest in kept.sorted(by: { $0.since < $1.since }).prefix(kept.count - settings.maximumFinished) {
                leaving.insert(oldest.id)
            }
        }
        guard !leaving.isEmpty else { return }
        entries.withLock { entries in
            for id in leaving where entries[id]?.finishedSince != nil { entries[id] = nil }
        }
    }
}

extension StreamDirectory: StreamDirectoryFeed {
    func streamOpened(_ opening: StreamOpening) -> any StreamActivityRecorder {
        let (entry, isNew) = entries.withLock { entries -> (StreamEntry, Bool) in
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

/// One stream's entry. Every mutable field is in `stream`, a `Mutex`; events are published while
/// holding its lock, so a stream's events reach subscribers in the order they happened (the hub's
/// lock is always taken after an entry's, never before).
///
/// Sendability: every mutable field is in a `Mutex`; the hub is thread-safe itself, the rest is
/// immutable.
final class StreamEntry: Sendable {
    private struct State {
        var opening: StreamOpening
        var epoch = 0
        var state: StreamState = .live
        /// When the state last changed to reconnecting or finished.
        var stateSince: Date?
        var durableSampleTime: Int64
        var acknowledgedSampleTime: Int64
        var lastAudio: Date?
        var gapCount = 0
        var gapFrames: Int64 = 0
        var levels: AudioLevels?
        var lastLevelsEvent = Date.distantPast
        var alarms: StreamAlarmMachine?
        var timeline: StreamTimeline

        /// The stream's row.
        func row() -> StreamSnapshot {
            StreamSnapshot(
                id: opening.id, name: opening.name, peer: opening.peer, format: opening.format.description, state: state, started: opening.started,
                secondsOnDisk: seconds(durableSampleTime - opening.startSampleTime),
                secondsAcknowledged: seconds(acknowledgedSampleTime - opening.startSampleTime), lastAudioReceived: lastAudio, gapCount: gapCount,
                gapSeconds: seconds(gapFrames), file: opening.file, levels: levels.map(StreamLevels.init), alarms: alarms?.raised ?? [],
                captureID: opening.capture?.id, encoding: opening.capture?.encoding)
        }

        func seconds(_ frames: Int64) -> Double { opening.format.seconds(frames: max(0, frames)) }
    }

    private let hub: StreamEventHub
    private let levelsInterval: Duration
    private let now: @Sendable () -> Date
    private let policy: StreamAlarmPolicy
    private let alarmObserver: @Sendable (StreamAlarmEvent) -> Void
    private let stream: Mutex<State>

    init(
        opening: StreamOpening, hub: StreamEventHub, levelsInterval: Duration, alarms policy: StreamAlarmPolicy,
        alarmObserver: @escaping @Sendable (StreamAlarmEvent) -> Void, now: @escaping @Sendable () -> Date
    ) {
        self.hub = hub
        self.levelsInterval = levelsInterval
        self.alarmObserver = alarmObserver
        self.now = now
        self.policy = policy
        let alarms = policy.conditions(forStream: opening.name).map { StreamAlarmMachine(conditions: $0, startedAt: now()) }
        var timeline = StreamTimeline()
        timeline.append(Self.connected(opening, at: now()))
        stream = Mutex(State(
            opening: opening, durableSampleTime: opening.durableSampleTime, acknowledgedSampleTime: opening.durableSampleTime, alarms: alarms,
            timeline: timeline))
    }

    /// The timeline entry of a connection accepted.
    private static func connected(_ opening: StreamOpening, at time: Date) -> StreamTimelineEntry {
        StreamTimelineEntry(
            at: time, kind: opening.resumed ? .resumed : .opened,
            detail: (opening.resumed ? "resumed from " : "from ") + opening.peer + " into " + opening.file)
    }

    /// The stream's timeline, oldest first.
    func timelineSnapshot() -> StreamTimelineSnapshot {
        stream.withLock { StreamTimelineSnapshot(id: $0.opening.id, dropped: $0.timeline.dropped, entries: $0.timeline.entries) }
    }

    /// Feeds the stream's alarm machine; publishes and reports what it raised or cleared. Call
    /// with `stream`'s lock held (it is given its state), so a stream's alarms are reported in order.
    private func feedAlarms(_ event: StreamAlarmMachine.Event, at time: Date, in stream: inout State) {
        guard var machine = stream.alarms else { return }
        let transitions = machine.handle(event, at: time)
        stream.alarms = machine
        publish(transitions, raised: machine.raised, in: &stream)
    }

    /// Publishes and reports alarms raised or cleared. Call with `stream`'s lock held.
    private func publish(_ transitions: [StreamAlarmTransition], raised: [StreamAlarmKind], in stream: inout State) {
        for transition in transitions {
            stream.timeline.append(StreamTimelineEntry(
                at: now(), kind: transition.change == .raised ? .alarmRaised : .alarmCleared,
                detail: transition.kind.rawValue + ": " + transition.detail))
            let alarm = StreamAlarmEvent(id: stream.opening.id, name: stream.opening.name, transition: transition, raised: raised)
            hub.publish(.alarm(alarm))
            alarmObserver(alarm)
        }
    }

    /// Raises again the alarms the stream had raised before the receiver restarted.
    func restoreAlarms(_ kinds: [StreamAlarmKind]) {
        stream.withLock { stream in
            guard var machine = stream.alarms else { return }
            let transitions = machine.restore(kinds, at: now())
            stream.alarms = machine
            publish(transitions, raised: machine.raised, in: &stream)
        }
    }

    /// Gives the stream's alarms the time.
    func tick(at time: Date) {
        stream.withLock { feedAlarms(.tick, at: time, in: &$0) }
    }

    var currentEpoch: Int { stream.withLock { $0.epoch } }

    /// The stream is accepted again (a resume, or a new stream reusing the id of a finished one):
    /// live again, with the new connection's details. Returns the new connection's epoch.
    func reopen(_ newOpening: StreamOpening) -> Int {
        stream.withLock { stream in
            stream.epoch += 1
            if !newOpening.resumed {
                // A new recording under a known id: its counters and its alarms start afresh.
                stream.gapCount = 0
                stream.gapFrames = 0
                stream.lastAudio = nil
                stream.levels = nil
                feedAlarms(.connection(.finished), at: now(), in: &stream)
                stream.alarms = policy.conditions(forStream: newOpening.name).map { StreamAlarmMachine(conditions: $0, startedAt: now()) }
            }
            stream.opening = newOpening
            stream.state = .live
            stream.stateSince = nil
            stream.timeline.append(Self.connected(newOpening, at: now()))
            feedAlarms(.connection(.live), at: now(), in: &stream)
            stream.durableSampleTime = newOpening.durableSampleTime
            stream.acknowledgedSampleTime = newOpening.durableSampleTime
            return stream.epoch
        }
    }

    func audioReceived(endSampleTime: Int64, levels newLevels: AudioLevels?, epoch caller: Int) {
        let time = now()
        stream.withLock { stream in
            guard caller == stream.epoch else { return }
            stream.lastAudio = time
            feedAlarms(.audio(levels: newLevels), at: time, in: &stream)
            guard let newLevels else { return }
            stream.levels = newLevels
            if time.duration(since: stream.lastLevelsEvent) >= levelsInterval, hub.hasSubscribers {
                stream.lastLevelsEvent = time
                hub.publish(.levels(StreamLevelsUpdate(id: stream.opening.id, levels: StreamLevels(newLevels))))
            }
        }
    }

    func gapRecorded(sampleTime: Int64, lengthFrames: Int64, reason: String, epoch caller: Int) {
        stream.withLock { stream in
            guard caller == stream.epoch else { return }
            stream.gapCount += 1
            let at = stream.seconds(sampleTime - stream.opening.startSampleTime)
            let length = stream.seconds(lengthFrames)
            stream.timeline.append(StreamTimelineEntry(
                at: now(), kind: reason == "paused" ? .pause : .gap, streamSeconds: at,
                detail: String(format: "%.3f s", length) + (reason == "paused" ? "" : ", " + reason)))
            // The protocol keeps gaps within the sample timeline; saturate anyway rather than trap.
            let (sum, overflow) = stream.gapFrames.addingReportingOverflow(max(0, lengthFrames))
            stream.gapFrames = overflow ? .max : sum
            hub.publish(.gap(StreamGap(id: stream.opening.id, atSeconds: at, seconds: length, reason: reason, gapCount: stream.gapCount)))
        }
    }

    /// A marker the person recording dropped: published as a `marker` event.
    func markerRecorded(sampleTime: Int64, label: String, epoch caller: Int) {
        stream.withLock { stream in
            guard caller == stream.epoch else { return }
            let at = stream.seconds(sampleTime - stream.opening.startSampleTime)
            stream.timeline.append(StreamTimelineEntry(at: now(), kind: .marker, streamSeconds: at, detail: label.isEmpty ? "marker" : label))
            hub.publish(.marker(StreamMarker(id: stream.opening.id, atSeconds: at, label: label)))
        }
    }

    func positionsChanged(durableSampleTime durable: Int64, acknowledgedSampleTime acknowledged: Int64?, epoch caller: Int) {
        stream.withLock { stream in
            guard caller == stream.epoch else { return }
            stream.durableSampleTime = max(stream.durableSampleTime, durable)
            if let acknowledged { stream.acknowledgedSampleTime = max(stream.acknowledgedSampleTime, acknowledged) }
        }
    }

    func connectionEnded(resumable: Bool, epoch caller: Int) {
        stream.withLock { stream in
            guard caller == stream.epoch, stream.state == .live else { return }
            stream.state = resumable ? .reconnecting : .finished
            let time = now()
            stream.stateSince = time
            stream.timeline.append(StreamTimelineEntry(
                at: time, kind: resumable ? .reconnecting : .finished,
                detail: resumable ? "the connection was lost; the file waits for the sender to resume it" : "the stream ended"))
            hub.publish(.closed(stream.row()))
            let ended = stream.state
            feedAlarms(.connection(ended), at: time, in: &stream)
        }
    }

    /// Finishes the stream when it has been reconnecting since before `cutoff` (a `closed` event);
    /// returns when it finished, or nil when it is not finished now.
    func expireIfReconnecting(before cutoff: Date, at time: Date) -> Date? {
        stream.withLock { stream in
            if stream.state == .reconnecting, let since = stream.stateSince, since < cutoff {
                stream.state = .finished
                stream.stateSince = time
                stream.timeline.append(StreamTimelineEntry(at: time, kind: .finished, detail: "the sender did not resume within the resume window"))
                hub.publish(.closed(stream.row()))
                feedAlarms(.connection(.finished), at: time, in: &stream)
            }
            return stream.state == .finished ? stream.stateSince : nil
        }
    }

    /// When the stream finished, or nil while it is live or reconnecting.
    var finishedSince: Date? { stream.withLock { $0.state == .finished ? $0.stateSince : nil } }

    func snapshot() -> StreamSnapshot { stream.withLock { $0.row() } }
}

/// The subscribers of the directory's event feed, each with a bounded buffer.
///
/// Sendability: the subscribers and `nextID` are in a `Mutex`; the continuations are thread-safe.
final class StreamEventHub: Sendable {
    typealias Continuation = AsyncThrowingStream<StreamEvent, any Error>.Continuation

    private struct State {
        var subscribers: [Int: Continuation] = [:]
        var nextID = 0
    }

    private let bufferLimit: Int
    private let state = Mutex(State())

    init(bufferLimit: Int) {
        self.bufferLimit = max(1, bufferLimit)
    }

    var count: Int { state.withLock { $0.subscribers.count } }
    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    func subscribe() -> AsyncThrowingStream<StreamEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: StreamEvent.self, bufferingPolicy: .bufferingOldest(bufferLimit))
        let id = state.withLock { state in
            state.nextID += 1
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return stream
    }

    /// Hands `event` to every subscriber; one whose buffer is full is dropped.
    func publish(_ event: StreamEvent) {
        let dropped: [Continuation] = state.withLock { state in
            guard !state.subscribers.isEmpty else { return [] }
            var dropped: [Continuation] = []
            for (id, continuation) in state.subscribers {
                if case .dropped = continuation.yield(event) {
                    state.subscribers[id] = nil
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
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }
}
