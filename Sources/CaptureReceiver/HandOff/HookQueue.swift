import CaptureCore
import Dispatch
import Foundation
import Logging

/// Runs a hook's jobs at least once (`--on-finalize` for finished files, `--on-alarm` for alarms):
/// each job is journaled durably (`HookJournal`) before the step that makes its cause final, the
/// journal is replayed at start, and an entry leaves only after its run succeeded. A failed run is
/// retried with backoff, forever; the command must therefore be idempotent.
///
/// Never twice at once for one job: each run holds its journal entry's lock, which the command
/// inherits (`HandOffCommand`), so neither another receiver on the same `--out` nor this one after
/// a restart starts a run whose command still runs. A command past its time limit, and every
/// command when the receiver stops (`beginStopping`), is stopped with its process group.
///
/// `HandOffSchedule` decides what runs when; its state changes on `queue`, and each run starts on a
/// thread of its own (never an event loop or a writer lane). What a job's run does before its
/// command (an export), the command's arguments and environment, and the words of the log come
/// from its `Definition`.
///
/// Sendability (`@unchecked Sendable`): `schedule`, `jobs`, `commands`, `reports` and
/// `wakeScheduled` are touched only on `queue`, a serial queue that owns them (every method that
/// reads or writes them runs there, a run's thread reports back through it); the rest is immutable
/// after `init` or thread-safe itself (`stopped`, a semaphore).
final class HookQueue<Entry: HookJournalEntry>: @unchecked Sendable {
    /// What a run does with its job, just before its command would start.
    enum Preparation: Sendable {
        /// Run the command with these arguments (`$1`...) and these variables added to the
        /// receiver's environment.
        case run(arguments: [String], environment: [String: String])
        /// Done without a command (an export was all there was to do): `status` for the log.
        case done(status: String)
        /// Nothing to do any more (the finished file is gone): logged as an error, then forgotten.
        case skip(reason: String)
        /// The preparation failed (`status`, for the log): the run is retried.
        case failed(status: String)
    }

    /// What a hook does, and how its log names things.
    struct Definition: Sendable {
        /// The shell command; nil when the hook has none (an export only).
        var command: String?
        /// How long one run may take before its command is stopped.
        var timeout: Duration
        /// The setting that sets `timeout`, for the log, and how the log names it.
        var timeoutSetting: Setting
        var settingNames: any SettingNaming
        /// The command's `$0`, and the name of the threads runs start on.
        var commandName: String
        /// The short name of a run in the log ("hand-off").
        var noun: String
        /// The long name of a run in the log ("hand-off of a finished file").
        var subject: String
        /// The metadata key that names a job in the log ("path").
        var keyName: String
        /// One run at a time, strictly in the order the jobs came: a job waits (also while it is
        /// retried) until every earlier one succeeded. Alarms are told in order; files are not.
        var inOrder = false
        /// What a run does first, on its thread: the command's arguments and environment, or why
        /// there is nothing to run.
        var prepare: @Sendable (_ entry: Entry) -> Preparation
    }

    /// How one run went, for the log.
    private struct Report {
        var outcome: HandOffSchedule.Outcome
        /// What happened, for the log: "exit 0", "signal 9", "not started"...
        var status: String
        var output = ""
        var note: Note = .ran

        enum Note { case ran, alreadyDone, skipped(String) }
    }

    private let outputDirectory: String
    private let definition: Definition
    private let journal: HookJournal<Entry>
    private let logger: Logger
    private let queue: DispatchQueue
    private var schedule: HandOffSchedule
    private var jobs: [String: Entry] = [:]
    private var commands: [String: HandOffCommand] = [:]
    private var reports: [String: Report] = [:]
    private var wakeScheduled: Int64?
    private let stopped = DispatchSemaphore(value: 0)

    init(outputDirectory: String, journal: HookJournal<Entry>, definition: Definition, logger: Logger) {
        self.outputDirectory = outputDirectory
        self.definition = definition
        self.journal = journal
        self.logger = logger
        queue = DispatchQueue(label: "capture-recv \(definition.noun)")
        var limits = HandOffSchedule.Limits()
        limits.timeout = Self.nanoseconds(definition.timeout)
        limits.inOrder = definition.inOrder
        schedule = HandOffSchedule(limits: limits)
    }

