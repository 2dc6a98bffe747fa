import ArgumentParser
import Foundation
import XCTest

@testable import CaptureCLISupport
@testable import capture_recv
@testable import capture_send

/// Issue 27, item 10: every numeric option of every command and subcommand of both executables,
/// found in the commands themselves (ArgumentParser's dump, and the number-typed properties of the
/// parsed commands), has a documented range; hostile values (0, negative, NaN, ±inf, 1e308, 2^63,
/// and unit forms like `9999999999G`) are accepted with their meaning or refused with one line that
/// names the option and the range, with ArgumentParser's usage status 64, from the command line, a
/// variable and the config file. Runs in process; the end-to-end runs are AbsurdSettingsTests.
final class NumericRangeTableTests: XCTestCase {
    /// One command tree: its root, the arguments that make each of its commands valid, and its ranges.
    struct Tree {
        let program: String
        let root: any ParsableCommand.Type
        /// Settings of the command whose path is `settingsPath`; nil for a tree without settings.
        let settings: CommandSettings?
        let settingsPath: [String]
        /// For each command (by its path in the dump), the arguments that make it parse.
        let baseArguments: [[String]: [String]]
        let ranges: [NumericOption]
    }

    static let trees = [
        Tree(
            program: "capture-send", root: CaptureSend.self, settings: CaptureSend.settings, settingsPath: ["capture-send"],
            baseArguments: [["capture-send"]: ["127.0.0.1:7373"]], ranges: SendRanges.all),
        Tree(
            program: "capture-send", root: SpoolCommand.self, settings: nil, settingsPath: [],
            baseArguments: [
                ["capture-send spool"]: [], ["capture-send spool", "list"]: ["list"], ["capture-send spool", "deliver"]: ["deliver"],
                ["capture-send spool", "discard"]: ["discard", "0123"],
            ],
            ranges: SendRanges.all),
        Tree(
            program: "capture-recv", root: CaptureRecv.self, settings: CaptureRecv.settings, settingsPath: ["capture-recv", "serve"],
            baseArguments: [
                ["capture-recv"]: ["--out", "/nonexistent/recordings"], ["capture-recv", "serve"]: ["serve", "--out", "/nonexistent/recordings"],
                ["capture-recv", "recover"]: ["recover", "/nonexistent/a.caf"],
                ["capture-recv", "export"]: ["export", "/nonexistent/a.caf", "--to", "wav"],
                ["capture-recv", "gen-cert"]: ["gen-cert", "--out", "/nonexistent/certificates"],
            ],
            ranges: ReceiveRanges.all),
    ]

    /// The options whose value is no number: names, paths, addresses (their ports are checked by
    /// HostAndPort), choices, templates, commands. Any other option must have a range.
    static let textOptions: [String: Set<String>] = [
        "capture-send": [
            "source", "file", "device", "format", "codec", "application", "stream-name", "log-format", "log-level",
            "ca", "pin", "cert", "key", "token-file", "spool", "also", "to", "record",
        ],
        "capture-recv": [
            "out", "listen", "log-format", "log-level", "tls-cert", "tls-key", "client-ca", "token-file", "http", "metrics",
            "http-token-file", "http-allow-host", "name-template", "on-finalize", "export-on-finalize", "to", "host", "owner", "log-dir",
            "alarm-override", "on-alarm",
        ],
    ]

    /// Extra arguments an option's extreme values need to be valid together with the others.
    static let companions: [String: [String]] = [
        "reconnect-min": ["--reconnect-max=3600"],
        "reconnect-max": ["--reconnect-min=0.001"],
        "alarm-loudness-min": ["--alarm-loudness-max=20"],
        "alarm-loudness-max": ["--alarm-loudness-min=-120"],
        "record-segment": ["--record=/nonexistent/take.caf"],
    ]

    // MARK: Every numeric option has a range

