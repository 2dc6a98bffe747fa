import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Every option of both executables from environment variables (`CAPTURE_SEND_…`,
/// `CAPTURE_RECV_…`) and a config file (`--config FILE`): command line over environment over file
/// over defaults, and one clear line when a setting cannot be used (issue 14, part 6).
final class ConfigurationTests: XCTestCase {
    private var workDirectory: URL!

    override func setUpWithError() throws {
        workDirectory = try Unprivileged.makeDirectory(
            FileManager.default.temporaryDirectory.appendingPathComponent("configuration-\(UUID().uuidString)"))
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// A config file the executables (running as the unprivileged user) can read.
    private func configFile(_ json: String, name: String = "settings.json") throws -> String {
        let path = workDirectory.appendingPathComponent(name).path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        Unprivileged.handOver(path)
        return path
    }

    /// A capture-recv configured through the environment only; returns it and its port.
    private func receiverFromEnvironment(_ environment: [String: String]) throws -> (child: ChildProcess, port: Int) {
        let child = try ChildProcess(Products.recv, [], environment: environment)
        var port: Int?
        _ = waitFor(20) {
            if let line = child.standardOutput.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                port = Int(line.split(separator: ":").last ?? "")
            }
            return port != nil || !child.process.isRunning
        }
        guard let port else {
            child.signal(SIGKILL)
            throw TestFailure("capture-recv configured through the environment did not start (status \(child.wait(seconds: 5))): \(child.standardError)")
        }
        return (child, port)
    }

    /// The one `Error: ` line of a run that failed, and its exit status.
    private func failure(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, line: String, standardError: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = child.wait(seconds: 30)
        let lines = child.standardError.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
        XCTAssertEqual(lines.count, 1, "one line says why: \(child.standardError)")
        return (status, lines.first.map(String.init) ?? "", child.standardError)
    }

    func testAReceiverFromTheEnvironmentAndASenderFromFileEnvironmentAndCommandLine() throws {
        let recordings = workDirectory.appendingPathComponent("recordings")
        let receiver = try receiverFromEnvironment([
            "CAPTURE_RECV_OUT": recordings.path, "CAPTURE_RECV_LISTEN": "127.0.0.1:0", "CAPTURE_RECV_LOG_FORMAT": "json",
        ])
        // The file sets the receiver, the source and the format; the environment overrides the
        // file's rate and stream name; the command line overrides both for the stream name.
        let settings = try configFile("""
            {"receiver": "127.0.0.1:\(receiver.port)", "source": "tone", "rate": 44100, "channels": 1,
             "format": "s16", "duration": 0.5, "no-pace": true, "stream-name": "from-file", "quiet": true}
            """)
        let sender = try ChildProcess(
            Products.send, ["--config", settings, "--stream-name", "from-command-line"],
            environment: ["CAPTURE_SEND_RATE": "32000", "CAPTURE_SEND_STREAM_NAME": "from-environment"])
        XCTAssertEqual(sender.wait(seconds: 120), 0, sender.standardError)

        let names = (try? FileManager.default.contentsOfDirectory(atPath: recordings.path)) ?? []
        let cafs = names.filter { $0.hasSuffix(".caf") }
        XCTAssertEqual(cafs.count, 1, "\(names)")
        let name = try XCTUnwrap(cafs.first)
        XCTAssertTrue(name.hasPrefix("from-command-line_"), "the command line wins: \(name)")
        let stream = try ffprobeStream(recordings.appendingPathComponent(name).path)
        XCTAssertEqual(stream["sample_rate"] as? String, "32000", "the environment wins over the file")
        XCTAssertEqual(stream["channels"] as? Int, 1, "the file wins over the default (2)")
        XCTAssertEqual(stream["codec_name"] as? String, "pcm_s16le")
        XCTAssertEqual(Int(stream["duration_ts"] as? Int ?? -1), 16_000, "--duration 0.5 from the file")

        receiver.child.signal(SIGTERM)
        XCTAssertEqual(receiver.child.wait(seconds: 30), 0)
        XCTAssertTrue(receiver.child.standardError.split(separator: "\n").allSatisfy { $0.hasPrefix("{") }, "CAPTURE_RECV_LOG_FORMAT=json: \(receiver.child.standardError)")
    }

    func testTheConfigFileCanBeNamedInTheEnvironment() throws {
        let recordings = workDirectory.appendingPathComponent("recordings")
        let receiverSettings = try configFile(#"{"out": "\#(recordings.path)", "listen": "127.0.0.1:0"}"#, name: "recv.json")
        let receiver = try receiverFromEnvironment(["CAPTURE_RECV_CONFIG": receiverSettings])
        let result = try ChildProcess(
            Products.send, ["127.0.0.1:\(receiver.port)", "--source", "tone", "--duration", "0.2", "--no-pace", "--stream-name", "named"],
            environment: ["CAPTURE_SEND_CONFIG": try configFile(#"{"receiver": "127.0.0.1:1", "rate": 16000}"#, name: "send.json")])
        XCTAssertEqual(result.wait(seconds: 120), 0, "the receiver on the command line wins over the file's: \(result.standardError)")
        let name = try XCTUnwrap(((try? FileManager.default.contentsOfDirectory(atPath: recordings.path)) ?? []).first { $0.hasSuffix(".caf") })
        XCTAssertEqual(try ffprobeStream(recordings.appendingPathComponent(name).path)["sample_rate"] as? String, "16000")
        receiver.child.signal(SIGTERM)
        XCTAssertEqual(receiver.child.wait(seconds: 30), 0)
    }

    func testSettingsThatCannotBeUsedAreOneLineThatNamesThem() throws {
        let unknownVariable = try failure(Products.send, ["127.0.0.1:7373", "--source", "tone"], environment: ["CAPTURE_SEND_SPOOL_MAXX": "1G"])
        XCTAssertEqual(unknownVariable.line, "Error: CAPTURE_SEND_SPOOL_MAXX is not a setting of capture-send; settings are the long options of `capture-send --help`")
        XCTAssertEqual(unknownVariable.status, 64)

        let unknownKey = try configFile(#"{"outt": "/srv/recordings"}"#)
        let key = try failure(Products.recv, ["--config", unknownKey])
        XCTAssertEqual(key.line, "Error: \"outt\" in the config file \(unknownKey) is not a setting of capture-recv; settings are the long options of `capture-recv --help`, written without the dashes")
        XCTAssertEqual(key.status, 64)

        let missing = "/nonexistent/\(UUID().uuidString).json"
        XCTAssertEqual(
            try failure(Products.send, ["--config", missing]).line,
            "Error: cannot read the config file \(missing) (named by --config): no such file or directory")
        XCTAssertEqual(
            try failure(Products.recv, [], environment: ["CAPTURE_RECV_CONFIG": missing]).line,
            "Error: cannot read the config file \(missing) (named by CAPTURE_RECV_CONFIG): no such file or directory")

        let notJSON = try configFile("out = /srv/recordings\n", name: "recv.conf")
        let notJSONLine = try failure(Products.recv, ["--config", notJSON]).line
        XCTAssertTrue(notJSONLine.hasPrefix("Error: the config file \(notJSON) is not JSON"), notJSONLine)
        XCTAssertTrue(notJSONLine.hasSuffix(#"write one JSON object whose keys are the long options, like {"rate": 48000, "tls": true}"#), notJSONLine)

        XCTAssertEqual(
            try failure(Products.send, ["127.0.0.1:7373"], environment: ["CAPTURE_SEND_TLS": "maybe"]).line,
            "Error: CAPTURE_SEND_TLS=maybe: --tls is a flag; set it to 1, 0, yes, no, true or false")
        let flagText = try configFile(#"{"tls": "yes"}"#, name: "flag.json")
        XCTAssertEqual(
            try failure(Products.send, ["127.0.0.1:7373", "--config", flagText]).line,
            "Error: \"tls\" in the config file \(flagText): --tls is a flag; write true or false")

        // A value ArgumentParser refuses says where it came from.
        let rate = try failure(Products.send, ["127.0.0.1:7373", "--source", "tone"], environment: ["CAPTURE_SEND_RATE": "fast"])
        XCTAssertTrue(rate.line.contains("--rate"), rate.line)
        XCTAssertTrue(rate.line.hasSuffix("(from CAPTURE_SEND_RATE=fast)"), rate.line)
        let range = try configFile(#"{"max-streams": 0}"#, name: "range.json")
        let rangeLine = try failure(Products.recv, ["--out", workDirectory.path, "--config", range]).line
        XCTAssertEqual(rangeLine, "Error: The value '0' is invalid for '--max-streams <N>': use a whole number from 1 to 1000000 (from \"max-streams\" in the config file \(range))")
    }

    func testOtherSubcommandsAndHelpIgnoreTheSettings() throws {
        let certificates = workDirectory.appendingPathComponent("certificates")
        let genCert = try ChildProcess(Products.recv, ["gen-cert", "--out", certificates.path], environment: ["CAPTURE_RECV_OUTT": "broken"])
        XCTAssertEqual(genCert.wait(seconds: 60), 0, genCert.standardError)
        XCTAssertTrue(FileManager.default.fileExists(atPath: certificates.appendingPathComponent("cert.pem").path))

        for executable in [Products.send, Products.recv] {
            let help = try ChildProcess(executable, ["--help"], environment: ["CAPTURE_SEND_BROKEN": "1", "CAPTURE_RECV_BROKEN": "1"])
            XCTAssertEqual(help.wait(seconds: 30), 0, help.standardError)
            let text = help.standardOutput.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            let prefix = executable == Products.send ? "CAPTURE_SEND" : "CAPTURE_RECV"
            XCTAssertTrue(text.contains("--config <FILE>"), text)
            XCTAssertTrue(text.contains("(default: $\(prefix)_CONFIG, else none)"), text)
            XCTAssertTrue(text.contains("\(prefix)_<OPTION>"), text)
            XCTAssertTrue(text.contains("The command line wins over the environment, the environment over the file, the file over the defaults."), text)
        }
    }
}
