import ArgumentParser
import CaptureCLISupport
import CaptureCore
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

    /// One fuzz input: the settings layer (ours) for every input, and ArgumentParser's whole parse
    /// for one input in `fullParseShare` (chosen by the input's bytes, so an input always takes the
    /// same path). A whole parse costs 5 to 12 ms here (ArgumentParser reflects over a command of
    /// 60 options and renders its usage for every refusal, several times an input): run for every
    /// input it held the target to about 85 executions a second, a day for 10^7. Fuzz/README.md.
    public static func check(_ data: Data) {
        let input = Input(decoding: data)
        checkSettingsLayer(input)
        if takesFullParse(data) { _ = outcome(of: input) }
    }

    /// One input in this many also goes through ArgumentParser's whole parse.
    public static let fullParseShare: UInt64 = 64

    /// Whether `data` is one of the inputs that also take the whole parse (FNV-1a of its bytes).
    public static func takesFullParse(_ data: Data) -> Bool {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash % fullParseShare == 0
    }

    /// The settings layer without ArgumentParser: the config file and the variables turned into
    /// arguments (`ConfiguredArguments`, read from memory), and every value those arguments give a
    /// numeric option read by that option (`NumericOption`, ArgumentParser's `transform`) and
    /// converted the way a run converts it. Invariants: a configuration error is one line; a value
    /// read is finite, within the range, whole where the form asks for it, read the same by every
    /// reader of the option, and converts without a trap; a value refused is refused by every reader,
    /// with one line naming the range, and the value escaped for the `Error:` line is one line.
    public static func checkSettingsLayer(_ input: Input) {
        var arguments = input.arguments
        if let settings = input.program.settings {
            var environment = input.environment
            var files: [String: Data] = [:]
            if let file = input.configFile {
                files[configPath] = file
                let variable = settings.environmentVariable(CommandSettings.configKey)
                if environment[variable] == nil { environment[variable] = configPath }
            }
            do {
                let resolved = try ConfiguredArguments.resolve(input.arguments, settings: settings, environment: environment, files: .memory(files))
                for injected in resolved.injected {
                    precondition(!injected.arguments.isEmpty, "a setting put no argument on the command line: \(injected.setting.key)")
                }
                precondition(resolved.arguments.count >= input.arguments.count, "settings took arguments away from the command line")
                arguments = resolved.arguments
            } catch {
                let line = error.description
                precondition(!line.isEmpty && !line.contains(where: \.isNewline), "a configuration error is not one line: \(line)")
                return
            }
        }
        let ranges = Dictionary(input.program.ranges.map { ($0.spelling, $0) }, uniquingKeysWith: { first, _ in first })
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "--" { break }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let option = ranges[String(parts[0])] else { continue }
            let text: String
            if parts.count > 1 {
                text = String(parts[1])
            } else if index < arguments.endIndex {
                text = arguments[index]
                index += 1
            } else {
                continue
            }
            checkNumber(text, option)
        }
    }

    /// One value of a numeric option, through each of its readers and the conversions a run makes.
    static func checkNumber(_ text: String, _ option: NumericOption) {
        let checked = try? option.checked(text)
        let real = try? option.real(text)
        let integer = try? option.integer(text)
        guard let number = option.value(text) else {
            precondition(checked == nil && real == nil && integer == nil, "\(option.spelling) \(text): refused by one reader, read by another")
            let refusal = option.refusal.description
            precondition(refusal.contains(option.rangeText) && !refusal.contains(where: \.isNewline), "\(option.spelling): its refusal is not one line naming the range: \(refusal)")
            let quoted = LineLogHandler.escaped(text)
            precondition(!quoted.contains(where: { $0.isNewline || $0 == "\r" }), "\(option.spelling): a refused value escaped for the Error: line still breaks it: \(quoted)")
            return
        }
        precondition(number.isFinite && option.range.contains(number), "\(option.spelling) \(text) read as \(number), outside \(option.rangeText)")
        precondition(checked != nil && real == number, "\(option.spelling) \(text): read by one reader, refused by another")
        switch option.form {
        case .integer, .bytes, .bitrate, .duration:
            precondition(number.rounded() == number, "\(option.spelling) \(text) read as \(number), not whole")
            precondition(integer.map(Double.init) == number, "\(option.spelling) \(text): the whole number read differs: \(String(describing: integer))")
        case .choices(let values):
            precondition(values.contains(number), "\(option.spelling) \(text) read as \(number), none of the choices")
        case .real:
            break
        }
        if case .duration = option.form {
            let seconds = try? DurationText.seconds(text, option: option.spelling, range: Saturating.int64(option.range.lowerBound)...Saturating.int64(option.range.upperBound))
            precondition(seconds.map(Double.init) == number, "\(option.spelling) \(text): DurationText reads \(String(describing: seconds)), the option \(number)")
        }
        // The conversions a run makes of an option's number (frames at the highest rate, nanoseconds
        // for NIO's TimeAmount and Duration, bytes as Int64): exact within the documented ranges.
        let seconds: Double? = {
            if case .duration = option.form { return number }
            switch option.unit {
            case "seconds": return number
            case "ms": return number / 1_000
            default: return nil
            }
        }()
        if let seconds {
            let nanoseconds = Saturating.nanoseconds(seconds: seconds)
            precondition(nanoseconds != .max && nanoseconds != .min, "\(option.spelling) \(text): \(seconds) s saturates in nanoseconds")
            precondition(Saturating.frames(seconds: seconds, rate: 192_000) != .max, "\(option.spelling) \(text): \(seconds) s of frames saturates")
        }
        precondition(Int64(exactly: number.rounded()) != nil, "\(option.spelling) \(text): \(number) is no Int64")
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
