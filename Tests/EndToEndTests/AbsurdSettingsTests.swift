import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, item 10: an absurd number in a setting is one `Error:` line naming the option, its
/// range and where the value came from, and exit status 64, from the command line, a variable or
/// the config file; never a crash (`--spool-max 9999999999G`, `--duration 1e300` were SIGILL), and
/// never a receiver that starts and dies at its first connection (`--resume-window 1e308`). The
/// table test over every numeric option runs in process (SettingsTests.NumericRangeTableTests).
final class AbsurdSettingsTests: XCTestCase {
    private var workDirectory: URL!

    override func setUpWithError() throws {
        workDirectory = try Unprivileged.makeDirectory(
            FileManager.default.temporaryDirectory.appendingPathComponent("absurd-settings-\(UUID().uuidString)"))
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// A config file the executables (running as the unprivileged user) can read.
    private func configFile(_ json: String, name: String) throws -> String {
        let path = workDirectory.appendingPathComponent(name).path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        Unprivileged.handOver(path)
        return path
    }

    /// Runs a command that must be refused: its exit status, its `Error:` lines, and all it wrote.
    private func refused(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, lines: [String], standardError: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = child.wait(seconds: 30)
        let lines = child.standardError.split(separator: "\n").filter { $0.hasPrefix("Error: ") }.map(String.init)
        return (status, lines, child.standardError)
    }

    /// One reproduced case: the option, the absurd value as written on the command line and in a
    /// variable, as written in the config file (a JSON number where it is one), the value name the
    /// help gives it, and the refusal after it.
    private struct AbsurdCase {
        let executable: String
        let program: String
        let arguments: [String]
        let option: String
        let text: String
        let json: String
        let valueName: String
        let refusal: String
    }

    func testTheReproducedCasesAreOneLineAndExit64FromTheCommandLineAVariableAndTheConfigFile() throws {
        let recordings = workDirectory.appendingPathComponent("recordings").path
        let cases = [
            AbsurdCase(
                executable: Products.send, program: "CAPTURE_SEND", arguments: ["127.0.0.1:9", "--source", "tone", "--no-pace"],
                option: "spool-max", text: "9999999999G", json: #""9999999999G""#, valueName: "BYTES", refusal: "use 1M to 16T bytes"),
            AbsurdCase(
                executable: Products.send, program: "CAPTURE_SEND", arguments: ["127.0.0.1:9", "--source", "tone", "--no-pace"],
                option: "duration", text: "1e300", json: "1e300", valueName: "SECONDS", refusal: "use 0.001 to 31622400 seconds (366 days)"),
            AbsurdCase(
                executable: Products.recv, program: "CAPTURE_RECV", arguments: ["--out", recordings, "--listen", "127.0.0.1:0"],
                option: "resume-window", text: "1e308", json: "1e308", valueName: "SECONDS",
                refusal: "use 0 (finalize at once) to 2592000 seconds (30 days)"),
        ]
        for absurd in cases {
            let invalid = "is invalid for '--\(absurd.option) <\(absurd.valueName)>': \(absurd.refusal)"

            let commandLine = try refused(absurd.executable, absurd.arguments + ["--\(absurd.option)", absurd.text])
            XCTAssertEqual(commandLine.status, 64, "--\(absurd.option) \(absurd.text): \(commandLine.standardError)")
            XCTAssertEqual(commandLine.lines, ["Error: The value '\(absurd.text)' \(invalid)"], commandLine.standardError)

            let variable = "\(absurd.program)_\(absurd.option.uppercased().replacingOccurrences(of: "-", with: "_"))"
            let environment = try refused(absurd.executable, absurd.arguments, environment: [variable: absurd.text])
            XCTAssertEqual(environment.status, 64, "\(variable)=\(absurd.text): \(environment.standardError)")
            XCTAssertEqual(environment.lines, ["Error: The value '\(absurd.text)' \(invalid) (from \(variable)=\(absurd.text))"], environment.standardError)

            let path = try configFile(#"{"\#(absurd.option)": \#(absurd.json)}"#, name: "\(absurd.option).json")
            let file = try refused(absurd.executable, absurd.arguments + ["--config", path])
            XCTAssertEqual(file.status, 64, "\(absurd.option) in \(path): \(file.standardError)")
            XCTAssertEqual(file.lines.count, 1, file.standardError)
            let line = file.lines.first ?? ""
            // The file's number as swift-configuration reads it back (1e300 is 1e+300).
            XCTAssertTrue(line.hasPrefix("Error: The value '"), line)
            XCTAssertTrue(line.hasSuffix("' \(invalid) (from \"\(absurd.option)\" in the config file \(path))"), line)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: recordings), "a refused receiver makes no output folder")
    }

    /// A value ending in a carriage return (a script saved with CRLF line ends) is refused in one
    /// line that shows it, instead of a line the terminal garbles.
    func testAValueWithACarriageReturnIsShownInOneLine() throws {
        let result = try refused(Products.send, ["127.0.0.1:9", "--source", "tone", "--rate", "48000\r"])
        XCTAssertEqual(result.status, 64, result.standardError)
        XCTAssertEqual(result.lines, [#"Error: The value '48000\r' is invalid for '--rate <rate>': use a whole number from 8000 to 192000 Hz"#], result.standardError)
        XCTAssertFalse(result.standardError.contains("\r"), result.standardError)
        let receiver = try refused(Products.recv, ["--out", workDirectory.path, "--resume-window", "60\n"])
        XCTAssertEqual(receiver.status, 64, receiver.standardError)
        XCTAssertEqual(
            receiver.lines,
            [#"Error: The value '60\n' is invalid for '--resume-window <SECONDS>': use 0 (finalize at once) to 2592000 seconds (30 days)"#],
            receiver.standardError)
    }

    /// The largest resume window allowed starts a receiver that records a real stream, keeps an
    /// interrupted one waiting for its sender, and stops cleanly.
    func testTheLargestResumeWindowStartsAReceiverThatSurvivesRealStreams() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--resume-window", "2592000"])
        let whole = try runSender([receiver.address, "--source", "tone", "--rate", "16000", "--duration", "0.5", "--no-pace",
                                   "--stream-name", "whole", "--no-spool", "--quiet"])
        XCTAssertEqual(whole.status, 0, whole.stderr)
        let file = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("whole_") })
        XCTAssertEqual(try SndFileReader.read(path: file.path).frames, 8_000)
        XCTAssertTrue(receiver.child.process.isRunning, receiver.child.standardError)

        // A paced stream whose sender is killed: its file waits for the sender (the resume window).
        let interrupted = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--rate", "16000", "--stream-name", "cut",
                                                           "--no-spool", "--quiet"])
        XCTAssertTrue(waitFor(30) { receiver.child.standardError.contains("/cut_") }, receiver.child.standardError)
        interrupted.signal(SIGKILL)
        _ = interrupted.wait(seconds: 10)
        XCTAssertTrue(waitFor(30) { receiver.child.standardError.contains("the file stays open for the sender to resume") },
                      receiver.child.standardError)
        XCTAssertTrue(receiver.child.standardError.contains("resume-window-s=2592000"), receiver.child.standardError)
        XCTAssertTrue(receiver.child.process.isRunning, receiver.child.standardError)

        let again = try runSender([receiver.address, "--source", "tone", "--rate", "16000", "--duration", "0.25", "--no-pace",
                                   "--stream-name", "again", "--no-spool", "--quiet"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}
