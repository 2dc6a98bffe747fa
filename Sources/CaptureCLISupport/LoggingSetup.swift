import CaptureCore
import ArgumentParser
import Foundation
import Logging
import Synchronization

/// How log lines are written.
public enum LogFormat: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// `2026-11-21T10:00:00Z info capture-recv: stream opened peer=… file=…`
    case text
    /// One JSON object a line, for log collectors.
    case json
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--log-level`: one of swift-log's seven levels. Read through a transform so that a wrong value
/// is refused in one line (ArgumentParser lists six or more choices on a line each, and a setting's
/// source would end up after the last of them).
public enum LogLevelOption {
    /// `trace, debug, info, notice, warning, error or critical`.
    static let choices = Logger.Level.allCases.dropLast().map(\.rawValue).joined(separator: ", ") + " or " + (Logger.Level.allCases.last?.rawValue ?? "")

    /// The option's help, with its default.
    public static func help(default level: Logger.Level) -> ArgumentHelp {
        ArgumentHelp("Log level: \(choices). (default: \(level.rawValue))", valueName: "LEVEL")
    }

    /// For `@Option(transform:)`: the level `text` names.
    @Sendable public static func parse(_ text: String) throws(ValidationError) -> Logger.Level {
        guard let level = Logger.Level(rawValue: text) else { throw ValidationError("use \(choices)") }
        return level
    }
}

/// Sets up swift-log for an executable: lines to standard error (or to whoever owns it), in text
/// or JSON, at a level.
public enum LoggingSetup {
    /// Bootstraps swift-log once for the process and returns the executable's logger.
    /// - Parameter output: receives each finished line, without its newline; by default it is
    ///   written to standard error. capture-send passes its status console here, so that log lines
    ///   and the status line share standard error without landing on one another.
    public static func bootstrap(
        label: String, format: LogFormat, level: Logger.Level,
        output: @escaping @Sendable (String) -> Void = LineLogHandler.writeToStandardError
    ) -> Logger {
        LoggingSystem.bootstrap { name in
            var handler = LineLogHandler(label: name, format: format, output: output)
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// A log handler that writes one line per event, as text or as JSON, to its output (standard
/// error unless told otherwise).
public struct LineLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let format: LogFormat
    private let output: @Sendable (String) -> Void
    /// Held while a line is written to standard error, so lines never interleave.
    private static let oneLineAtATime = Mutex(())

    /// A handler whose finished lines (without newline) go to `output`.
    public init(label: String, format: LogFormat, output: @escaping @Sendable (String) -> Void = LineLogHandler.writeToStandardError) {
        self.label = label
        self.format = format
        self.output = output
    }

    /// Writes `line` and a newline to standard error, one line at a time.
    @Sendable
    public static func writeToStandardError(_ line: String) {
        oneLineAtATime.withLock { _ in
            StandardStreams.writeError(line + "\n")
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        output(Self.render(level: event.level, message: "\(event.message)", metadata: merged, label: label, format: format, time: Date()))
    }

    /// One log line (without newline) as this handler writes it.
    public static func render(level: Logger.Level, message: String, metadata: Logger.Metadata, label: String, format: LogFormat, time: Date) -> String {
        let stamp = timestamp(time)
        switch format {
        case .text:
            // Peers' strings (stream names, hosts, reasons) end up in messages and values: control
            // characters are escaped, so nobody can start a forged line, recolour a terminal or cut
            // a line with NUL; a value with spaces, quotes or `=` is quoted.
            let fields = metadata.sorted { $0.key < $1.key }.map { "\(escaped($0.key))=\(quoteIfNeeded(escaped("\($0.value)")))" }
            return ([stamp, "\(level)", "\(label):", escaped(message)] + fields).joined(separator: " ")
        case .json:
            var object: [String: String] = ["time": stamp, "level": "\(level)", "logger": label, "message": message]
            for (key, value) in metadata { object[key] = "\(value)" }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }

    private static func quoteIfNeeded(_ value: String) -> String {
        guard value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// `text` with C0 and C1 control characters, DEL and the Unicode line and paragraph separators
    /// written as escapes (`\n`, `\r`, `\t`, `\u{1B}`), and a backslash as `\\` so an escape is
    /// never ambiguous: one event is always one line, as written.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                result.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default: result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\\" || scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    private static func timestamp(_ time: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: time)
    }
}

/// The level an executable logs at unless `--log-level` says otherwise (capture-send: notice,
/// capture-recv: info).
public protocol DefaultLogLevel {
    static var level: Logger.Level { get }
}

/// `--log-format` and `--log-level`, the same in both executables, and the rule that a failed run's
/// one line is a JSON line too with `--log-format json`.
public struct LogOptions<Default: DefaultLogLevel>: ParsableArguments {
    @Option(name: .long, help: "Log format: text or json.")
    public var logFormat: LogFormat = .text

    @Option(name: .long, help: LogLevelOption.help(default: Default.level), transform: LogLevelOption.parse)
    public var logLevel: Logger.Level = Default.level

    public init() {}

    /// Runs `body`; with `--log-format json`, a `CLIError` it throws is written as a JSON final line
    /// (ArgumentParser would print a plain `Error:` line) and the run exits 1.
    public func reportingErrors(label: String, _ body: () async throws -> Void) async throws {
        do { try await body() } catch { try report(error, label: label) }
    }

    /// `reportingErrors` for a synchronous run.
    public func reportingErrors(label: String, _ body: () throws -> Void) throws {
        do { try body() } catch { try report(error, label: label) }
    }

    private func report(_ error: any Error, label: String) throws -> Never {
        if let failure = error as? CLIError, logFormat == .json {
            FinalLine.write(failure.description, format: .json, label: label)
            throw ExitCode.failure
        }
        throw error
    }
}
