import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The commands in docker/compose.yaml, docker/Dockerfile and systemd/*.service are ones the real
/// binaries accept and run with; the Dockerfile builds as docs/FIELD-KIT.md says. (No Docker engine
/// or systemd runs here: each command line is taken out of its file and run directly, with the
/// recordings folder and ports swapped for temporary ones.)
final class DeploymentFilesTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func text(_ path: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
    }

    // MARK: compose.yaml and Dockerfile

    func testComposeReceiverAndSenderRunTogether() throws {
        let commands = try DeploymentFiles.composeCommands(try text("docker/compose.yaml"))
        let receiverCommand = try XCTUnwrap(commands["receiver"])
        let senderCommand = try XCTUnwrap(commands["sender"])
        XCTAssertEqual(receiverCommand.first, "capture-recv")
        XCTAssertEqual(senderCommand.first, "capture-send")
        XCTAssertTrue(receiverCommand.contains("/recordings") && receiverCommand.contains("0.0.0.0:7373"), "\(receiverCommand)")
        XCTAssertTrue(senderCommand.contains("receiver:7373"), "\(senderCommand)")

        let recordings = temporaryFolder()
        let receiver = try DeployedReceiver(arguments: Array(receiverCommand.dropFirst()), recordings: recordings)
        let spool = try Unprivileged.makeDirectory(temporaryFolder())
        let senderArguments = senderCommand.dropFirst().map { $0 == "receiver:7373" ? receiver.address : $0 == "/spool" ? spool.path : $0 } + ["--duration", "1", "--no-pace"]
        let sent = try runSender(senderArguments)
        XCTAssertEqual(sent.status, 0, sent.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.path), "the sender's spool is in the compose volume")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)

        let files = try FileManager.default.contentsOfDirectory(atPath: recordings.path).filter { $0.hasPrefix("compose-tone_") && $0.hasSuffix(".caf") }
        XCTAssertEqual(files.count, 1, "\(files)")
        let stream = try ffprobeStream(recordings.appendingPathComponent(try XCTUnwrap(files.first)).path)
        XCTAssertEqual(stream["channels"] as? Int, 2)
        XCTAssertEqual(stream["sample_rate"] as? String, "48000")
        XCTAssertEqual(Double(stream["duration"] as? String ?? "") ?? -1, 1.0, accuracy: 0.001)
    }

    func testDockerfileDefaultCommandStartsTheReceiverAndStopsCleanly() throws {
        let dockerfile = try text("docker/Dockerfile")
        let command = try XCTUnwrap(DeploymentFiles.dockerfileCommand(dockerfile))
        XCTAssertEqual(command.first, "capture-recv")
        let receiver = try DeployedReceiver(arguments: Array(command.dropFirst()), recordings: temporaryFolder())
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testDockerfileRunsTheDocumentedBuildStepsAndTheRuntimeIsAsDescribed() throws {
        let dockerfile = try text("docker/Dockerfile")
        let buildSteps = DeploymentFiles.dockerfileRunCommands(dockerfile).filter { $0.hasPrefix("scripts/") || $0.hasPrefix("swift build") }
        XCTAssertEqual(buildSteps, ["scripts/install-deps.sh --build-only", "scripts/build-release.sh"])
        let documented = try DeploymentFiles.firstShellBlock(after: "## Build", in: try text("docs/FIELD-KIT.md"))
        XCTAssertEqual(documented, buildSteps, "docs/FIELD-KIT.md and docker/Dockerfile must build the same way")
        let makefile = try text("Makefile")
        XCTAssertTrue(makefile.contains("release: deps\n\t@scripts/build-release.sh"), "make release builds as documented")
        XCTAssertTrue(makefile.contains("deps:\n\t@scripts/install-deps.sh"))

        let stages = dockerfile.split(separator: "\n").filter { $0.hasPrefix("FROM ") }
        XCTAssertEqual(stages, ["FROM swift:6.3-bookworm AS build", "FROM debian:bookworm-slim"])
        for line in ["USER capture", "VOLUME /recordings", "EXPOSE 7373", "STOPSIGNAL SIGTERM"] {
            XCTAssertTrue(dockerfile.contains("\n\(line)\n"), "Dockerfile lacks \(line)")
        }
        XCTAssertTrue(dockerfile.contains("libasound2 libopus0 libsndfile1"))
        XCTAssertTrue(dockerfile.contains(#"CMD ["capture-healthcheck"]"#))
        let ignored = try text(".dockerignore").split(separator: "\n")
        for entry in [".build", ".git", "out"] { XCTAssertTrue(ignored.contains(Substring(entry)), ".dockerignore lacks \(entry)") }
    }

    // MARK: systemd

    func testSystemdReceiverUnitServesTLSFromEtcCaptureIntoItsStateFolder() throws {
        let unit = try SystemdUnit(text: try text("systemd/capture-recv.service"))
        XCTAssertEqual(unit.value("Restart"), "on-failure")
        XCTAssertEqual(unit.value("KillSignal"), "SIGTERM")
        XCTAssertEqual(unit.value("ProtectSystem"), "strict")
        var environment = unit.environment
        environment.merge(try DeploymentFiles.environmentFile(try text("systemd/capture-recv.env.example"))) { _, new in new }
        let command = try unit.execStart(environment: environment)
        XCTAssertEqual(command.first, "/usr/local/bin/capture-recv")
        let recordingsPath = "/var/lib/capture/recordings"
        XCTAssertTrue(command.contains(recordingsPath))
        XCTAssertEqual(unit.value("StateDirectory"), "capture capture/recordings", "systemd must create the recordings folder for User=")
        XCTAssertEqual(Array(command.drop { $0 != "--tls-cert" }.prefix(4)), ["--tls-cert", "/etc/capture/cert.pem", "--tls-key", "/etc/capture/key.pem"])
    }

    func testSystemdSenderFlagsAreAcceptedWithEveryOptionalSetting() throws {
        let unit = try SystemdUnit(text: try text("systemd/capture-send.service"))
        XCTAssertEqual(unit.value("Restart"), "always")
        XCTAssertEqual(unit.value("StartLimitIntervalSec"), "0")
        XCTAssertEqual(unit.value("ProtectSystem"), "strict")
        XCTAssertEqual(unit.value("EnvironmentFile"), "/etc/capture/capture-send.env")
        var environment = unit.environment
        let example = try text("systemd/capture-send.env.example")
        environment.merge(try DeploymentFiles.environmentFile(example)) { _, new in new }
        for name in ["CAPTURE_RECEIVER", "CAPTURE_DEVICE", "CAPTURE_PIN"] { XCTAssertNotNil(environment[name], name) }
        // The optional settings are there, commented out; with them uncommented the line still parses.
        let uncommented = example.replacingOccurrences(of: "#CAPTURE_", with: "CAPTURE_").replacingOccurrences(of: "CAPTURE_TOKEN=\n", with: "CAPTURE_TOKEN=example\n")
        XCTAssertTrue(example.contains("#CAPTURE_TOKEN=") && example.contains("#CAPTURE_SEND_OPTIONS="), example)
        environment.merge(try DeploymentFiles.environmentFile(uncommented)) { _, new in new }
        let command = try unit.execStart(environment: environment, hostName: "field-kit-test")
        XCTAssertEqual(command.first, "/usr/local/bin/capture-send")
        XCTAssertTrue(command.contains("--tls") && command.contains("--pin"), "\(command)")
        XCTAssertTrue(command.contains("--codec"), "CAPTURE_SEND_OPTIONS reaches the command line: \(command)")
        // Every flag and value parses (listing devices needs no device and skips capture).
        let listed = try ChildProcess(Products.send, Array(command.dropFirst()) + ["--list-devices"])
        XCTAssertEqual(listed.wait(seconds: 30), 0, listed.standardError)
    }

    // MARK: The parsers themselves

    func testExecStartParsing() throws {
        let unit = try SystemdUnit(text: """
            [Service]
            Environment=A=one "B=two words"
            ExecStart=-/bin/tool ${A} "${B}" $A --name %H \\
              --flag "quoted value" 100%% --spool %S/tool/spool $EMPTY $B
            """)
        XCTAssertEqual(unit.environment, ["A": "one", "B": "two words"])
        XCTAssertEqual(try unit.execStart(environment: unit.environment.merging(["EMPTY": ""]) { $1 }, hostName: "box"),
                       ["/bin/tool", "one", "two words", "one", "--name", "box", "--flag", "quoted value", "100%", "--spool", "/var/lib/tool/spool", "two", "words"])
        XCTAssertThrowsError(try unit.execStart(environment: [:]))
        let unknownSpecifier = try SystemdUnit(text: "ExecStart=/bin/tool --cache %C/tool")
        XCTAssertThrowsError(try unknownSpecifier.execStart(environment: [:]))
    }

    private func temporaryFolder() -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        return folder
    }
}

/// capture-recv started with a deployment file's arguments, its recordings folder and listening
/// address swapped for a temporary folder and a free loopback port.
final class DeployedReceiver {
    let child: ChildProcess
    let port: Int
    let recordings: URL

    init(arguments: [String], recordings: URL, recordingsPath: String = "/recordings") throws {
        self.recordings = recordings
        var swapped = arguments.map { $0 == recordingsPath ? recordings.path : $0 }
        let listenIndex = try XCTUnwrap(swapped.firstIndex(of: "--listen"), "the receiver's command names no --listen address")
        swapped[listenIndex + 1] = "127.0.0.1:0"
        child = try ChildProcess(Products.recv, swapped)
        let deadline = Date().addingTimeInterval(20)
        var found: Int?
        while found == nil, child.process.isRunning, Date() < deadline {
            if let line = child.standardOutput.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                found = Int(line.split(separator: ":").last ?? "")
            } else {
                usleep(10_000)
            }
        }
        guard let found else {
            child.signal(SIGKILL)
            throw TestFailure("capture-recv \(swapped.joined(separator: " ")) did not start: \(child.standardError)")
        }
        port = found
    }

    var address: String { "127.0.0.1:\(port)" }

    /// SIGTERM, then the exit status.
    func stop() -> Int32 {
        child.signal(SIGTERM)
        return child.wait(seconds: 30)
    }

    deinit {
        if child.process.isRunning { child.signal(SIGKILL) }
    }
}