    func testEveryOptionOfEveryCommandIsANumberWithARangeOrListedAsText() throws {
        for program in ["capture-send", "capture-recv"] {
            let trees = Self.trees.filter { $0.program == program }
            let ranges = Set(trees[0].ranges.map(\.name))
            let text = Self.textOptions[program] ?? []
            var seen: Set<String> = []
            for tree in trees {
                let commands = CommandSettings.commands(of: tree.root)
                XCTAssertEqual(Set(commands.map(\.path)), Set(tree.baseArguments.keys), "\(program): the commands of the tree")
                for command in commands {
                    for option in command.options where option.kind == .option {
                        seen.insert(option.key)
                        XCTAssertTrue(
                            ranges.contains(option.key) != text.contains(option.key),
                            "\(command.path.joined(separator: " ")) --\(option.key) must be either a numeric option with a range or listed as text, not both")
                    }
                    // The parsed command's number-typed options: each has a range, none is called text.
                    let parsed = try tree.root.parseAsRoot(try XCTUnwrap(tree.baseArguments[command.path]))
                    let numbers = ParsedOptions.numberKeys(of: parsed)
                    XCTAssertTrue(numbers.isSubset(of: ranges), "\(command.path): numbers without a range: \(numbers.subtracting(ranges).sorted())")
                }
            }
            XCTAssertEqual(ranges.subtracting(seen), [], "\(program): ranges of options no command has")
            XCTAssertEqual(text.subtracting(seen), [], "\(program): text options no command has")
        }
    }

    // MARK: The hostile table

    /// The values every numeric option is given, with what they mean as plain numbers (nil: not a
    /// number at all): 0, negative, NaN, ±inf, 1e308, 2^63.
    static let hostile: [(text: String, meaning: Double?)] = [
        ("0", 0), ("-1", -1), ("nan", nil), ("inf", nil), ("-inf", nil), ("1e308", 1e308), ("9223372036854775808", 9_223_372_036_854_775_808),
    ]

    /// More values that are no numbers, or not the ones they look like; `NumericOption` is given
    /// them directly for every option (ArgumentParser hands it the text as it is).
    static let odd: [(text: String, meaning: Double?)] = [
        ("-0.5", -0.5), ("NaN", nil), ("infinity", nil), ("-1e308", -1e308), ("1e-300", 1e-300), ("9223372036854775807", 0x1p63),
        ("-9223372036854775808", -9_223_372_036_854_775_808), ("18446744073709551616", 18_446_744_073_709_551_616), ("0x10", nil),
        ("0x1p3", nil), ("1_000", nil), ("fast", nil), ("", nil), (" 5", nil), ("5 ", nil), ("٣", nil),
    ]

    /// Values in the option's own notation and at the ends of its range, with their meaning in its unit.
    static func unitForms(_ option: NumericOption) -> [(text: String, meaning: Double?)] {
        switch option.form {
        case .bytes:
            return [
                ("9999999999G", 9_999_999_999 * 1_073_741_824), ("1e300K", 1e300 * 1_024), ("-1G", -1_073_741_824), ("1M", 1_048_576),
                ("1048575", 1_048_575), ("16T", 17_592_186_044_416), ("17T", 18_691_697_672_192), ("1.5g", 1_610_612_736), ("nanG", nil),
            ]
        case .duration:
            let upper = option.range.upperBound
            return [
                ("1e300s", nil), ("99999999999999999999h", nil), ("2562047788015215h", 2_562_047_788_015_215 * 3_600), ("1h30m", 5_400),
                ("\(Int(upper) / 3_600)h", upper), ("\(Int(upper) / 3_600 + 1)h", upper + 3_600), ("7d", nil), ("-5m", nil),
            ]
        case .bitrate:
            return [("128k", 128_000), ("1e300k", 1e300 * 1_000), ("6k", 6_000), ("510k", 510_000), ("511k", 511_000), ("5.999k", 5_999), ("1M", 1_000_000), ("0.1m", 100_000), ("1e-6G", 1_000)]
        case .choices:
            return [("2.5", 2.5), ("20ms", 20), ("60", 60), ("15", 15), ("61", 61), ("1e300ms", 1e300)]
        case .integer, .real:
            let below = option.form == .integer ? option.range.lowerBound - 1 : option.range.lowerBound - 0.0005
            let above = option.form == .integer ? option.range.upperBound + 1 : option.range.upperBound + 0.0005
            return [
                (NumericOption.number(option.range.lowerBound), option.range.lowerBound),
                (NumericOption.number(option.range.upperBound), option.range.upperBound),
                ("\(below)", below), ("\(above)", above), ("2.5", 2.5),
            ]
        }
    }