    /// Replays the journal: every job a previous run did not complete runs again (those a command
    /// still runs for, started by another receiver or by a killed one, once it ended). Returns the
    /// entries replayed.
    @discardableResult
    func start() -> [Entry] {
        let (pending, damaged) = journal.entries()
        for path in damaged {
            logger.error("a \(definition.noun) journal entry cannot be read; its \(definition.noun) will not run again; remove it", metadata: ["entry": "\(path)"])
        }
        if !pending.isEmpty {
            logger.notice("\(definition.noun)s not completed before the last stop run again", metadata: ["count": "\(pending.count)"])
        }
        for entry in pending { schedule(entry) }
        return pending
    }

    /// Journals `entry` durably and schedules its run.
    func enqueue(_ entry: Entry) throws(DurableFileError) {
        try journal.record(entry)
        schedule(entry)
    }

    /// The receiver stops: no run starts any more, and running commands are stopped with their
    /// process groups (SIGTERM, then SIGKILL after a grace). Their journal entries stay, so they
    /// run again at the next start. Returns at once; `waitUntilStopped` waits.
    func beginStopping() {
        queue.async { [self] in perform(schedule.handle(.stop(now: Self.now()))) }
    }

    /// Waits until no run is left (after `beginStopping`), at most until `deadline`; false when one
    /// still ran then.
    func waitUntilStopped(deadline: DispatchTime) -> Bool {
        guard stopped.wait(timeout: deadline) == .success else { return false }
        stopped.signal()
        return true
    }

    private func schedule(_ entry: Entry) {
        queue.async { [self] in
            jobs[entry.journalKey] = entry
            perform(schedule.handle(.enqueued(path: entry.journalKey, now: Self.now())))
        }
    }

    private static func now() -> Int64 { Int64(clamping: DispatchTime.now().uptimeNanoseconds) }

