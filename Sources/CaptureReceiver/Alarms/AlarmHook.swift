#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import Crypto
import Dispatch
import Foundation
import Logging
import Synchronization

/// An alarm raised or cleared, as `--on-alarm` tells it: one job in the alarm hook's journal, and
/// (for a raise) the record that the alarm stands raised.
struct AlarmHookEvent: HookJournalEntry {
    /// When the receiver decided it (Unix nanoseconds, zero-padded) and its place among this run's
    /// alarms: keys sort in the order the alarms happened. `CAPTURE_ALARM_ID` to the command.
    var key: String
    var streamID: UUID
    var streamName: String
    var kind: StreamAlarmKind
    var change: StreamAlarmTransition.Change
    /// When the condition began (raised) or ended (cleared).
    var since: Date
    var detail: String
    /// Every alarm raised on the stream after this change.
    var raised: [StreamAlarmKind]

    var journalKey: String { key }
}

/// Runs `--on-alarm CMD` once for each alarm raised and once for each alarm cleared, like
/// `--on-finalize` runs its command for each file: `/bin/sh -c CMD capture-recv-alarm CHANGE KIND
/// STREAM` (`$1` raised or cleared, `$2` the kind, `$3` the stream's name), in the output folder,
/// with `CAPTURE_ALARM_ID`, `CAPTURE_ALARM_CHANGE`, `CAPTURE_ALARM_KIND`, `CAPTURE_ALARM_SINCE`
/// (ISO 8601, UTC), `CAPTURE_ALARM_DETAIL`, `CAPTURE_ALARMS_RAISED`, `CAPTURE_STREAM_NAME` and
/// `CAPTURE_STREAM_ID` in its environment.
///
/// At least once, retried with backoff, stopped at its time limit, one run at a time and in the
/// order the alarms happened (a clear is never told before its raise): a `HookQueue` over the
/// journal in `OUT/.alarm-hook`.
///
/// Exactly one run per raise and per clear, also across a restart: each alarm told raised is
/// recorded (`OUT/.alarm-hook/raised/`) until it is told cleared. After a restart, a stream that
/// resumes gets its recorded alarms back (`restoredAlarms(of:)`: its alarm machine raises them
/// again, which is not told twice, and clears them as usual, which is told); the alarms of a
/// stream that does not come back within the resume window are told cleared.
///
/// The directory tells it alarms under a stream's lock, possibly on an event loop: `tell` decides
/// in memory and leaves the journal's disk writes to a serial queue of its own.
public final class AlarmHook: Sendable {
    /// The command and its time limit.
    public struct Settings: Sendable, Equatable {
        /// The shell command.
        public var command: String
        /// How long one run may take (`--on-alarm-timeout`) before its command is stopped.
        public var timeout: Duration

        public init(command: String, timeout: Duration = .seconds(60)) {
            self.command = command
            self.timeout = timeout
        }
    }

    /// The journal's folder inside the output folder.
    static let folderName = ".alarm-hook"

    /// What is raised, and what this run still has to give back to resuming streams.
    private struct State {
        /// Alarms told raised and not yet told cleared, by stream and kind (their raise).
        var raised: [UUID: [StreamAlarmKind: AlarmHookEvent]] = [:]
        /// Streams with alarms raised before this start that have not resumed yet.
        var unclaimed: Set<UUID> = []
        /// This run's alarms so far (the second part of each key).
        var counter: UInt64 = 0
    }

    private let queue: HookQueue<AlarmHookEvent>
    private let records: RaisedAlarmRecords
    private let disk = DispatchQueue(label: "capture-recv alarm hook journal")
    private let state = Mutex(State())
    private let logger: Logger

    /// `settingNames`: how the log names the timeout's setting.
    public init(outputDirectory: String, settings: Settings, logger: Logger, settingNames: any SettingNaming = LibrarySettingNames()) {
        self.logger = logger
        let journal = HookJournal<AlarmHookEvent>(outputDirectory: outputDirectory, folderName: Self.folderName)
        records = RaisedAlarmRecords(folder: (journal.folder as NSString).appendingPathComponent("raised"))
        let definition = HookQueue<AlarmHookEvent>.Definition(
            command: settings.command, timeout: settings.timeout, timeoutSetting: .alarmHookTimeout, settingNames: settingNames, commandName: "capture-recv-alarm",
            noun: "alarm hook", subject: "alarm hook", keyName: "alarm", inOrder: true, prepare: Self.prepare)
        queue = HookQueue(outputDirectory: outputDirectory, journal: journal, definition: definition, logger: logger)
    }