    /// Whether a value meaning `meaning` is to be accepted by `option`.
    static func accepts(_ option: NumericOption, _ meaning: Double?) -> Bool {
        guard let meaning, meaning.isFinite, option.range.contains(meaning) else { return false }
        switch option.form {
        case .integer, .bytes, .bitrate, .duration: return meaning.rounded() == meaning
        case .choices(let values): return values.contains(meaning)
        case .real: return true
        }
    }

    /// The commands of `tree` that have `option`, with their arguments.
    static func commands(having option: NumericOption, in tree: Tree) -> [(path: [String], arguments: [String])] {
        CommandSettings.commands(of: tree.root).compactMap { command in
            guard command.options.contains(where: { $0.key == option.name }), let base = tree.baseArguments[command.path] else { return nil }
            return (command.path, base + (companions[option.name] ?? []))
        }
    }

    /// What `parsed` holds for `option`, in its unit.
    static func parsedValue(_ parsed: any ParsableArguments, _ option: NumericOption) -> Double? {
        switch ParsedOptions.values(of: parsed)[option.name] {
        case let number as Int: return Double(number)
        case let number as Double: return number
        case let text as String: return option.value(text)
        default: return nil
        }
    }

    func testEveryNumericOptionReadsOnlyNumbersWithinItsRange() {
        for tree in Self.trees {
            for option in tree.ranges {
                for (text, meaning) in Self.hostile + Self.odd + Self.unitForms(option) {
                    XCTAssertEqual(option.value(text), Self.accepts(option, meaning) ? meaning : nil, "\(option.spelling) \(text)")
                }
            }
        }
    }

