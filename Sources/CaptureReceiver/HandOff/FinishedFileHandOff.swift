import CAF
import CaptureCore
import Dispatch
import Foundation
import Logging

/// Hands each finished recording on (`--on-finalize 'CMD'`, `--export-on-finalize FORMAT`): first the
/// export, when asked (beside the file), then the command, run as `/bin/sh -c CMD capture-recv-hook
/// FILE` with the file's path as `$1` and its facts in the environment (`CAPTURE_FILE`,
/// `CAPTURE_RELATIVE_PATH`, `CAPTURE_STREAM_NAME`, `CAPTURE_STREAM_ID`, `CAPTURE_SOURCE_HOST`,
/// `CAPTURE_FIRST_SAMPLE_TIME`, `CAPTURE_FRAMES`, `CAPTURE_COMPLETE`, and `CAPTURE_EXPORT` when an
/// export was written).
///
/// At least once: `enqueue` journals the file durably (`HandOffJournal`) before the step that makes
/// finishing it final, the journal is replayed at start, and an entry leaves only after its hand-off
/// succeeded. A failed hand-off is retried with backoff, forever; the command must therefore be
/// idempotent (copying to the same place is).
///
/// Never twice at once for one file: each run holds its journal entry's lock, which the command
/// inherits (`HandOffCommand`), so neither another receiver on the same `--out` nor this one after a
/// restart starts a hand-off whose command still runs. A command past its time limit, and every
/// command when the receiver stops (`beginStopping`), is stopped with its process group.
///
/// `HandOffSchedule` decides what runs when; its state changes on `queue`, and each run starts on a
/// thread of its own (never an event loop or a writer lane).
///
/// `@unchecked Sendable`: `schedule`, `recordings`, `commands`, `reports` and `wakeScheduled` are
/// touched only on `queue`, a serial queue.
public final class FinishedFileHandOff: @unchecked Sendable {
    /// What to do with each finished file.
    public struct Settings: Sendable, Equatable {
        /// The shell command (`$1` is the file); nil: none.
        public var command: String?
        /// How long one run may take (`--on-finalize-timeout`) before its command is stopped.
        public var timeout: Duration

        public init(command: String?, timeout: Duration = .seconds(600)) {
            self.command = command
            self.timeout = timeout
        }
    }

    /// Writes an export of a finished file beside it and returns the export's path (the receiver
    /// passes `RecordingExporter` here for `--export-on-finalize`).
    public typealias Exporter = @Sendable (_ cafPath: String) throws -> String

    /// How one run went, for the log.
    private struct Report {
        var outcome: HandOffSchedule.Outcome
        /// What happened, for the log: "exit 0", "signal 9", "not started"...
        var status: String
        var output = ""
        var note: Note = .ran

        enum Note { case ran, alreadyDone, fileGone }
    }

    private let outputDirectory: String
    private let settings: Settings
    private let exporter: Exporter?
    private let journal: HandOffJournal
    private let logger: Logger
    private let queue = DispatchQueue(label: "capture-recv hand-off")
    private var schedule: HandOffSchedule
    private var recordings: [String: FinishedRecording] = [:]
    private var commands: [String: HandOffCommand] = [:]
    private var reports: [String: Report] = [:]
    private var wakeScheduled: Int64?
    private let stopped = DispatchSemaphore(value: 0)

    public init(outputDirectory: String, settings: Settings, exporter: Exporter? = nil, logger: Logger) {
        self.outputDirectory = outputDirectory
        self.settings = settings
        self.exporter = exporter
        self.journal = HandOffJournal(outputDirectory: outputDirectory)
        self.logger = logger
        var limits = HandOffSchedule.Limits()
        limits.timeout = Self.nanoseconds(settings.timeout)
        self.schedule = HandOffSchedule(limits: limits)
    }

    /// Replays the journal: every hand-off a previous run did not complete runs again (those a
    /// command still runs for, started by another receiver or by a killed one, once it ended).
    public func start() {
        let (pending, damaged) = journal.entries()
        for path in damaged {
            logger.error("a hand-off journal entry cannot be read; its file's hand-off will not run again; remove it", metadata: ["entry": "\(path)"])
        }
        if !pending.isEmpty {
            logger.notice("hand-offs not completed before the last stop run again", metadata: ["count": "\(pending.count)"])
        }
        for recording in pending { schedule(recording) }
    }

