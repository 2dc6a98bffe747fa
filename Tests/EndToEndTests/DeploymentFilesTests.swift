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
        let compose = try text("docker/compose.yaml")
        let commands = try DeploymentFiles.composeCommands(compose)
        let environments = DeploymentFiles.composeEnvironment(compose)
        let receiverCommand = try XCTUnwrap(commands["receiver"])
        let senderCommand = try XCTUnwrap(commands["sender"])
        XCTAssertEqual(receiverCommand.first, "capture-recv")
        XCTAssertEqual(senderCommand.first, "capture-send")
        // Configured through the programs' variables, one per option.
        let receiverEnvironment = try XCTUnwrap(environments["receiver"])
        var senderEnvironment = try XCTUnwrap(environments["sender"])
        XCTAssertEqual(receiverEnvironment["CAPTURE_RECV_OUT"], "/recordings")
        XCTAssertEqual(receiverEnvironment["CAPTURE_RECV_LISTEN"], "0.0.0.0:7373")
        XCTAssertEqual(senderEnvironment["CAPTURE_SEND_RECEIVER"], "receiver:7373")
        XCTAssertEqual(senderEnvironment["CAPTURE_SEND_SPOOL"], "/spool")

        let recordings = temporaryFolder()
        let receiver = try DeployedReceiver(arguments: Array(receiverCommand.dropFirst()), environment: receiverEnvironment, recordings: recordings)
        let spool = try Unprivileged.makeDirectory(temporaryFolder())
        senderEnvironment["CAPTURE_SEND_RECEIVER"] = receiver.address
        senderEnvironment["CAPTURE_SEND_SPOOL"] = spool.path
        let sender = try ChildProcess(Products.send, Array(senderCommand.dropFirst()) + ["--duration", "1", "--no-pace"], environment: senderEnvironment)
        let sent = (status: sender.wait(seconds: 120), stderr: sender.standardError)
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

    func testScaleOutComposeRunsTwoReceiversOnOneVolumeBehindItsHAProxyConfiguration() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") else {
            throw XCTSkip("haproxy is not installed (scripts/install-deps.sh installs it)")
        }
        let compose = try text("docker/compose.scale.yaml")
        let commands = try DeploymentFiles.composeCommands(compose)
        let environments = DeploymentFiles.composeEnvironment(compose)
        let volumes = DeploymentFiles.composeVolumes(compose)
        XCTAssertEqual(volumes["receiver-1"], ["recordings:/recordings"])
        XCTAssertEqual(volumes["receiver-2"], volumes["receiver-1"], "both receivers write to one volume")
        XCTAssertEqual(volumes["balancer"], ["./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"])
        var senderEnvironment = try XCTUnwrap(environments["sender"])
        XCTAssertEqual(senderEnvironment["CAPTURE_SEND_RECEIVER"], "balancer:7373", "senders connect to the balancer")
        let configuration = try text("docker/haproxy.cfg")
        let checked = try ToolRunner.run("/usr/sbin/haproxy", ["-c", "-f", Self.root.appendingPathComponent("docker/haproxy.cfg").path])
        XCTAssertTrue(checked.succeeded, "HAProxy accepts the configuration: \(checked.errorText)")

        // The receivers as compose runs them, on one folder; HAProxy with their loopback addresses.
        let recordings = temporaryFolder()
        let receivers = try ["receiver-1", "receiver-2"].map { name in
            let command = try XCTUnwrap(commands[name])
            XCTAssertEqual(command.first, "capture-recv")
            let environment = try XCTUnwrap(environments[name])
            XCTAssertEqual(environment["CAPTURE_RECV_OUT"], "/recordings")
            XCTAssertEqual(environment["CAPTURE_RECV_LISTEN"], "0.0.0.0:7373")
            return try DeployedReceiver(arguments: Array(command.dropFirst()), environment: environment, recordings: recordings)
        }
        let port = try ScaleOutTests.freePort()
        let local = configuration
            .replacingOccurrences(of: "bind :7373", with: "bind 127.0.0.1:\(port)")
            .replacingOccurrences(of: "receiver-1:7373", with: receivers[0].address)
            .replacingOccurrences(of: "receiver-2:7373", with: receivers[1].address)
        XCTAssertNotEqual(local, configuration)
        let balancer = try HAProxyUnderTest(configuration: local, port: port, folder: recordings.deletingLastPathComponent())
        // Let a round of health checks reach both receivers.
        usleep(2_500_000)

        let spool = try Unprivileged.makeDirectory(temporaryFolder())
        senderEnvironment["CAPTURE_SEND_RECEIVER"] = "127.0.0.1:\(port)"
        senderEnvironment["CAPTURE_SEND_SPOOL"] = spool.path
        let senderCommand = try XCTUnwrap(commands["sender"])
        let sender = try ChildProcess(Products.send, Array(senderCommand.dropFirst()) + ["--duration", "1", "--no-pace"], environment: senderEnvironment)
        XCTAssertEqual(sender.wait(seconds: 120), 0, sender.standardError)
        for receiver in receivers {
            XCTAssertFalse(receiver.child.standardError.contains("refused"), "health checks are not refused handshakes: \(receiver.child.standardError)")
            XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        }
        balancer.stop()
        let files = try FileManager.default.contentsOfDirectory(atPath: recordings.path).filter { $0.hasPrefix("scale-tone_") && $0.hasSuffix(".caf") }
        XCTAssertEqual(files.count, 1, "\(files)")
        let stream = try ffprobeStream(recordings.appendingPathComponent(try XCTUnwrap(files.first)).path)
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
        XCTAssertEqual(buildSteps, ["scripts/install-deps.sh --build-only --package", "scripts/build-deb.sh"])
        let documented = try DeploymentFiles.firstShellBlock(after: "## Build", in: try text("docs/FIELD-KIT.md"))
        XCTAssertEqual(documented, buildSteps, "docs/FIELD-KIT.md and docker/Dockerfile must build the same way")
        let makefile = try text("Makefile")
        XCTAssertTrue(makefile.contains("release: deps\n\t@scripts/build-release.sh"), "make release builds as documented")
        XCTAssertTrue(makefile.contains("deb:\n\t@scripts/install-deps.sh --build-only --package\n\t@scripts/build-deb.sh"), "make deb builds as documented")
        XCTAssertTrue(makefile.contains("deps:\n\t@scripts/install-deps.sh"))

        let stages = dockerfile.split(separator: "\n").filter { $0.hasPrefix("FROM ") }
        XCTAssertEqual(stages, ["FROM swift:6.3-bookworm AS build", "FROM debian:bookworm-slim"])
        for line in ["USER capture", "VOLUME /recordings", "EXPOSE 7373", "STOPSIGNAL SIGTERM"] {
            XCTAssertTrue(dockerfile.contains("\n\(line)\n"), "Dockerfile lacks \(line)")
        }
        // The image installs the package the build stage made (one list of installed files: the
        // package's); the C libraries come with it, from its shared-library dependencies.
        XCTAssertTrue(dockerfile.contains("\nCOPY --from=build /src/dist/ /tmp/dist/\n"), "the runtime stage takes the build stage's package")
        XCTAssertTrue(dockerfile.contains("apt-get install -y --no-install-recommends /tmp/dist/capture-streamer_*.deb"), "the runtime stage installs the package")
        XCTAssertFalse(dockerfile.contains(".build-static/release/"), "the image copies no executable past the package")
        XCTAssertTrue(try text("debian/control").contains("Depends: ${shlibs:Depends}, ${misc:Depends}"))
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
        XCTAssertEqual(unit.value("EnvironmentFile"), "-/etc/capture/capture-recv.env")
        var environment = try unit.environment()
        let example = try text("systemd/capture-recv.env.example")
        environment.merge(try DeploymentFiles.environmentFile(example)) { _, new in new }
        XCTAssertEqual(try unit.execStart(environment: environment), ["/usr/bin/capture-recv"], "every setting is a variable")
        XCTAssertEqual(environment["CAPTURE_RECV_OUT"], "/var/lib/capture/recordings")
        XCTAssertEqual(unit.value("StateDirectory"), "capture capture/recordings", "systemd must create the recordings folder for User=")
        XCTAssertEqual(environment["CAPTURE_RECV_TLS_CERT"], "/etc/capture/cert.pem")
        XCTAssertEqual(environment["CAPTURE_RECV_TLS_KEY"], "/etc/capture/key.pem")
        // The optional settings are there, commented out, and are settings capture-recv knows: with
        // them uncommented, a mistyped name or a wrong value would stop it with one line.
        for name in ["#CAPTURE_RECV_TOKEN_FILE=", "#CAPTURE_RECV_METRICS="] { XCTAssertTrue(example.contains(name), name) }
        let uncommented = try DeploymentFiles.environmentFile(example.replacingOccurrences(of: "#CAPTURE_RECV_CONFIG=", with: "#").replacingOccurrences(of: "#CAPTURE_", with: "CAPTURE_"))
        let tokens = try Unprivileged.makeDirectory(temporaryFolder()).appendingPathComponent("tokens")
        XCTAssertTrue(FileManager.default.createFile(atPath: tokens.path, contents: Data("a-token\n".utf8)))
        Unprivileged.handOver(tokens.path)
        var checked = environment.merging(uncommented) { _, new in new }
        checked["CAPTURE_RECV_TOKEN_FILE"] = tokens.path
        checked["CAPTURE_RECV_METRICS"] = "127.0.0.1:0"
        checked["CAPTURE_RECV_TLS_CERT"] = nil
        checked["CAPTURE_RECV_TLS_KEY"] = nil
        let receiver = try DeployedReceiver(arguments: [], environment: checked, recordings: temporaryFolder(), recordingsPath: "/var/lib/capture/recordings")
        XCTAssertTrue(waitFor { receiver.child.standardOutput.contains("metrics on 127.0.0.1:") }, receiver.child.standardOutput)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testSystemdSenderSettingsAreAcceptedWithEveryOptionalSetting() throws {
        let unit = try SystemdUnit(text: try text("systemd/capture-send.service"))
        XCTAssertEqual(unit.value("Restart"), "always")
        XCTAssertEqual(unit.value("StartLimitIntervalSec"), "0")
        XCTAssertEqual(unit.value("ProtectSystem"), "strict")
        XCTAssertEqual(unit.value("EnvironmentFile"), "/etc/capture/capture-send.env")
        var environment = try unit.environment(hostName: "field-kit-test")
        let example = try text("systemd/capture-send.env.example")
        environment.merge(try DeploymentFiles.environmentFile(example)) { _, new in new }
        XCTAssertEqual(try unit.execStart(environment: environment), ["/usr/bin/capture-send"], "every setting is a variable")
        for name in ["CAPTURE_SEND_RECEIVER", "CAPTURE_SEND_DEVICE", "CAPTURE_SEND_PIN"] { XCTAssertNotNil(environment[name], name) }
        XCTAssertEqual(environment["CAPTURE_SEND_TLS"], "yes")
        XCTAssertEqual(environment["CAPTURE_SEND_STREAM_NAME"], "field-kit-test")
        XCTAssertEqual(environment["CAPTURE_SEND_SPOOL"], "/var/lib/capture-send/spool")
        // The optional settings are there, commented out; uncommented, every one is a setting
        // capture-send takes (an unknown name or a bad value would stop it with one line).
        for name in ["#CAPTURE_TOKEN=", "#CAPTURE_SEND_CODEC=", "#CAPTURE_SEND_BITRATE="] { XCTAssertTrue(example.contains(name), name) }
        let uncommented = example.replacingOccurrences(of: "#CAPTURE_SEND_CONFIG=", with: "#").replacingOccurrences(of: "#CAPTURE_", with: "CAPTURE_")
            .replacingOccurrences(of: "CAPTURE_TOKEN=\n", with: "CAPTURE_TOKEN=example\n")
        environment.merge(try DeploymentFiles.environmentFile(uncommented)) { _, new in new }
        XCTAssertEqual(environment["CAPTURE_SEND_CODEC"], "opus")
        // Every setting parses and validates (listing devices needs no device and skips capture).
        let listed = try ChildProcess(Products.send, ["--list-devices"], environment: environment)
        XCTAssertEqual(listed.wait(seconds: 30), 0, listed.standardError)
        // A mistyped setting stops the sender with one line naming it.
        let mistyped = try ChildProcess(Products.send, ["--list-devices"], environment: environment.merging(["CAPTURE_SEND_BITRAT": "96k"]) { $1 })
        XCTAssertNotEqual(mistyped.wait(seconds: 30), 0)
        XCTAssertTrue(mistyped.standardError.contains("CAPTURE_SEND_BITRAT is not a setting of capture-send"), mistyped.standardError)
    }

    // MARK: The parsers themselves

    func testExecStartParsing() throws {
        let unit = try SystemdUnit(text: """
            [Service]
            Environment=A=one "B=two words"
            ExecStart=-/bin/tool ${A} "${B}" $A --name %H \\
              --flag "quoted value" 100%% --spool %S/tool/spool $EMPTY $B
            """)
        XCTAssertEqual(try unit.environment(), ["A": "one", "B": "two words"])
        XCTAssertEqual(try unit.execStart(environment: try unit.environment().merging(["EMPTY": ""]) { $1 }, hostName: "box"),
                       ["/bin/tool", "one", "two words", "one", "--name", "box", "--flag", "quoted value", "100%", "--spool", "/var/lib/tool/spool", "two", "words"])
        XCTAssertThrowsError(try unit.execStart(environment: [:]))
        let unknownSpecifier = try SystemdUnit(text: "ExecStart=/bin/tool --cache %C/tool")
        XCTAssertThrowsError(try unknownSpecifier.execStart(environment: [:]))
        let specifiers = try SystemdUnit(text: "Environment=NAME=%H SPOOL=%S/tool/spool")
        XCTAssertEqual(try specifiers.environment(hostName: "box"), ["NAME": "box", "SPOOL": "/var/lib/tool/spool"], "systemd expands specifiers in Environment= too")
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

    /// The address goes in `--listen` when the arguments name one, else in `CAPTURE_RECV_LISTEN`.
    init(arguments: [String], environment: [String: String] = [:], recordings: URL, recordingsPath: String = "/recordings") throws {
        self.recordings = recordings
        var swapped = arguments.map { $0 == recordingsPath ? recordings.path : $0 }
        var variables = environment.mapValues { $0 == recordingsPath ? recordings.path : $0 }
        if let listenIndex = swapped.firstIndex(of: "--listen") {
            swapped[listenIndex + 1] = "127.0.0.1:0"
        } else if variables["CAPTURE_RECV_LISTEN"] != nil {
            variables["CAPTURE_RECV_LISTEN"] = "127.0.0.1:0"
        } else {
            throw TestFailure("the receiver's command names no --listen address and its environment no CAPTURE_RECV_LISTEN")
        }
        child = try ChildProcess(Products.recv, swapped, environment: variables)
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