    /// At start: reads which alarms stood raised at the last stop, replays the runs not completed
    /// then, and, `resumeWindow` from now, tells cleared the alarms of streams that have not
    /// resumed by then.
    public func start(resumeWindow: Duration) {
        var raised = records.read(logger: logger)
        // The journal is written before the records: a raise or clear it holds may not have reached
        // them (a crash in between).
        for event in queue.start() {
            let recorded = raised[event.streamID]?[event.kind] != nil
            guard recorded != (event.change == .raised) else { continue }
            Self.apply(event, to: &raised)
            switch event.change {
            case .raised: write(event)
            case .cleared: remove(event)
            }
        }
        let restored = raised
        state.withLock { state in
            state.raised = restored
            state.unclaimed = Set(restored.keys)
        }
        if !restored.isEmpty {
            logger.notice("alarms raised before the last stop are still raised; they clear when their streams resume and their conditions end", metadata: [
                "streams": "\(restored.count)", "alarms": "\(restored.values.map(\.count).reduce(0, +))",
            ])
        }
        let delay = max(0, min(resumeWindow.inSeconds, 30 * 86_400)) + 1
        disk.asyncAfter(deadline: .now() + delay) { [self] in clearUnclaimed() }
    }

    /// The alarms raised on `stream` before this start, for the directory when the stream resumes
    /// here (once: afterwards its alarm machine holds them).
    public func restoredAlarms(of stream: UUID) -> [StreamAlarmKind] {
        state.withLock { state in
            guard state.unclaimed.remove(stream) != nil, let kinds = state.raised[stream]?.keys else { return [] }
            return StreamAlarmKind.allCases.filter(kinds.contains)
        }
    }

    /// An alarm raised or cleared on a stream: its run is journaled and scheduled, unless it was
    /// told already (raised, and not cleared since, before a restart).
    public func tell(_ alarm: StreamAlarmEvent) {
        let job = state.withLock { state -> AlarmHookEvent? in
            switch alarm.change {
            case .raised:
                guard state.raised[alarm.id]?[alarm.kind] == nil else { return nil }
            case .cleared:
                guard state.raised[alarm.id]?[alarm.kind] != nil else { return nil }
            }
            state.counter += 1
            let event = AlarmHookEvent(
                key: Self.key(counter: state.counter), streamID: alarm.id, streamName: alarm.name, kind: alarm.kind, change: alarm.change,
                since: alarm.since, detail: alarm.detail, raised: alarm.raised)
            Self.apply(event, to: &state.raised)
            return event
        }
        guard let job else {
            logger.debug("alarm hook not run again: this alarm was told raised before the receiver restarted", metadata: [
                "stream": "\(alarm.name)", "alarm": "\(alarm.kind.rawValue)",
            ])
            return
        }
        disk.async { [self] in journal(job) }
    }

    /// The receiver stops: no run starts any more, and a running command is stopped with its
    /// process group; what is left runs at the next start. `waitUntilStopped` waits.
    public func beginStopping() {
        // After the journal writes already asked for.
        disk.async { [queue] in queue.beginStopping() }
    }

    /// Waits until no run is left (after `beginStopping`), at most until `deadline`.
    @discardableResult
    public func waitUntilStopped(deadline: DispatchTime) -> Bool { queue.waitUntilStopped(deadline: deadline) }

    private static func apply(_ event: AlarmHookEvent, to raised: inout [UUID: [StreamAlarmKind: AlarmHookEvent]]) {
        switch event.change {
        case .raised:
            raised[event.streamID, default: [:]][event.kind] = event
        case .cleared:
            raised[event.streamID]?[event.kind] = nil
            if raised[event.streamID]?.isEmpty == true { raised[event.streamID] = nil }
        }
    }

    private static func key(counter: UInt64) -> String {
        let nanoseconds = UInt64(max(0, Date().timeIntervalSince1970 * 1e9))
        return String(format: "%020llu-%08llu", nanoseconds, counter)
    }

    /// On `disk`: the run first (durably), then the record.
    private func journal(_ event: AlarmHookEvent) {
        do throws(DurableFileError) {
            try queue.enqueue(event)
        } catch {
            logger.error("cannot journal an alarm's hook; it will not run for this alarm", metadata: [
                "stream": "\(event.streamName)", "alarm": "\(event.kind.rawValue)", "change": "\(event.change.rawValue)", "error": "\(error.description)",
            ])
            return
        }
        switch event.change {
        case .raised: write(event)
        case .cleared: remove(event)
        }
    }

    private func write(_ event: AlarmHookEvent) {
        do throws(DurableFileError) {
            try records.write(event)
        } catch {
            logger.error("cannot record a raised alarm; after a restart its raise may be told again", metadata: [
                "stream": "\(event.streamName)", "alarm": "\(event.kind.rawValue)", "error": "\(error.description)",
            ])
        }
    }