    /// Journals `recording` durably and schedules its hand-off. Called on a writer thread, when
    /// the file is finalized and before the stream's state says so.
    public func enqueue(_ recording: FinishedRecording) throws(DurableFileError) {
        try journal.record(recording)
        schedule(recording)
    }

    /// The receiver stops: no hand-off starts any more, and running commands are stopped with
    /// their process groups (SIGTERM, then SIGKILL after a grace). Their journal entries stay, so
    /// they run again at the next start. Returns at once; `waitUntilStopped` waits.
    public func beginStopping() {
        queue.async { [self] in perform(schedule.handle(.stop(now: Self.now()))) }
    }

    /// Seconds from SIGTERM to SIGKILL for a command being stopped.
    public static var stopGrace: TimeInterval { Double(HandOffSchedule.Limits().grace) / 1e9 }

    /// Waits until no hand-off runs any more (after `beginStopping`), at most until `deadline`;
    /// false when one still ran then.
    @discardableResult
    public func waitUntilStopped(deadline: DispatchTime) -> Bool {
        guard stopped.wait(timeout: deadline) == .success else { return false }
        stopped.signal()
        return true
    }

    private func schedule(_ recording: FinishedRecording) {
        queue.async { [self] in
            recordings[recording.relativePath] = recording
            perform(schedule.handle(.enqueued(path: recording.relativePath, now: Self.now())))
        }
    }

    private static func now() -> Int64 { Int64(clamping: DispatchTime.now().uptimeNanoseconds) }

