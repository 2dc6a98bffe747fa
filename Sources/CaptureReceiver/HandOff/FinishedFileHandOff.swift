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
/// At least once, never twice at once for one file, retried with backoff, stopped at its time limit
/// and when the receiver stops: a `HookQueue` over the journal in `OUT/.handoff`. `enqueue`
/// journals the file before the step that makes finishing it final. The command must be idempotent
/// (copying to the same place is).
public final class FinishedFileHandOff: Sendable {
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

    private let queue: HookQueue<FinishedRecording>
    private let logger: Logger

    /// `settingNames`: how the log names the timeout's setting.
    public init(
        outputDirectory: String, settings: Settings, exporter: Exporter? = nil, logger: Logger, settingNames: any SettingNaming = LibrarySettingNames()
    ) {
        self.logger = logger
        let definition = HookQueue<FinishedRecording>.Definition(
            command: settings.command, timeout: settings.timeout, timeoutSetting: .handOffTimeout, settingNames: settingNames, commandName: "capture-recv-hook",
            noun: "hand-off", subject: "hand-off of a finished file", keyName: "path"
        ) { recording in
            Self.prepare(recording, outputDirectory: outputDirectory, exporter: exporter, hasCommand: settings.command != nil, logger: logger)
        }
        queue = HookQueue(outputDirectory: outputDirectory, journal: HandOffJournal(outputDirectory: outputDirectory), definition: definition, logger: logger)
    }

    /// Replays the journal: every hand-off a previous run did not complete runs again (those a
    /// command still runs for, started by another receiver or by a killed one, once it ended).
    public func start() { queue.start() }

    /// Journals `recording` durably and schedules its hand-off. Called on a writer thread, when
    /// the file is finalized and before the stream's state says so.
    public func enqueue(_ recording: FinishedRecording) throws(DurableFileError) {
        try queue.enqueue(recording)
    }

    /// The receiver stops: no hand-off starts any more, and running commands are stopped with
    /// their process groups (SIGTERM, then SIGKILL after a grace). Their journal entries stay, so
    /// they run again at the next start. Returns at once; `waitUntilStopped` waits.
    public func beginStopping() { queue.beginStopping() }

    /// How long a command being stopped has from SIGTERM to SIGKILL: the receiver's shutdown waits
    /// at least this (and a second) for its hand-off and alarm commands.
    public static var stopGrace: Duration { .nanoseconds(HandOffSchedule.Limits().grace) }

    /// Waits until no hand-off runs any more (after `beginStopping`), at most until `deadline`;
    /// false when one still ran then.
    @discardableResult
    public func waitUntilStopped(deadline: DispatchTime) -> Bool { queue.waitUntilStopped(deadline: deadline) }

    /// A run's first step: the file must still be there; then its export, when asked.
    private static func prepare(
        _ recording: FinishedRecording, outputDirectory: String, exporter: Exporter?, hasCommand: Bool, logger: Logger
    ) -> HookQueue<FinishedRecording>.Preparation {
        let path = (outputDirectory as NSString).appendingPathComponent(recording.relativePath)
        guard FileManager.default.fileExists(atPath: path) else { return .skip(reason: "the finished file is gone") }
        var environment = [
            "CAPTURE_FILE": path,
            "CAPTURE_RELATIVE_PATH": recording.relativePath,
            "CAPTURE_STREAM_NAME": hookPlainText(recording.streamName),
            "CAPTURE_STREAM_ID": hookPlainText(recording.streamID),
            "CAPTURE_SOURCE_HOST": hookPlainText(recording.sourceHost),
            "CAPTURE_FIRST_SAMPLE_TIME": recording.firstSampleTime,
            "CAPTURE_FRAMES": "\(recording.frames)",
            "CAPTURE_COMPLETE": recording.complete ? "1" : "0",
        ]
        if let exporter {
            do {
                let exported = try exporter(path)
                environment["CAPTURE_EXPORT"] = exported
                logger.info("exported", metadata: ["path": "\(path)", "export": "\(exported)"])
            } catch {
                return .failed(status: "export failed: \(error)")
            }
        }
        guard hasCommand else { return .done(status: "exported") }
        return .run(arguments: [path], environment: environment)
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
