import ArgumentParser
import CaptureCLISupport
import CaptureExport
import CaptureReceiver
import Logging

/// capture-recv's options for how recordings are cut and named (docs/RECORDINGS.md).
struct RecordingOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Cut each stream into files of this length (e.g. 1h, 15m, 10s, 1h30m) at UTC boundaries of the stream's own timeline, counted from each UTC midnight: a file holds exactly its hour, also across reconnects. (default: one file per stream)",
        valueName: "DURATION"))
    var segment: String?

    @Option(name: .long, help: ArgumentHelp(
        "File names: strftime fields of the file's first sample time in UTC (%Y %m %d %H %M %S ...), {stream}, {stream_id}, {host}; '/' makes folders inside --out; .caf is appended, -2, -3 on a clash. (default: {stream}_%Y%m%dT%H%M%SZ)",
        valueName: "TEMPLATE"))
    var nameTemplate: String?

    @Option(name: .long, help: ArgumentHelp(
        "Run this shell command for each finished file (each segment, each stream's file): `sh -c CMD`, in the output folder, with the file's path as $1 and CAPTURE_FILE, CAPTURE_RELATIVE_PATH, CAPTURE_STREAM_NAME, CAPTURE_STREAM_ID, CAPTURE_SOURCE_HOST, CAPTURE_FIRST_SAMPLE_TIME, CAPTURE_FRAMES, CAPTURE_COMPLETE in its environment, its output logged when it fails. At least once, also across a crash (journaled in OUT/.handoff), retried with backoff until it exits 0, never twice at once for one file, also across receivers sharing --out and across restarts (it holds its journal entry's lock as descriptor 10: leave it open); SIGTERM stops running commands, which run again at the next start: make it idempotent. Example: 'rclone copyto \"$1\" archive:recordings/$CAPTURE_RELATIVE_PATH'. (default: none)",
        valueName: "CMD"))
    var onFinalize: String?

    @Option(name: .long, help: ArgumentHelp(
        "How long one run of --on-finalize may take, 1 second to 24 hours (e.g. 30s, 10m, 2h): past it the command's process group gets SIGTERM (SIGKILL 5 s later), and the attempt is logged as timed out and retried with the backoff. (default: 10m)",
        valueName: "DURATION"))
    var onFinalizeTimeout: String?

    @Option(name: .long, help: ArgumentHelp(
        "Export each finished file beside it as wav, rf64, flac or ogg (see `capture-recv export --help`), before --on-finalize runs (which gets the export's path as CAPTURE_EXPORT). (default: none)",
        valueName: "FORMAT"))
    var exportOnFinalize: ExportFormat?

    func validate() throws {
        if let onFinalize, onFinalize.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--on-finalize is empty; give the command to run for each finished file, e.g. 'cp \"$1\" /archive/'")
        }
        if let segment { _ = try Self.parseDuration(segment) }
        if let onFinalizeTimeout { _ = try Self.parseTimeout(onFinalizeTimeout) }
        if let nameTemplate {
            do { _ = try FileNameTemplate(nameTemplate) } catch { throw ValidationError(error.message(naming: CommandLineSettingNames())) }
        }
    }

    /// Applies the options to the receiver's configuration.
    func apply(to configuration: inout ReceiverConfiguration, logger: Logger) throws {
        if onFinalize != nil || exportOnFinalize != nil {
            var exporter: FinishedFileHandOff.Exporter?
            if let format = exportOnFinalize {
                exporter = { path in
                    do throws(ExportError) {
                        return try RecordingExporter.export(cafPath: path, as: format, replacing: true)
                    } catch {
                        throw CLIError(error.message(naming: CommandLineSettingNames()))
                    }
                }
            }
            let timeout = try onFinalizeTimeout.map(Self.parseTimeout) ?? Self.defaultTimeout
            configuration.handOff = FinishedFileHandOff(
                outputDirectory: configuration.outputDirectory, settings: .init(command: onFinalize, timeout: .seconds(timeout)), exporter: exporter, logger: logger,
                settingNames: CommandLineSettingNames())
        }
        if let segment { configuration.segmentLength = .seconds(try Self.parseDuration(segment)) }
        if let nameTemplate {
            do { configuration.nameTemplate = try FileNameTemplate(nameTemplate) } catch { throw ValidationError(error.message(naming: CommandLineSettingNames())) }
        }
    }

    /// Seconds in `1h`, `15m`, `10s`, `1h30m`, `90` (seconds): at least 1 s, at most a day.
    static func parseDuration(_ text: String) throws -> Int64 {
        try DurationText.seconds(text, option: "--segment", range: 1...86_400)
    }

    /// `--on-finalize-timeout`'s seconds: at least 1 s, at most a day.
    static func parseTimeout(_ text: String) throws -> Int64 {
        try DurationText.seconds(text, option: "--on-finalize-timeout", range: 1...86_400)
    }

    /// Ten minutes.
    static let defaultTimeout: Int64 = 600
}
