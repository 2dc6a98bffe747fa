import Foundation
import CaptureCLISupport
import FuzzChecks
import SettingsChecks
import XCTest

/// The `settings` fuzz target's seeds (Fuzz/corpus/settings) and past findings
/// (Fuzz/regressions/settings) through its checks, in every `make test`, and what its checks make
/// of the reproduced cases of issue 27, item 10.
final class SettingsFuzzCorpusTests: XCTestCase {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    func testSeedsAndPastFindingsHoldEveryCheck() throws {
        let seeds = FuzzReplay.inputs([Self.fuzz.appendingPathComponent("corpus/settings").path])
        XCTAssertGreaterThanOrEqual(seeds.count, 10)
        let found = FuzzReplay.inputs([Self.fuzz.appendingPathComponent("regressions/settings").path])
        var accepted = 0
        for file in seeds + found {
            let input = SettingsChecks.Input(decoding: try Data(contentsOf: URL(fileURLWithPath: file)))
            XCTAssertEqual(SettingsChecks.Input(decoding: input.encoded), input, file)
            // Both layers for every seed and finding, whichever the fuzz target samples.
            SettingsChecks.checkSettingsLayer(input)
            if case .accepted = SettingsChecks.outcome(of: input) { accepted += 1 }
        }
        XCTAssertGreaterThanOrEqual(accepted, 5, "the seeds reach the commands' conversions")
    }

