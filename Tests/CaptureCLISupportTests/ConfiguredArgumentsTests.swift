import ArgumentParser
import CaptureCLISupport
import Foundation
import XCTest

/// A command shaped like capture-send: a positional, options, flags, an exclusive flag group, a
/// repeatable option and --config.
private struct ExampleSend: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "example-send")

    enum Mode: String, EnumerableFlag { case vbr, cvbr, cbr }

    @Argument var receiver: String?
    @Option var rate = 48_000
    @Option var device = "default"
    @Option var toneLevel = -12.0
    @Option var stopTimeout = 10.0
    @Flag var tls = false
    @Flag var quiet = false
    @Flag(exclusivity: .chooseLast) var mode: Mode = .vbr
    @Option var host: [String] = []
    @Option var config: String?
}

/// A command shaped like capture-recv: a default subcommand that receives, and others.
private struct ExampleRecv: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "example-recv", subcommands: [Serve.self, ExampleOther.self], defaultSubcommand: Serve.self)
}

/// Named after its type, as capture-recv's `serve` is (the name ArgumentParser's dump leaves out).
private struct Serve: ParsableCommand {
    @Option var out: String
    @Option var maxStreams = 64
    @Option var config: String?
}

private struct ExampleOther: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "other")
    @Option var out: String?
}

final class ConfiguredArgumentsTests: XCTestCase {
    private let send = CommandSettings(of: ExampleSend.self, program: "example-send", positionalKeys: ["receiver"])
    private let recv = CommandSettings(of: ExampleRecv.self, program: "example-recv")
    private var files: [URL] = []

    override func tearDown() {
        files.forEach { try? FileManager.default.removeItem(at: $0) }
        super.tearDown()
    }