    /// `duration` in nanoseconds: at least 1, at most a century (so that adding it to a time of the
    /// monotonic clock cannot overflow).
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let century: Int64 = 100 * 365 * 86_400 * 1_000_000_000
        return max(1, min(century, duration.inNanoseconds))
    }

    private var timeoutText: String { "\(definition.settingNames.name(of: definition.timeoutSetting)) \(definition.timeout.components.seconds) s" }
    private var graceText: String { "\(schedule.limits.grace / HandOffSchedule.Limits.second) s" }

    /// On `queue`.
    private func perform(_ actions: [HandOffSchedule.Action]) {
        let noun = definition.noun
        let keyName = definition.keyName
        for action in actions {
            switch action {
            case .start(let key, let attempt):
                let command = HandOffCommand()
                commands[key] = command
                let known = jobs[key]
                let name = definition.commandName
                let thread = Thread { [self] in
                    DetachedThread.nameCurrentThread(name)
                    let report = run(key: key, known: known, attempt: attempt, command: command)
                    queue.async { [self] in
                        commands[key] = nil
                        reports[key] = report
                        perform(schedule.handle(.runEnded(path: key, outcome: report.outcome, now: Self.now())))
                    }
                }
                thread.start()
            case .completed(let key):
                let report = reports.removeValue(forKey: key)
                jobs[key] = nil
                switch report?.note {
                case .alreadyDone:
                    logger.info("\(noun) already done by another receiver (its journal entry is gone)", metadata: [keyName: "\(key)"])
                case .skipped(let reason):
                    logger.error("\(noun) skipped: \(reason)", metadata: [keyName: "\(key)"])
                case .ran, nil:
                    logger.info("\(definition.subject) done", metadata: [keyName: "\(key)", "status": "\(report?.status ?? "")"])
                }
            case .retry(let key, let at, let attempt, let timedOut):
                let report = reports.removeValue(forKey: key)
                var metadata: Logger.Metadata = [keyName: "\(key)", "status": "\(report?.status ?? "")", "attempt": "\(attempt)"]
                if let output = report?.output, !output.isEmpty { metadata["output"] = "\(output)" }
                if timedOut {
                    logger.error("\(noun) timed out: its command ran longer than \(timeoutText) and was stopped", metadata: metadata)
                } else {
                    logger.error("\(definition.subject) failed", metadata: metadata)
                }
                logger.warning("\(noun) will be retried", metadata: [
                    keyName: "\(key)", "attempt": "\(attempt)", "retry_in_s": "\(String(format: "%.1f", Double(max(0, at - Self.now())) / 1e9))",
                ])
            case .busy(let key, let at, let checks):
                reports[key] = nil
                let metadata: Logger.Metadata = [keyName: "\(key)", "check_again_in_s": "\(String(format: "%.1f", Double(max(0, at - Self.now())) / 1e9))"]
                if checks == 1 {
                    logger.notice("\(noun) is running elsewhere (another receiver on this folder, or a command left running by a receiver that was killed); it is not started beside it", metadata: metadata)
                } else {
                    logger.debug("\(noun) is still running elsewhere", metadata: metadata)
                }
            case .terminate(let key, let reason):
                switch reason {
                case .timedOut:
                    logger.warning("\(noun) timed out: its command runs longer than \(timeoutText); stopping its process group (SIGTERM, then SIGKILL after \(graceText))", metadata: [keyName: "\(key)"])
                case .stopping:
                    logger.notice("the receiver stops: stopping a running \(noun) command (SIGTERM, then SIGKILL after \(graceText)); it runs again at the next start", metadata: [keyName: "\(key)"])
                }
                commands[key]?.terminate()
            case .kill(let key):
                logger.warning("\(noun) command did not stop after SIGTERM: killing its process group (SIGKILL)", metadata: [keyName: "\(key)"])
                commands[key]?.kill()
            case .keptForNextStart(let key):
                let report = reports.removeValue(forKey: key)
                logger.notice("\(noun) stopped with the receiver; it runs again at the next start", metadata: [keyName: "\(key)", "status": "\(report?.status ?? "")"])
            case .stopped:
                stopped.signal()
            case .wake(let at):
                guard wakeScheduled.map({ $0 > at }) ?? true else { continue }
                wakeScheduled = at
                queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: UInt64(max(at, 0)))) { [self] in
                    wakeScheduled = nil
                    perform(schedule.handle(.tick(now: Self.now())))
                }
            }
        }
    }

    /// Runs one job (its preparation, then its command) on its own thread, holding its journal
    /// entry's lock, for the job the entry describes now (`known`: what it said when it was
    /// enqueued, used when the entry cannot be read).
    private func run(key: String, known: Entry?, attempt: Int, command: HandOffCommand) -> Report {
        let lock: HandOffLock
        let entry: Entry
        switch journal.lock(key) {
        case .busy:
            return Report(outcome: .busy, status: "running elsewhere")
        case .gone:
            return Report(outcome: .succeeded, status: "done elsewhere", note: .alreadyDone)
        case .failed(let error):
            return Report(outcome: .failed, status: "cannot lock its journal entry: \(error.description)")
        case .locked(let held, let described):
            guard let described = described ?? known else {
                held.release()
                return Report(outcome: .failed, status: "its journal entry cannot be read")
            }
            lock = held
            entry = described
        }
        let report = run(entry, command: command, lock: lock)
        if report.outcome == .succeeded { lock.complete() } else { lock.release() }
        return report
    }

    private func run(_ entry: Entry, command: HandOffCommand, lock: HandOffLock) -> Report {
        let arguments: [String]
        let variables: [String: String]
        switch definition.prepare(entry) {
        case .run(let given, let environment):
            arguments = given
            variables = environment
        case .done(let status):
            return Report(outcome: .succeeded, status: status)
        case .skip(let reason):
            return Report(outcome: .succeeded, status: "skipped", note: .skipped(reason))
        case .failed(let status):
            return Report(outcome: .failed, status: status)
        }
        guard let shellCommand = definition.command else { return Report(outcome: .succeeded, status: "nothing to run") }
        let environment = ProcessInfo.processInfo.environment.merging(variables) { _, new in new }
        // In the output folder: the receiver's own working directory may be one its user cannot
        // enter (a service started from a private folder), which would fail every start.
        let (ending, output) = command.run(
            command: shellCommand, name: definition.commandName, arguments: arguments, environment: environment, directory: outputDirectory,
            lockDescriptor: lock.descriptor)
        let tail = output.trimmingCharacters(in: .whitespacesAndNewlines)
        switch ending {
        case .exited(0):
            return Report(outcome: .succeeded, status: "exit 0", output: tail)
        case .exited(let code):
            return Report(outcome: .failed, status: "exit \(code)", output: tail)
        case .signalled(let signal):
            return Report(outcome: .failed, status: "signal \(signal)", output: tail)
        case .notStarted:
            return Report(outcome: .failed, status: "not started")
        case .cannotStart(let reason):
            return Report(outcome: .failed, status: "cannot start: \(reason)")
        case .lost(let reason):
            return Report(outcome: .failed, status: "exit status lost: \(reason)", output: tail)
        }
    }
}

/// Text from a sender (a stream's name, a host) made safe for a hook's environment: no control
/// characters reach the command.
func hookPlainText(_ text: String) -> String {
    String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
}
