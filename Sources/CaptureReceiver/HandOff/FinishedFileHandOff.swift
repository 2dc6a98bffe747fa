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
/// idempotent (copying to the same place is). When `HandOffSchedule` says so, a run starts on a thread
/// of its own (never an event loop or a writer lane); every state change happens on `queue`.
///
/// `@unchecked Sendable`: `schedule` and `wakeScheduled` are touched only on `queue`, a serial queue.
public final class FinishedFileHandOff: @unchecked Sendable {
    /// What to do with each finished file.
    public struct Settings: Sendable, Equatable {
        /// The shell command (`$1` is the file); nil: none.
        public var command: String?
        /// Maximum hand-offs running at once.
        public var maximumRunning: Int

        public init(command: String?, maximumRunning: Int = 2) {
            self.command = command
            self.maximumRunning = maximumRunning
        }
    }

    /// Writes an export of a finished file beside it and returns the export's path (the receiver
    /// passes `RecordingExporter` here for `--export-on-finalize`).
    public typealias Exporter = @Sendable (_ cafPath: String) throws -> String

    private let outputDirectory: String
    private let settings: Settings
    private let exporter: Exporter?
    private let journal: HandOffJournal
    private let logger: Logger
    private let queue = DispatchQueue(label: "capture-recv hand-off")
    private var schedule: HandOffSchedule
    private var recordings: [String: FinishedRecording] = [:]
    private var wakeScheduled: Int64?

    public init(outputDirectory: String, settings: Settings, exporter: Exporter? = nil, logger: Logger) {
        self.outputDirectory = outputDirectory
        self.settings = settings
        self.exporter = exporter
        self.journal = HandOffJournal(outputDirectory: outputDirectory)
        self.logger = logger
        self.schedule = HandOffSchedule(maximumRunning: settings.maximumRunning)
    }

    /// Replays the journal: every hand-off a previous run did not complete runs again.
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

    private func schedule(_ recording: FinishedRecording) {
        queue.async { [self] in
            recordings[recording.relativePath] = recording
            perform(schedule.handle(.enqueued(path: recording.relativePath, now: Self.now())))
        }
    }

    private static func now() -> Int64 { Int64(DispatchTime.now().uptimeNanoseconds) }

    /// On `queue`.
    private func perform(_ actions: [HandOffSchedule.Action]) {
        for action in actions {
            switch action {
            case .start(let path, let attempt):
                guard let recording = recordings[path] else { continue }
                let thread = Thread { [self] in
                    let succeeded = run(recording, attempt: attempt)
                    queue.async { [self] in perform(schedule.handle(.runEnded(path: path, succeeded: succeeded, now: Self.now()))) }
                }
                thread.name = "hand-off"
                thread.start()
            case .completed(let path):
                journal.remove(path)
                recordings[path] = nil
            case .retry(let path, let at, let attempt):
                logger.warning("hand-off will be retried", metadata: [
                    "path": "\(path)", "attempt": "\(attempt)", "retry_in_s": "\(String(format: "%.1f", Double(max(0, at - Self.now())) / 1e9))",
                ])
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

    /// Runs one hand-off (export, then command) on its own thread; true when it succeeded.
    private func run(_ recording: FinishedRecording, attempt: Int) -> Bool {
        let path = (outputDirectory as NSString).appendingPathComponent(recording.relativePath)
        guard FileManager.default.fileExists(atPath: path) else {
            logger.error("hand-off skipped: the finished file is gone", metadata: ["path": "\(path)"])
            return true
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
                logger.error("export of a finished file failed", metadata: ["path": "\(path)", "attempt": "\(attempt)", "error": "\(error)"])
                return false
            }
        }
        guard let command = settings.command else { return true }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("capture-recv-hook-\(UUID().uuidString).log")
        guard FileManager.default.createFile(atPath: output.path, contents: nil), let capture = try? FileHandle(forWritingTo: output) else {
            logger.error("hand-off cannot capture its command's output", metadata: ["path": "\(path)", "file": "\(output.path)"])
            return false
        }
        defer {
            try? capture.close()
            try? FileManager.default.removeItem(at: output)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command, "capture-recv-hook", path]
        process.environment = environment
        // In the output folder: the receiver's own working directory may be one its user cannot
        // enter (a service started from a private folder), which would fail every start.
        process.currentDirectoryURL = URL(fileURLWithPath: outputDirectory)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = capture
        process.standardError = capture
        do {
            try process.run()
        } catch {
            logger.error("hand-off command cannot start", metadata: ["path": "\(path)", "command": "\(command)", "error": "\(error)"])
            return false
        }
        process.waitUntilExit()
        let status = process.terminationReason == .exit ? "exit \(process.terminationStatus)" : "signal \(process.terminationStatus)"
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        let tail = String(text.suffix(2_048)).trimmingCharacters(in: .whitespacesAndNewlines)
        if process.terminationReason == .exit, process.terminationStatus == 0 {
            logger.info("hand-off of a finished file done", metadata: ["path": "\(path)", "status": "\(status)", "attempt": "\(attempt)"])
            return true
        }
        logger.error("hand-off of a finished file failed", metadata: [
            "path": "\(path)", "status": "\(status)", "attempt": "\(attempt)", "output": "\(tail)",
        ])
        return false
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