    /// `duration` in nanoseconds: at least 1, at most a century (so that adding it to a time of the
    /// monotonic clock cannot overflow).
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let century: Int64 = 100 * 365 * 86_400 * 1_000_000_000
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 1 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow, whole < century else { return century }
        return max(1, min(century, whole + attoseconds / 1_000_000_000))
    }

    private var timeoutText: String { "--on-finalize-timeout \(settings.timeout.components.seconds) s" }
    private var graceText: String { "\(schedule.limits.grace / HandOffSchedule.Limits.second) s" }

    /// On `queue`.
    private func perform(_ actions: [HandOffSchedule.Action]) {
        for action in actions {
            switch action {
            case .start(let path, let attempt):
                let command = HandOffCommand()
                commands[path] = command
                let recording = recordings[path]
                let thread = Thread { [self] in
                    let report = run(path: path, recording: recording, attempt: attempt, command: command)
                    queue.async { [self] in
                        commands[path] = nil
                        reports[path] = report
                        perform(schedule.handle(.runEnded(path: path, outcome: report.outcome, now: Self.now())))
                    }
                }
                thread.name = "hand-off"
                thread.start()
            case .completed(let path):
                let report = reports.removeValue(forKey: path)
                recordings[path] = nil
                switch report?.note {
                case .alreadyDone:
                    logger.info("hand-off already done by another receiver (its journal entry is gone)", metadata: ["path": "\(path)"])
                case .fileGone:
                    logger.error("hand-off skipped: the finished file is gone", metadata: ["path": "\(path)"])
                case .ran, nil:
                    logger.info("hand-off of a finished file done", metadata: ["path": "\(path)", "status": "\(report?.status ?? "")"])
                }
            case .retry(let path, let at, let attempt, let timedOut):
                let report = reports.removeValue(forKey: path)
                var metadata: Logger.Metadata = ["path": "\(path)", "status": "\(report?.status ?? "")", "attempt": "\(attempt)"]
                if let output = report?.output, !output.isEmpty { metadata["output"] = "\(output)" }
                if timedOut {
                    logger.error("hand-off timed out: its command ran longer than \(timeoutText) and was stopped", metadata: metadata)
                } else {
                    logger.error("hand-off of a finished file failed", metadata: metadata)
                }
                logger.warning("hand-off will be retried", metadata: [
                    "path": "\(path)", "attempt": "\(attempt)", "retry_in_s": "\(String(format: "%.1f", Double(max(0, at - Self.now())) / 1e9))",
                ])
            case .busy(let path, let at, let checks):
                reports[path] = nil
                let metadata: Logger.Metadata = ["path": "\(path)", "check_again_in_s": "\(String(format: "%.1f", Double(max(0, at - Self.now())) / 1e9))"]
                if checks == 1 {
                    logger.notice("hand-off is running elsewhere (another receiver on this folder, or a command left running by a receiver that was killed); it is not started beside it", metadata: metadata)
                } else {
                    logger.debug("hand-off is still running elsewhere", metadata: metadata)
                }
            case .terminate(let path, let reason):
                switch reason {
                case .timedOut:
                    logger.warning("hand-off timed out: its command runs longer than \(timeoutText); stopping its process group (SIGTERM, then SIGKILL after \(graceText))", metadata: ["path": "\(path)"])
                case .stopping:
                    logger.notice("the receiver stops: stopping a running hand-off command (SIGTERM, then SIGKILL after \(graceText)); it runs again at the next start", metadata: ["path": "\(path)"])
                }
                commands[path]?.terminate()
            case .kill(let path):
                logger.warning("hand-off command did not stop after SIGTERM: killing its process group (SIGKILL)", metadata: ["path": "\(path)"])
                commands[path]?.kill()
            case .keptForNextStart(let path):
                let report = reports.removeValue(forKey: path)
                logger.notice("hand-off stopped with the receiver; it runs again at the next start", metadata: ["path": "\(path)", "status": "\(report?.status ?? "")"])
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

    /// Runs one hand-off (export, then command) on its own thread, holding its journal entry's lock,
    /// for the file the entry describes now (`known`: what it said when it was enqueued, used when
    /// the entry cannot be read).
    private func run(path: String, recording known: FinishedRecording?, attempt: Int, command: HandOffCommand) -> Report {
        let lock: HandOffLock
        let recording: FinishedRecording
        switch journal.lock(path) {
        case .busy:
            return Report(outcome: .busy, status: "running elsewhere")
        case .gone:
            return Report(outcome: .succeeded, status: "done elsewhere", note: .alreadyDone)
        case .failed(let error):
            return Report(outcome: .failed, status: "cannot lock its journal entry: \(error.description)")
        case .locked(let held, let entry):
            guard let described = entry ?? known else {
                held.release()
                return Report(outcome: .failed, status: "its journal entry cannot be read")
            }
            lock = held
            recording = described
        }
        let report = run(recording, attempt: attempt, command: command, lock: lock)
        if report.outcome == .succeeded { lock.complete() } else { lock.release() }
        return report
    }

    private func run(_ recording: FinishedRecording, attempt: Int, command: HandOffCommand, lock: HandOffLock) -> Report {
        let path = (outputDirectory as NSString).appendingPathComponent(recording.relativePath)
        guard FileManager.default.fileExists(atPath: path) else {
            return Report(outcome: .succeeded, status: "file gone", note: .fileGone)
        }
        var environment = ProcessInfo.processInfo.environment
        // The stream name and host come from the sender: no control characters reach the command.
        func plain(_ text: String) -> String { String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init)) }
        environment["CAPTURE_FILE"] = path
        environment["CAPTURE_RELATIVE_PATH"] = recording.relativePath
        environment["CAPTURE_STREAM_NAME"] = plain(recording.streamName)
        environment["CAPTURE_STREAM_ID"] = plain(recording.streamID)
        environment["CAPTURE_SOURCE_HOST"] = plain(recording.sourceHost)
        environment["CAPTURE_FIRST_SAMPLE_TIME"] = recording.firstSampleTime
        environment["CAPTURE_FRAMES"] = "\(recording.frames)"
        environment["CAPTURE_COMPLETE"] = recording.complete ? "1" : "0"
        if let exporter {
            do {
                let exported = try exporter(path)
                environment["CAPTURE_EXPORT"] = exported
                logger.info("exported", metadata: ["path": "\(path)", "export": "\(exported)"])
            } catch {
                return Report(outcome: .failed, status: "export failed: \(error)")
            }
        }
        guard let shellCommand = settings.command else { return Report(outcome: .succeeded, status: "exported") }
        // In the output folder: the receiver's own working directory may be one its user cannot
        // enter (a service started from a private folder), which would fail every start.
        let (ending, output) = command.run(
            command: shellCommand, file: path, environment: environment, directory: outputDirectory, lockDescriptor: lock.descriptor)
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

extension FinishedFileHandOff {
    /// Journals the finished file at `path` for its hand-off, with what its `info` chunk says; a
    /// failure to journal is logged (the file is complete; only its hand-off could not be promised).
    func journal(path: String, relativePath: String, frames: Int64, complete: Bool) {
        let info = (try? CAFFile.read(path: path))?.info ?? []
        let recording = FinishedRecording.describing(info: info, relativePath: relativePath, frames: frames, complete: complete)
        do throws(DurableFileError) {
            try enqueue(recording)
        } catch {
            logger.error("cannot journal a finished file's hand-off; it will not run for this file", metadata: [
                "path": "\(path)", "error": "\(error.description)",
            ])
        }
    }
}