    private func configFile(_ json: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("settings-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: url)
        files.append(url)
        return url.path
    }

    private func resolve(
        _ arguments: [String], file json: String? = nil, environment: [String: String] = [:], settings: CommandSettings? = nil
    ) throws -> ConfiguredArguments {
        var environment = environment
        if let json { environment["EXAMPLE_SEND_CONFIG"] = try configFile(json) }
        return try ConfiguredArguments.resolve(arguments, settings: settings ?? send, environment: environment)
    }

    private func parsed(_ arguments: [String], file json: String? = nil, environment: [String: String] = [:]) throws -> ExampleSend {
        try ExampleSend.parse(try resolve(arguments, file: json, environment: environment).arguments)
    }

    private func configurationError(
        _ arguments: [String], file json: String? = nil, environment: [String: String] = [:], settings: CommandSettings? = nil
    ) -> ConfigurationError? {
        do {
            _ = try resolve(arguments, file: json, environment: environment, settings: settings)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            XCTFail("unexpected \(error)")
            return nil
        }
    }

    // MARK: The settings come from ArgumentParser

    func testTheSettingsAreTheLongOptionsFlagsAndNamedPositionalsOfTheCommand() {
        XCTAssertEqual(send.settings.map(\.key), ["receiver", "rate", "device", "tone-level", "stop-timeout", "tls", "quiet", "vbr", "cvbr", "cbr", "host"])
        XCTAssertEqual(send.setting("tls")?.kind, .flag)
        XCTAssertEqual(send.setting("rate")?.kind, .option)
        XCTAssertEqual(send.setting("receiver")?.kind, .positional)
        XCTAssertEqual(send.setting("host")?.isRepeating, true)
        XCTAssertEqual(send.environmentVariable("stop-timeout"), "EXAMPLE_SEND_STOP_TIMEOUT")
        XCTAssertEqual(recv.settings.map(\.key), ["out", "max-streams"], "the default subcommand's options")
        XCTAssertEqual(recv.subcommands, ["serve", "other", "help"])
    }

    // MARK: Precedence: command line > environment > file > default

    func testPrecedenceTable() throws {
        let rows: [(file: Int?, environment: Int?, commandLine: Int?, expected: Int)] = [
            (nil, nil, nil, 48_000),
            (44_100, nil, nil, 44_100),
            (nil, 32_000, nil, 32_000),
            (nil, nil, 16_000, 16_000),
            (44_100, 32_000, nil, 32_000),
            (44_100, nil, 16_000, 16_000),
            (nil, 32_000, 16_000, 16_000),
            (44_100, 32_000, 16_000, 16_000),
        ]
        for row in rows {
            let file = row.file.map { #"{"rate": \#($0)}"# }
            let environment = row.environment.map { ["EXAMPLE_SEND_RATE": "\($0)"] } ?? [:]
            let arguments = row.commandLine.map { ["--rate", "\($0)"] } ?? []
            let command = try parsed(arguments, file: file, environment: environment)
            XCTAssertEqual(command.rate, row.expected, "file \(String(describing: row.file)), environment \(String(describing: row.environment)), command line \(String(describing: row.commandLine))")
        }
    }

    func testTextAndFractionalAndNegativeValues() throws {
        let command = try parsed([], file: #"{"device": "hw:1", "stop-timeout": 2.5, "tone-level": -6}"#)
        XCTAssertEqual(command.device, "hw:1")
        XCTAssertEqual(command.stopTimeout, 2.5)
        XCTAssertEqual(command.toneLevel, -6)
        let fromEnvironment = try parsed([], environment: ["EXAMPLE_SEND_TONE_LEVEL": "-3", "EXAMPLE_SEND_STOP_TIMEOUT": "0"])
        XCTAssertEqual(fromEnvironment.toneLevel, -3)
        XCTAssertEqual(fromEnvironment.stopTimeout, 0)
    }

    func testAnEmptyVariableCountsAsUnset() throws {
        let command = try parsed([], file: #"{"device": "hw:1"}"#, environment: ["EXAMPLE_SEND_DEVICE": ""])
        XCTAssertEqual(command.device, "hw:1")
    }

    // MARK: Flags

    func testFlagsTakeTrueOrFalse() throws {
        let fromFile = try parsed([], file: #"{"tls": true, "quiet": false}"#)
        XCTAssertTrue(fromFile.tls)
        XCTAssertFalse(fromFile.quiet)
        for (value, expected) in [("1", true), ("yes", true), ("true", true), ("YES", true), ("0", false), ("no", false), ("false", false)] {
            let command = try parsed([], environment: ["EXAMPLE_SEND_QUIET": value])
            XCTAssertEqual(command.quiet, expected, value)
        }
    }

    func testFalseInTheEnvironmentOverridesTrueInTheFile() throws {
        let command = try parsed([], file: #"{"tls": true}"#, environment: ["EXAMPLE_SEND_TLS": "0"])
        XCTAssertFalse(command.tls)
        let resolved = try resolve([], file: #"{"tls": true}"#, environment: ["EXAMPLE_SEND_TLS": "no"])
        XCTAssertEqual(resolved.injected, [], "false adds nothing")
    }

    func testTheCommandLineWinsInAnExclusiveFlagGroup() throws {
        let command = try parsed(["--cvbr"], file: #"{"cbr": true}"#)
        XCTAssertEqual(command.mode, .cvbr)
        let fromFile = try parsed([], file: #"{"cbr": true}"#)
        XCTAssertEqual(fromFile.mode, .cbr)
    }

    // MARK: Positionals, lists, the config file's name

    func testAPositionalFromTheSettingsOnlyWhenTheCommandLineHasNone() throws {
        let fromFile = try parsed(["--rate", "44100"], file: #"{"receiver": "recorder.example.org:7373"}"#)
        XCTAssertEqual(fromFile.receiver, "recorder.example.org:7373")
        XCTAssertEqual(fromFile.rate, 44_100)
        let given = try parsed(["--rate", "44100", "127.0.0.1:7373"], file: #"{"receiver": "recorder.example.org:7373"}"#)
        XCTAssertEqual(given.receiver, "127.0.0.1:7373")
        let afterTerminator = try parsed(["--", "127.0.0.1:7373"], environment: ["EXAMPLE_SEND_RECEIVER": "recorder.example.org:7373"])
        XCTAssertEqual(afterTerminator.receiver, "127.0.0.1:7373")
        let valueOfAnOption = try parsed(["--device", "hw:2"], environment: ["EXAMPLE_SEND_RECEIVER": "recorder.example.org:7373"])
        XCTAssertEqual(valueOfAnOption.receiver, "recorder.example.org:7373", "hw:2 is the value of --device, not a positional")
    }

    func testARepeatableOptionTakesAList() throws {
        let list = try parsed([], file: #"{"host": ["a.example.org", "10.0.0.2"]}"#)
        XCTAssertEqual(list.host, ["a.example.org", "10.0.0.2"])
        let one = try parsed([], file: #"{"host": "a.example.org"}"#)
        XCTAssertEqual(one.host, ["a.example.org"])
        let fromEnvironment = try parsed([], environment: ["EXAMPLE_SEND_HOST": "a.example.org,10.0.0.2"])
        XCTAssertEqual(fromEnvironment.host, ["a.example.org", "10.0.0.2"])
    }

    func testTheConfigOptionWinsOverTheConfigVariable() throws {
        let named = try configFile(#"{"rate": 16000}"#)
        let command = try parsed(["--config", named], file: #"{"rate": 44100}"#)
        XCTAssertEqual(command.rate, 16_000)
        let equals = try parsed(["--config=\(named)"], file: #"{"rate": 44100}"#)
        XCTAssertEqual(equals.rate, 16_000)
    }

    // MARK: Subcommands and help

    func testSettingsGoToTheDefaultSubcommandOnly() throws {
        let environment = ["EXAMPLE_RECV_OUT": "/srv/recordings", "EXAMPLE_RECV_MAX_STREAMS": "8"]
        let implicit = try ConfiguredArguments.resolve([], settings: recv, environment: environment)
        XCTAssertEqual(implicit.arguments, ["--out=/srv/recordings", "--max-streams=8"])
        let serve = try ConfiguredArguments.resolve(["serve", "--max-streams", "2"], settings: recv, environment: environment)
        XCTAssertEqual(serve.arguments, ["serve", "--out=/srv/recordings", "--max-streams=8", "--max-streams", "2"])
        let parsedServe = try XCTUnwrap(try ExampleRecv.parseAsRoot(serve.arguments) as? Serve)
        XCTAssertEqual(parsedServe.maxStreams, 2)
        XCTAssertEqual(parsedServe.out, "/srv/recordings")
        let other = try ConfiguredArguments.resolve(["other"], settings: recv, environment: environment)
        XCTAssertEqual(other.arguments, ["other"])
        let help = try ConfiguredArguments.resolve(["--help"], settings: recv, environment: ["EXAMPLE_RECV_OUTT": "x"])
        XCTAssertEqual(help.arguments, ["--help"], "help is shown even with a broken configuration")
    }

    // MARK: Errors

    func testAnUnknownVariableIsNamed() {
        let error = configurationError([], environment: ["EXAMPLE_SEND_RATEE": "1", "EXAMPLE_SENDER": "ignored"])
        XCTAssertEqual(error?.description, "EXAMPLE_SEND_RATEE is not a setting of example-send; settings are the long options of `example-send --help`")
        let options = configurationError([], environment: ["EXAMPLE_SEND_OPTIONS": "--codec opus"])
        XCTAssertEqual(options?.description, "EXAMPLE_SEND_OPTIONS is not a setting of example-send; settings are the long options of `example-send --help`",
                       "a whole command line in one variable is no setting: each option has its own")
    }

    func testAnUnknownKeyIsNamedWithTheFile() throws {
        let path = try configFile(#"{"rate": 44100, "rat": 1}"#)
        let error = configurationError(["--config", path])
        XCTAssertEqual(error?.description, "\"rat\" in the config file \(path) is not a setting of example-send; settings are the long options of `example-send --help`, written without the dashes")
        let config = try configFile(#"{"config": "/etc/other.json"}"#)
        let nested = configurationError(["--config", config])
        XCTAssertEqual(nested, .configInFile(path: config))
    }

    func testValuesOfTheWrongKindAreNamedWithTheirSource() throws {
        let flagText = try configFile(#"{"tls": "yes"}"#)
        let flagError = configurationError(["--config", flagText])
        XCTAssertEqual(flagError?.description, "\"tls\" in the config file \(flagText): --tls is a flag; write true or false")
        let flagVariable = configurationError([], environment: ["EXAMPLE_SEND_TLS": "maybe"])
        XCTAssertEqual(flagVariable?.description, "EXAMPLE_SEND_TLS=maybe: --tls is a flag; set it to 1, 0, yes, no, true or false")
        let optionBoolean = try configFile(#"{"rate": true}"#)
        let optionError = configurationError(["--config", optionBoolean])
        XCTAssertEqual(optionError?.description, "\"rate\" in the config file \(optionBoolean): --rate takes one value; write text or a number")
        let optionList = try configFile(#"{"device": ["hw:1"]}"#)
        let listError = configurationError(["--config", optionList])
        XCTAssertEqual(listError?.description, "\"device\" in the config file \(optionList): --device takes one value; write text or a number")
        let object = try configFile(#"{"device": {"name": "hw:1"}}"#)
        let objectError = configurationError(["--config", object])
        XCTAssertEqual(objectError, .nestedObject(key: "device", path: object))
    }

    func testAConfigFileCanBeReadFromMemory() throws {
        let files = SettingsFiles.memory(["/in/memory.json": Data(#"{"rate": 44100, "device": "hw:1"}"#.utf8)])
        let resolved = try ConfiguredArguments.resolve(["--config", "/in/memory.json"], settings: send, environment: [:], files: files)
        XCTAssertEqual(resolved.arguments, ["--rate=44100", "--device=hw:1", "--config", "/in/memory.json"])
        XCTAssertThrowsError(try ConfiguredArguments.resolve(["--config", "/elsewhere.json"], settings: send, environment: [:], files: files)) { error in
            XCTAssertEqual(error as? ConfigurationError, .fileUnreadable(path: "/elsewhere.json", namedBy: "--config", reason: "no such file or directory"))
        }
    }

    /// Issue 27: an error about a setting is one line, even when its value holds a newline.
    func testAValueWithANewlineIsRefusedInOneLine() throws {
        let files = SettingsFiles.memory(["/in/memory.json": Data(#"{"rate": "4\n4"}"#.utf8)])
        XCTAssertThrowsError(try ConfiguredCommandLine.arguments(
            for: ExampleSend.self, settings: send, userArguments: ["--config", "/in/memory.json"], environment: [:], files: files)
        ) { error in
            XCTAssertEqual("\(error)", #"The value '4\n4' is invalid for '--rate <rate>' (from "rate" in the config file /in/memory.json)"#)
        }
        XCTAssertThrowsError(try ConfiguredCommandLine.arguments(
            for: ExampleSend.self, settings: send, userArguments: [], environment: ["EXAMPLE_SEND_RATE": "fast\r\nrate=1"], files: files)
        ) { error in
            XCTAssertEqual("\(error)", #"The value 'fast\r\nrate=1' is invalid for '--rate <rate>' (from EXAMPLE_SEND_RATE=fast\r\nrate=1)"#)
        }
    }

    func testEveryCommandIsListedWithItsOptions() {
        let commands = CommandSettings.commands(of: ExampleRecv.self)
        XCTAssertEqual(commands.map(\.path), [["example-recv"], ["example-recv", "serve"], ["example-recv", "other"]])
        XCTAssertEqual(commands.first { $0.path.last == "serve" }?.options.map(\.key), ["out", "max-streams"])
        XCTAssertEqual(CommandSettings.commands(of: ExampleSend.self).first?.options.map(\.key), ["rate", "device", "tone-level", "stop-timeout", "tls", "quiet", "vbr", "cvbr", "cbr", "host"])
    }

    func testAMissingUnreadableOrMalformedFileIsSaidSo() throws {
        let missing = "/nonexistent/\(UUID().uuidString).json"
        let missingError = configurationError(["--config", missing])
        XCTAssertEqual(missingError?.description, "cannot read the config file \(missing) (named by --config): no such file or directory")
        let fromVariable = configurationError([], environment: ["EXAMPLE_SEND_CONFIG": missing])
        XCTAssertEqual(fromVariable?.description, "cannot read the config file \(missing) (named by EXAMPLE_SEND_CONFIG): no such file or directory")
        let folder = FileManager.default.temporaryDirectory.path
        let folderError = configurationError(["--config", folder])
        XCTAssertEqual(folderError?.description, "cannot read the config file \(folder) (named by --config): it is a folder, not a file")
        let notJSON = try configFile("rate = 44100\n")
        let notJSONError = configurationError(["--config", notJSON])
        XCTAssertTrue(notJSONError?.description.hasPrefix("the config file \(notJSON) is not JSON") ?? false, "\(String(describing: notJSONError))")
        XCTAssertTrue(notJSONError?.description.hasSuffix(#"write one JSON object whose keys are the long options, like {"rate": 48000, "tls": true}"#) ?? false)
        let notObject = try configFile(#"["rate", 44100]"#)
        let notObjectError = configurationError(["--config", notObject])
        XCTAssertEqual(notObjectError, .fileNotAnObject(path: notObject))
    }

    func testAValueArgumentParserRefusesIsReportedWithItsSource() throws {
        let path = try configFile(#"{"rate": "fast"}"#)
        do {
            _ = try ConfiguredCommandLine.arguments(for: ExampleSend.self, settings: send, userArguments: ["--config", path], environment: [:])
            XCTFail("--rate fast is refused")
        } catch {
            guard case .rejected(let message, let sources) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("--rate"), message)
            XCTAssertEqual(sources, [.file(path: path, key: "rate")])
            XCTAssertTrue(error.description.hasSuffix("(from \"rate\" in the config file \(path))"), error.description)
        }
        do {
            _ = try ConfiguredCommandLine.arguments(
                for: ExampleSend.self, settings: send, userArguments: [], environment: ["EXAMPLE_SEND_RATE": "fast", "EXAMPLE_SEND_DEVICE": "hw:1"])
            XCTFail("--rate fast is refused")
        } catch {
            XCTAssertEqual(error.rejectedSources, [.environment(variable: "EXAMPLE_SEND_RATE", value: "fast")], "only the setting the message is about")
        }
        // The user's own mistakes are left to ArgumentParser to report as always.
        let own = try ConfiguredCommandLine.arguments(
            for: ExampleSend.self, settings: send, userArguments: ["--rate", "fast"], environment: ["EXAMPLE_SEND_DEVICE": "hw:1"])
        XCTAssertEqual(own, ["--device=hw:1", "--rate", "fast"])
        let overridden = try ConfiguredCommandLine.arguments(
            for: ExampleSend.self, settings: send, userArguments: ["--rate", "fast"], environment: ["EXAMPLE_SEND_RATE": "44100"])
        XCTAssertEqual(overridden, ["--rate=44100", "--rate", "fast"], "the user's own value is the wrong one, not the variable's")
    }
}

private extension ConfigurationError {
    var rejectedSources: [SettingSource]? {
        if case .rejected(_, let sources) = self { return sources }
        return nil
    }
}