    /// The fuzz target sends one input in 64 through ArgumentParser's whole parse, always the same
    /// ones: over 64,000 different inputs, close to 1,000 of them, and the same ones twice.
    func testOneInputIn64TakesTheWholeParse() {
        var generator = SystemRandomNumberGenerator()
        let inputs = (0..<64_000).map { index in Data(withUnsafeBytes(of: UInt64(index).bigEndian, Array.init) + (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
        let taken = inputs.filter(SettingsChecks.takesFullParse)
        XCTAssertEqual(Double(taken.count), 1_000, accuracy: 150)
        XCTAssertEqual(inputs.filter(SettingsChecks.takesFullParse), taken)
    }

    /// The settings layer alone refuses what the whole parse refuses, for the reproduced cases: a
    /// value outside its range read by the option's own reader, from a variable, a file or an argument.
    func testTheSettingsLayerReadsTheOptionsAsTheirTransformsDo() {
        let rate = NumericOption("rate", .integer, 8_000...192_000, unit: "Hz")
        XCTAssertNil(rate.value("1e308"))
        XCTAssertEqual(rate.value("4.8e4"), 48_000)
        // The layer runs these without tripping any of its invariants.
        for input in [
            SettingsChecks.Input(program: .send, configFile: nil, environment: ["CAPTURE_SEND_SPOOL_MAX": "9999999999G"], arguments: ["127.0.0.1:7373"]),
            SettingsChecks.Input(program: .send, configFile: nil, environment: [:], arguments: ["127.0.0.1:7373", "--duration", "1e300", "--rate=4.8e4"]),
            SettingsChecks.Input(program: .receive, configFile: Data(#"{"out": "/srv", "resume-window": 1e308, "sync-ms": 10000}"#.utf8), environment: [:], arguments: []),
            SettingsChecks.Input(program: .spool, configFile: nil, environment: [:], arguments: ["deliver", "--timeout", "604800"]),
        ] {
            SettingsChecks.checkSettingsLayer(input)
        }
    }

    func testTheReproducedCasesAreRefusedWithOneLine() {
        let spoolMax = SettingsChecks.Input(
            program: .send, configFile: nil, environment: ["CAPTURE_SEND_SPOOL_MAX": "9999999999G"], arguments: ["127.0.0.1:7373"])
        XCTAssertEqual(
            SettingsChecks.outcome(of: spoolMax),
            .configurationError("The value '9999999999G' is invalid for '--spool-max <BYTES>': use 1M to 16T bytes (from CAPTURE_SEND_SPOOL_MAX=9999999999G)"))
        let duration = SettingsChecks.Input(program: .send, configFile: nil, environment: [:], arguments: ["127.0.0.1:7373", "--duration", "1e300"])
        XCTAssertEqual(
            SettingsChecks.outcome(of: duration),
            .refused(status: 64, message: "The value '1e300' is invalid for '--duration <SECONDS>': use 0.001 to 31622400 seconds (366 days)"))
        let resumeWindow = SettingsChecks.Input(
            program: .receive, configFile: Data(#"{"out": "/srv/recordings", "resume-window": 1e308}"#.utf8), environment: [:], arguments: [])
        XCTAssertEqual(
            SettingsChecks.outcome(of: resumeWindow),
            .configurationError(
                "The value '1e+308' is invalid for '--resume-window <SECONDS>': use 0 (finalize at once) to 2592000 seconds (30 days) (from \"resume-window\" in the config file \(SettingsChecks.configPath))"))
    }

    /// The fuzzer's first finding: ArgumentParser lists six or more choices on a line each, so a
    /// wrong --log-level from a setting was an error of nine lines with its source after the last.
    func testAWrongLogLevelIsOneLine() throws {
        let input = SettingsChecks.Input(decoding: try Data(contentsOf: Self.fuzz.appendingPathComponent("regressions/settings/log-level-choices-on-many-lines")))
        XCTAssertEqual(input.environment, ["CAPTURE_SEND_LOG_LEVEL": "9999999998G"])
        XCTAssertEqual(
            SettingsChecks.outcome(of: input),
            .configurationError("The value '9999999998G' is invalid for '--log-level <LEVEL>': use trace, debug, info, notice, warning, error or critical (from CAPTURE_SEND_LOG_LEVEL=9999999998G)"))
        let receiver = SettingsChecks.Input(program: .receive, configFile: nil, environment: [:], arguments: ["--out", "/srv", "--log-level", "loud"])
        XCTAssertEqual(
            SettingsChecks.outcome(of: receiver),
            .refused(status: 64, message: "The value 'loud' is invalid for '--log-level <LEVEL>': use trace, debug, info, notice, warning, error or critical"))
    }

    /// The fuzzer's second finding: ArgumentParser quotes a refused value as it is, so a carriage
    /// return or a newline in an argument split or garbled the `Error:` line.
    func testAControlCharacterInARefusedArgumentIsWrittenAsAnEscape() throws {
        let input = SettingsChecks.Input(decoding: try Data(contentsOf: Self.fuzz.appendingPathComponent("regressions/settings/carriage-return-in-an-argument")))
        XCTAssertTrue(input.arguments.contains { $0.contains("\r") }, "\(input.arguments)")
        guard case .refused(64, let message) = SettingsChecks.outcome(of: input) else {
            return XCTFail("\(SettingsChecks.outcome(of: input))")
        }
        XCTAssertFalse(message.contains(where: \.isNewline), message)
        XCTAssertTrue(message.contains("\\r"), message)
        let crlf = SettingsChecks.Input(program: .send, configFile: nil, environment: [:], arguments: ["127.0.0.1:7373", "--rate", "48000\r"])
        XCTAssertEqual(
            SettingsChecks.outcome(of: crlf),
            .refused(status: 64, message: #"The value '48000\r' is invalid for '--rate <rate>': use a whole number from 8000 to 192000 Hz"#))
    }

    func testAcceptedSettingsReachTheConversions() {
        let largest = SettingsChecks.Input(
            program: .receive, configFile: Data(#"{"out": "/srv/recordings", "resume-window": 2592000}"#.utf8), environment: [:], arguments: [])
        guard case .accepted(let command, let conversions) = SettingsChecks.outcome(of: largest) else {
            return XCTFail("the largest resume window was refused: \(SettingsChecks.outcome(of: largest))")
        }
        XCTAssertEqual(command, "serve")
        XCTAssertEqual(conversions["resume-window-s"], "2592000")
    }
}