    func testEveryNumericOptionOnTheCommandLineAcceptsItsRangeAndRefusesTheRestWithOneLine() throws {
        var checked = 0
        for tree in Self.trees {
            for option in tree.ranges {
                for command in Self.commands(having: option, in: tree) {
                    for (text, meaning) in Self.hostile + Self.unitForms(option) {
                        let arguments = command.arguments + ["\(option.spelling)=\(text)"]
                        let context = "\(command.path.joined(separator: " ")) \(option.spelling)=\(text)"
                        checked += 1
                        do {
                            let parsed = try tree.root.parseAsRoot(arguments)
                            XCTAssertTrue(Self.accepts(option, meaning), "\(context) was accepted; the range is \(option.rangeText)")
                            XCTAssertEqual(Self.parsedValue(parsed, option), meaning, "\(context): the value means what it says")
                            XCTAssertEqual(ParsedOptions.outOfRange(parsed, ranges: tree.ranges), [], context)
                        } catch {
                            XCTAssertFalse(Self.accepts(option, meaning), "\(context) was refused: \(tree.root.message(for: error))")
                            Self.assertRefusal(tree.root, error, option: option, context: context)
                        }
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 350)
    }

    /// One line naming the option and its range, with status 64.
    static func assertRefusal(_ root: any ParsableCommand.Type, _ error: any Error, option: NumericOption, context: String, file: StaticString = #filePath, line: UInt = #line) {
        let message = root.message(for: error)
        XCTAssertEqual(root.exitCode(for: error), .validationFailure, "\(context): \(message)", file: file, line: line)
        XCTAssertFalse(message.contains("\n"), "\(context): one line: \(message)", file: file, line: line)
        XCTAssertTrue(ConfiguredArguments.message(message, names: option.spelling), "\(context): names the option: \(message)", file: file, line: line)
        XCTAssertTrue(message.contains(option.rangeText), "\(context): states the range \(option.rangeText): \(message)", file: file, line: line)
    }

    func testEverySettingFromAVariableOrTheConfigFileIsCheckedTheSameWayAndNamesItsSource() throws {
        let configPath = "/settings/absurd.json"
        var checked = 0
        for tree in Self.trees {
            guard let settings = tree.settings else { continue }
            let base = try XCTUnwrap(tree.baseArguments[tree.settingsPath])
            let help = tree.root.helpMessage(for: tree.program == "capture-recv" ? Serve.self : tree.root, includeHidden: true, columns: 10_000)
            for option in tree.ranges where settings.setting(option.name) != nil {
                let user = base + (Self.companions[option.name] ?? [])
                let variable = settings.environmentVariable(option.name)
                let file = "\"\(option.name)\" in the config file \(configPath)"
                let named = [settings.environmentVariable(CommandSettings.configKey): configPath]
                // As text in a variable, as a JSON number and as JSON text in the file.
                var sources: [(environment: [String: String], json: String?, meaning: Double?, text: String?, from: String)] = []
                for (text, meaning) in Self.hostile + Array(Self.unitForms(option).prefix(2)) {
                    sources.append(([variable: text], nil, meaning, text, "\(variable)=\(text)"))
                }
                for number in ["0", "-1", "1e308", "9223372036854775808", NumericOption.number(option.range.upperBound)] {
                    sources.append((named, #"{"\#(option.name)": \#(number)}"#, Double(number), nil, file))
                }
                if let (text, meaning) = Self.unitForms(option).first {
                    sources.append((named, try String(decoding: JSONSerialization.data(withJSONObject: [option.name: text]), as: UTF8.self), meaning, text, file))
                }
                for source in sources {
                    checked += 1
                    let files = SettingsFiles.memory(source.json.map { [configPath: Data($0.utf8)] } ?? [:])
                    let context = "\(option.spelling) from \(source.from)"
                    do {
                        let arguments = try ConfiguredCommandLine.arguments(
                            for: tree.root, settings: settings, userArguments: user, environment: source.environment, files: files)
                        XCTAssertTrue(Self.accepts(option, source.meaning), "\(context) was accepted; the range is \(option.rangeText)")
                        let parsed = try tree.root.parseAsRoot(arguments)
                        XCTAssertEqual(Self.parsedValue(parsed, option), source.meaning, context)
                    } catch let error as ConfigurationError {
                        XCTAssertFalse(Self.accepts(option, source.meaning), "\(context) was refused: \(error)")
                        guard case .rejected(let message, let from) = error else {
                            XCTFail("\(context): \(error)")
                            continue
                        }
                        XCTAssertEqual(from.map(\.description), [source.from], context)
                        XCTAssertEqual(error.description, "\(message) (from \(source.from))", context)
                        XCTAssertFalse(message.contains("\n"), context)
                        XCTAssertTrue(ConfiguredArguments.message(message, names: option.spelling), "\(context): \(message)")
                        XCTAssertTrue(message.contains(option.rangeText), "\(context): \(message)")
                        if let text = source.text, option.form != .duration {
                            let valueName = Self.valueName(option, help: help)
                            XCTAssertEqual(message, "The value '\(text)' is invalid for '\(option.spelling) <\(valueName)>': \(option.refusal.message)", context)
                        }
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 250)
    }

    /// The value name `help` shows for an option (`N`, `SECONDS`, or ArgumentParser's own).
    static func valueName(_ option: NumericOption, help: String) -> String {
        for line in help.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            guard trimmed.hasPrefix(option.spelling + " <"), let close = trimmed.firstIndex(of: ">") else { continue }
            return String(trimmed[trimmed.index(trimmed.startIndex, offsetBy: option.spelling.count + 2)..<close])
        }
        return "?"
    }

    // MARK: What passes converts without a trap

    func testTheLargestAndSmallestValuesConvertIntoWhatARunUses() throws {
        func send(_ arguments: [String]) throws -> [String: String] {
            try XCTUnwrap(CaptureSendProgram.conversions(of: try CaptureSend.parseAsRoot(["127.0.0.1:7373"] + arguments)))
        }
        let largest = try send([
            "--duration=31622400", "--rate=192000", "--spool-max=16T", "--idle-timeout=3600", "--status-interval=86400",
            "--reconnect-min=3600", "--reconnect-max=3600", "--buffer-seconds=10", "--stop-timeout=86400", "--also-give-up=168h",
            "--bitrate=510k", "--frame-ms=60",
        ])
        XCTAssertEqual(largest["duration-frames"], "\(31_622_400 * 192_000)")
        XCTAssertEqual(largest["spool-capacity"], "\(17_592_186_044_416)")
        XCTAssertEqual(largest["idle-timeout-ns"], "\(3_600_000_000_000)")
        XCTAssertEqual(largest["heartbeat-ns"], "\(900_000_000_000)")
        XCTAssertEqual(largest["status-interval"], "\(Duration.seconds(86_400))")
        XCTAssertEqual(largest["reconnect"], "3600.0...3600.0")
        XCTAssertEqual(largest["give-up-s"], "604800.0")
        XCTAssertEqual(largest["opus"], "510000 b/s, 60 ms")
        let smallest = try send([
            "--duration=0.001", "--rate=8000", "--spool-max=1M", "--idle-timeout=1", "--status-interval=0.01", "--reconnect-min=0.001",
            "--reconnect-max=0.001", "--buffer-seconds=0.001", "--stop-timeout=0", "--also-give-up=1s", "--bitrate=6k", "--frame-ms=2.5",
        ])
        XCTAssertEqual(smallest["duration-frames"], "8")
        XCTAssertEqual(smallest["spool-capacity"], "1048576")
        XCTAssertEqual(smallest["heartbeat-ns"], "250000000", "heartbeats at least every 0.25 s")
        XCTAssertEqual(smallest["status-interval"], "\(Duration.milliseconds(10))")
        XCTAssertEqual(smallest["buffer-frames"], "8")
        XCTAssertEqual(smallest["opus"], "6000 b/s, 2.5 ms")

        let deliver = try SpoolCommand.parseAsRoot(["deliver", "--timeout=604800"])
        XCTAssertEqual(CaptureSendProgram.conversions(of: deliver), ["timeout-ns": "604800000000000"])

        func receive(_ arguments: [String]) throws -> [String: String] {
            try XCTUnwrap(CaptureRecvProgram.conversions(of: try CaptureRecv.parseAsRoot(["--out", "/nonexistent"] + arguments)))
        }
        let receiver = try receive([
            "--max-streams=1000000", "--max-frame-bytes=16777216", "--sync-ms=10000", "--handshake-timeout=3600", "--idle-timeout=3600",
            "--auth-failure-limit=1000000", "--auth-block-seconds=86400", "--resume-window=2592000", "--max-waiting-streams=1000000",
            "--segment=24h",
        ])
        XCTAssertEqual(receiver["max-streams"], "1000000")
        XCTAssertEqual(receiver["handshake-ns"], "3600000000000")
        XCTAssertEqual(receiver["heartbeat-ns"], "900000000000")
        XCTAssertEqual(receiver["sync-interval"], "\(Duration.seconds(10))")
        XCTAssertEqual(receiver["resume-window-s"], "2592000")
        XCTAssertEqual(receiver["segment-s"], "86400")
        let finalizeAtOnce = try receive(["--resume-window=0", "--auth-failure-limit=0", "--idle-timeout=2"])
        XCTAssertEqual(finalizeAtOnce["resume-window-s"], "0")
        XCTAssertEqual(finalizeAtOnce["heartbeat-ns"], "1000000000", "heartbeats at least every second")
        let genCert = try CaptureRecv.parseAsRoot(["gen-cert", "--out", "/nonexistent", "--days=3650"])
        XCTAssertEqual(CaptureRecvProgram.conversions(of: genCert), ["valid-s": "315360000.0"])
    }

    // MARK: Options that go together

    func testATonesFrequencyMustBeBelowHalfItsRate() throws {
        XCTAssertNoThrow(try CaptureSend.parseAsRoot(["127.0.0.1:7373", "--source", "tone", "--rate", "48000", "--tone-frequency", "23999.5"]))
        XCTAssertNoThrow(try CaptureSend.parseAsRoot(["127.0.0.1:7373", "--rate", "8000", "--tone-frequency", "96000"]), "only a tone has one")
        do {
            _ = try CaptureSend.parseAsRoot(["127.0.0.1:7373", "--source", "tone", "--rate", "8000", "--tone-frequency", "4000"])
            XCTFail("a tone at half its rate was accepted")
        } catch {
            XCTAssertEqual(CaptureSend.exitCode(for: error), .validationFailure)
            XCTAssertEqual(
                CaptureSend.message(for: error),
                "--tone-frequency 4000 Hz is not below half the sample rate (--rate 8000): use a lower frequency or a higher rate")
        }
        do {
            _ = try CaptureSend.parseAsRoot(["127.0.0.1:7373", "--reconnect-min", "2", "--reconnect-max", "1"])
            XCTFail("a longest delay below the first was accepted")
        } catch {
            XCTAssertEqual(CaptureSend.exitCode(for: error), .validationFailure)
            XCTAssertEqual(
                CaptureSend.message(for: error),
                "--reconnect-max 1 is below --reconnect-min 2: the longest delay cannot be shorter than the first")
        }
    }
}