    private func remove(_ event: AlarmHookEvent) {
        do throws(DurableFileError) {
            try records.remove(stream: event.streamID, kind: event.kind)
        } catch {
            logger.error("cannot remove the record of a cleared alarm; after a restart it is told cleared again", metadata: [
                "stream": "\(event.streamName)", "alarm": "\(event.kind.rawValue)", "error": "\(error.description)",
            ])
        }
    }

    /// On `disk`, one resume window after start: the alarms of streams that did not resume are told
    /// cleared.
    private func clearUnclaimed() {
        let jobs = state.withLock { state -> [AlarmHookEvent] in
            var jobs: [AlarmHookEvent] = []
            for stream in state.unclaimed.sorted(by: { $0.uuidString < $1.uuidString }) {
                let raises = state.raised[stream] ?? [:]
                for kind in StreamAlarmKind.allCases {
                    guard let raise = raises[kind] else { continue }
                    state.counter += 1
                    var event = AlarmHookEvent(
                        key: Self.key(counter: state.counter), streamID: stream, streamName: raise.streamName, kind: kind, change: .cleared,
                        since: Date(), detail: "the stream did not resume within the resume window after the receiver restarted", raised: [])
                    Self.apply(event, to: &state.raised)
                    let left = state.raised[stream] ?? [:]
                    event.raised = StreamAlarmKind.allCases.filter { left[$0] != nil }
                    jobs.append(event)
                }
            }
            state.unclaimed = []
            return jobs
        }
        for job in jobs {
            logger.notice("alarm cleared: \(job.kind.rawValue): \(job.detail)", metadata: ["stream": "\(job.streamName)", "id": "\(job.streamID.uuidString.lowercased())"])
            journal(job)
        }
    }

    /// A run's environment and arguments.
    private static func prepare(_ event: AlarmHookEvent) -> HookQueue<AlarmHookEvent>.Preparation {
        let name = hookPlainText(event.streamName)
        let environment = [
            "CAPTURE_ALARM_ID": event.key,
            "CAPTURE_ALARM_CHANGE": event.change.rawValue,
            "CAPTURE_ALARM_KIND": event.kind.rawValue,
            "CAPTURE_ALARM_SINCE": event.since.formatted(.iso8601),
            "CAPTURE_ALARM_DETAIL": hookPlainText(event.detail),
            "CAPTURE_ALARMS_RAISED": event.raised.map(\.rawValue).joined(separator: ","),
            "CAPTURE_STREAM_NAME": name,
            "CAPTURE_STREAM_ID": event.streamID.uuidString.lowercased(),
        ]
        return .run(arguments: [event.change.rawValue, event.kind.rawValue, name], environment: environment)
    }
}

/// The alarms told raised and not yet told cleared: `OUT/.alarm-hook/raised/<digest of stream and
/// kind>.json`, each holding its raise, written and removed durably.
struct RaisedAlarmRecords: Sendable {
    let folder: String

    private func path(stream: UUID, kind: StreamAlarmKind) -> String {
        let digest = SHA256.hash(data: Data("\(stream.uuidString.lowercased())/\(kind.rawValue)".utf8)).map { String(format: "%02x", $0) }.joined()
        return (folder as NSString).appendingPathComponent(digest + ".json")
    }

    func write(_ event: AlarmHookEvent) throws(DurableFileError) {
        let parent = DurableFile.folder(of: folder)
        for directory in [parent, folder] where mkdir(directory, 0o755) == 0 {
            try DurableFile.synchronizeDirectory(DurableFile.folder(of: directory))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(event)).map { [UInt8]($0) } ?? []
        try DurableFile.replaceAtomically(path: path(stream: event.streamID, kind: event.kind), with: bytes)
    }

    func remove(stream: UUID, kind: StreamAlarmKind) throws(DurableFileError) {
        let file = path(stream: stream, kind: kind)
        guard FileManager.default.fileExists(atPath: file) else { return }
        try DurableFile.remove(file)
        try DurableFile.synchronizeDirectory(folder)
    }

    /// Every record, by stream and kind; unreadable ones are logged and left.
    func read(logger: Logger) -> [UUID: [StreamAlarmKind: AlarmHookEvent]] {
        var raised: [UUID: [StreamAlarmKind: AlarmHookEvent]] = [:]
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted() where name.hasSuffix(".json") {
            let file = (folder as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: file), let event = try? JSONDecoder().decode(AlarmHookEvent.self, from: data) else {
                logger.error("a raised alarm's record cannot be read; remove it", metadata: ["record": "\(file)"])
                continue
            }
            raised[event.streamID, default: [:]][event.kind] = event
        }
        return raised
    }
}
