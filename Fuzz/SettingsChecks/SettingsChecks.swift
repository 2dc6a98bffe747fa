import ArgumentParser
import CaptureCLISupport
import Foundation
import capture_recv
import capture_send

/// Fuzz target 5: settings, as capture-send and capture-recv read them, in memory. The input picks
/// a command tree (its first byte: capture-send, capture-recv, or `capture-send spool`, which takes
/// no settings) and holds, separated by NUL bytes, a config file's text, environment variables (one
/// `NAME=VALUE` a line) and the command line (one argument a line). The settings go through
/// `ConfiguredCommandLine` (the config file named by `CAPTURE_…_CONFIG` or `--config`, read from
/// memory) and the command's own parsing and validation. Invariants: a refusal is one line, with
/// ArgumentParser's usage status (64) or help's (0); what is accepted has every number within its
/// documented range (`NumericOption`), and converts into what a run uses (frames, bytes, time
/// amounts, the encoder's settings) without a trap.
public enum SettingsChecks {
    /// Where the input's config file is, for `--config` and `CAPTURE_…_CONFIG` to name it.
    public static let configPath = "/fuzz/settings.json"

    /// A command tree an input can pick.
    public enum Program: UInt8, CaseIterable, Sendable {
        case send, receive, spool

        var command: any ParsableCommand.Type {
            switch self {
            case .send: return CaptureSendProgram.command
            case .receive: return CaptureRecvProgram.command
            case .spool: return CaptureSendProgram.spoolCommand
            }
        }

        var settings: CommandSettings? {
            switch self {
            case .send: return CaptureSendProgram.settings
            case .receive: return CaptureRecvProgram.settings
            case .spool: return nil
            }
        }

        var ranges: [NumericOption] {
            self == .receive ? CaptureRecvProgram.numericOptions : CaptureSendProgram.numericOptions
        }

        func conversions(of parsed: any ParsableCommand) -> [String: String]? {
            self == .receive ? CaptureRecvProgram.conversions(of: parsed) : CaptureSendProgram.conversions(of: parsed)
        }
    }

    /// One input, decoded.
    public struct Input: Equatable, Sendable {
        public var program: Program
        public var configFile: Data?
        public var environment: [String: String]
        public var arguments: [String]

        public init(program: Program, configFile: Data?, environment: [String: String], arguments: [String]) {
            self.program = program
            self.configFile = configFile
            self.environment = environment
            self.arguments = arguments
        }

        /// The bytes that decode to this input (for writing seeds).
        public var encoded: Data {
            var bytes = Data([program.rawValue])
            bytes += configFile ?? Data()
            bytes.append(0)
            bytes += Data(environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n").utf8)
            bytes.append(0)
            bytes += Data(arguments.joined(separator: "\n").utf8)
            return bytes
        }

        /// `data` as an input: the first byte picks the program, NUL bytes separate the parts.
        public init(decoding data: Data) {
            let bytes = Array(data)
            program = Program(rawValue: (bytes.first ?? 0) % UInt8(Program.allCases.count)) ?? .send
            let parts = bytes.dropFirst().split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
            let text = { (index: Int) -> String in index < parts.count ? String(decoding: parts[index], as: UTF8.self) : "" }
            configFile = parts.first.flatMap { $0.isEmpty ? nil : Data($0) }
            var environment: [String: String] = [:]
            for line in text(1).split(separator: "\n") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                environment[String(line[..<equals])] = String(line[line.index(after: equals)...])
            }
            self.environment = environment
            let arguments = text(2)
            self.arguments = arguments.isEmpty ? [] : arguments.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }
    }

    /// What became of an input, for the tests.
    public enum Outcome: Equatable, Sendable {
        /// A setting could not be used: the one line after `Error: `.
        case configurationError(String)
        /// ArgumentParser refused the arguments: its exit status and its one line.
        case refused(status: Int32, message: String)
        /// Help or another clean exit.
        case cleanExit
        /// Parsed and validated: the command's name and what its numbers convert into.
        case accepted(command: String, conversions: [String: String])
    }

    public static func check(_ data: Data) {
        _ = outcome(of: Input(decoding: data))
    }

    /// Runs an input through the settings and the command's parsing, checking every invariant.
    public static func outcome(of input: Input) -> Outcome {
        let command = input.program.command
        var environment = input.environment
        var files: [String: Data] = [:]
        if let file = input.configFile {
            files[configPath] = file
            if let settings = input.program.settings, environment[settings.environmentVariable(CommandSettings.configKey)] == nil {
                environment[settings.environmentVariable(CommandSettings.configKey)] = configPath
            }
        }
        var arguments = input.arguments
        if let settings = input.program.settings {
            do {
                arguments = try ConfiguredCommandLine.arguments(
                    for: command, settings: settings, userArguments: input.arguments, environment: environment, files: .memory(files))
            } catch {
                let line = error.description
                precondition(!line.isEmpty && !line.contains(where: \.isNewline), "a configuration error is not one line: \(line)")
                return .configurationError(line)
            }
        }
        let parsed: any ParsableCommand
        do {
            parsed = try command.parseAsRoot(arguments)
        } catch {
            let status = command.exitCode(for: error)
            if status == .success { return .cleanExit }
            // The line the executables write (CommandLineRun), after `Error: `.
            let message = CommandLineRun.message(command, error)
            precondition(status == .validationFailure, "a refusal exits \(status.rawValue), not 64: \(message)")
            precondition(!message.isEmpty && !message.contains(where: \.isNewline), "a refusal is not one line: \(message)")
            return .refused(status: status.rawValue, message: message)
        }
        let outside = ParsedOptions.outOfRange(parsed, ranges: input.program.ranges)
        precondition(outside.isEmpty, "accepted outside the documented ranges: \(outside.joined(separator: "; "))")
        let conversions = input.program.conversions(of: parsed) ?? [:]
        if let opus = conversions["opus"] {
            precondition(!opus.contains("no "), "an accepted --bitrate or --frame-ms is refused by the encoder: \(opus)")
        }
        return .accepted(command: type(of: parsed)._commandName, conversions: conversions)
    }
}
