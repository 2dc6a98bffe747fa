import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The field kit as docs/FIELD-KIT.md installs it: the systemd units run under the environment
/// systemd gives them (not the test's), gen-cert's key is readable by the service user, the Docker
/// health check follows the receiver's --listen and is not logged as a refused handshake, the build
/// stage installs only what the build needs, the sender's spool survives a recreated container, and
/// every stop timeout leaves the receiver its shutdown deadline.
final class FieldKitDeploymentTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func text(_ path: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
    }

    // MARK: systemd units under their own environment

    func testSystemdUnitsRecordAStreamUnderTheEnvironmentSystemdGivesThem() throws {
        let root = temporaryFolder()
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        chmod(root.path, 0o755)
        // /etc/capture as docs/FIELD-KIT.md makes it: root-owned, readable by the service's group,
        // with the key and certificate gen-cert gives to the service user.
        let etcCapture = root.appendingPathComponent("etc-capture")
        let generated = try runAsTest(Products.recv, ["gen-cert", "--out", etcCapture.path, "--host", "127.0.0.1"] + ownerArguments())
        XCTAssertEqual(generated.exitStatus, 0, generated.errorText)
        chmod(etcCapture.path, 0o750)
        if Unprivileged.isActive { chown(etcCapture.path, 0, Unprivileged.groupID) }
        let pin = try XCTUnwrap(generated.outputText.split(separator: "\n").first { $0.hasPrefix("sha256 fingerprint: ") }?.split(separator: " ").last.map(String.init))

        let receiverUnit = try SystemdUnit(text: try text("systemd/capture-recv.service"))
        let receiver = try SystemdServiceSandbox(
            unit: receiverUnit, environmentFile: try text("systemd/capture-recv.env.example"),
            overrides: ["CAPTURE_RECV_LISTEN": "127.0.0.1:0"], hostName: "server", root: root, etcCapture: etcCapture
        )
        let port = try receiver.announcedPort()

        let senderUnit = try SystemdUnit(text: try text("systemd/capture-send.service"))
        let sender = try SystemdServiceSandbox(
            unit: senderUnit, environmentFile: try text("systemd/capture-send.env.example"),
            // The tone in place of the ALSA device (no sound card here), one second of it.
            overrides: ["CAPTURE_SEND_RECEIVER": "127.0.0.1:\(port)", "CAPTURE_SEND_PIN": pin, "CAPTURE_SEND_SOURCE": "tone"],
            hostName: "field-kit-test", root: root, etcCapture: etcCapture
        ) { command in
            command + ["--duration", "1", "--no-pace"]
        }
        let sent = sender.wait(seconds: 120)
        XCTAssertEqual(sent, 0, "the sender unit's command line failed under the unit's environment: \(sender.standardError)")

        // The spool is in the sender's state folder, the only place the unit lets it write.
        let spoolFolder = try XCTUnwrap(sender.stateFolders["/var/lib/capture-send"]).appendingPathComponent("spool")
        XCTAssertTrue(FileManager.default.fileExists(atPath: spoolFolder.path), "no spool in /var/lib/capture-send: \(sender.commandLine)")

        receiver.signal(SIGTERM)
        XCTAssertEqual(receiver.wait(seconds: 30), 0, receiver.standardError)
        let recordings = try XCTUnwrap(receiver.stateFolders["/var/lib/capture/recordings"])
        let files = try FileManager.default.contentsOfDirectory(atPath: recordings.path).filter { $0.hasPrefix("field-kit-test_") && $0.hasSuffix(".caf") }
        XCTAssertEqual(files.count, 1, "\(files); receiver: \(receiver.standardError)")
        if let file = files.first {
            let stream = try ffprobeStream(recordings.appendingPathComponent(file).path)
            XCTAssertEqual(stream["channels"] as? Int, 2)
            XCTAssertEqual(stream["sample_rate"] as? String, "48000")
            XCTAssertEqual(Double(stream["duration"] as? String ?? "") ?? -1, 1.0, accuracy: 0.001)
        }
    }

    /// What the sandbox reproduces, checked on a unit that writes into HOME: under the unit's own
    /// environment that fails, as it does under systemd.
    func testTheSandboxGivesAServiceNoWritableHome() throws {
        let root = temporaryFolder()
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        chmod(root.path, 0o755)
        let unit = try SystemdUnit(text: """
            [Service]
            User=capture
            StateDirectory=probe
            ProtectSystem=strict
            ProtectHome=yes
            PrivateTmp=yes
            ExecStart=/bin/sh -c "touch ${HOME}/file; echo home=$?; touch ${STATE_DIRECTORY}/file; echo state=$?; touch /var/tmp/file; echo tmp=$?; echo HOME=${HOME}"
            """)
        let service = try SystemdServiceSandbox(unit: unit, environmentFile: nil, hostName: "box", root: root, etcCapture: nil) { command in
            // The parser expanded ${HOME} already; the shell sees the values systemd would give.
            command
        }
        XCTAssertEqual(service.wait(seconds: 30), 0, service.standardError)
        let output = service.standardOutput
        XCTAssertTrue(output.contains("home=1"), output)
        XCTAssertTrue(output.contains("state=0"), output)
        XCTAssertTrue(output.contains("tmp=0"), output)
        XCTAssertTrue(output.contains("HOME=\(ServiceUser.current.home)"), output)
        XCTAssertTrue(FileManager.default.fileExists(atPath: root.appendingPathComponent("state/probe/file").path))
    }

    // MARK: gen-cert run as root

    func testGenCertAsRootWithOwnerGivesTheKeyAndCertificateToThatUser() throws {
        try XCTSkipUnless(geteuid() == 0, "gen-cert's ownership only matters when root runs it")
        let folder = temporaryFolder()
        let result = try runAsTest(Products.recv, ["gen-cert", "--out", folder.path, "--owner", "nobody"])
        XCTAssertEqual(result.exitStatus, 0, result.errorText)
        XCTAssertEqual(result.errorText, "", "nothing to warn about")
        XCTAssertTrue(result.outputText.contains("owner: nobody (key mode 0600)\n"), result.outputText)
        for name in ["key.pem", "cert.pem"] {
            var info = stat()
            XCTAssertEqual(stat(folder.appendingPathComponent(name).path, &info), 0)
            XCTAssertEqual(info.st_uid, Unprivileged.userID, name)
            XCTAssertEqual(info.st_gid, Unprivileged.groupID, name)
        }
        // The service user can start a TLS receiver with them.
        let receiver = try ReceiverUnderTest(extraArguments: ["--tls-cert", folder.appendingPathComponent("cert.pem").path, "--tls-key", folder.appendingPathComponent("key.pem").path])
        XCTAssertEqual(receiver.stop(), 0)

        let unknown = try runAsTest(Products.recv, ["gen-cert", "--out", temporaryFolder().path, "--owner", "no-such-user-here"])
        XCTAssertNotEqual(unknown.exitStatus, 0)
        XCTAssertTrue(unknown.errorText.contains("--owner no-such-user-here: there is no such user on this system; create it first (useradd --system no-such-user-here)"), unknown.errorText)
    }

    func testGenCertAsRootWithoutOwnerSaysTheServiceCannotReadTheKeyAndHowToFixIt() throws {
        try XCTSkipUnless(geteuid() == 0, "gen-cert's ownership only matters when root runs it")
        let folder = temporaryFolder()
        let result = try runAsTest(Products.recv, ["gen-cert", "--out", folder.path])
        XCTAssertEqual(result.exitStatus, 0, result.errorText)
        let key = folder.appendingPathComponent("key.pem").path
        let certificate = folder.appendingPathComponent("cert.pem").path
        XCTAssertTrue(result.errorText.contains("cannot start with it"), result.errorText)
        let chownLine = "  chown capture:capture \(key) \(certificate)\n"
        XCTAssertTrue(result.errorText.contains(chownLine), result.errorText)
        XCTAssertTrue(result.errorText.contains("or make them with --owner capture."), result.errorText)

        // It is true: the service user cannot start with the key; after the printed chown (to the
        // user the tests run services as) it can.
        let refused = try ChildProcess(Products.recv, ["--out", temporaryFolder().path, "--listen", "127.0.0.1:0", "--tls-cert", certificate, "--tls-key", key])
        XCTAssertNotEqual(refused.wait(seconds: 30), 0)
        let chown = try ToolRunner.run("chown", ["\(Unprivileged.userID):\(Unprivileged.groupID)", key, certificate])
        XCTAssertTrue(chown.succeeded, chown.errorText)
        let receiver = try ReceiverUnderTest(extraArguments: ["--tls-cert", certificate, "--tls-key", key])
        XCTAssertEqual(receiver.stop(), 0)
    }

    // MARK: Docker

    func testHealthCheckFollowsTheReceiversListenAddress() throws {
        let dockerfile = try text("docker/Dockerfile")
        let probe = try XCTUnwrap(DeploymentFiles.dockerfileHealthCheck(dockerfile), "no HEALTHCHECK CMD")
        // The probe's executable, as the Dockerfile installs it.
        let installed = DeploymentFiles.dockerfileCopies(dockerfile)
        let command = probe.map { word in installed.first { $0.destination == "/usr/local/bin/\(word)" || $0.destination == word }.map { Self.root.appendingPathComponent($0.source).path } ?? word }

        // --listen on the command line (the Dockerfile's CMD), or CAPTURE_RECV_LISTEN (compose.yaml).
        for (host, inEnvironment) in [("127.0.0.1", false), ("[::1]", false), ("127.0.0.1", true)] {
            let port = try freePort()
            let recordings = try Unprivileged.makeDirectory(temporaryFolder()).path
            let receiver: ChildProcess
            if inEnvironment {
                receiver = try ChildProcess(Products.recv, [], environment: ["CAPTURE_RECV_OUT": recordings, "CAPTURE_RECV_LISTEN": "\(host):\(port)"])
            } else {
                let arguments = try replacing("--listen", in: Array(try XCTUnwrap(DeploymentFiles.dockerfileCommand(dockerfile)).dropFirst()), with: "\(host):\(port)")
                receiver = try ChildProcess(Products.recv, arguments.map { $0 == "/recordings" ? recordings : $0 })
            }
            XCTAssertTrue(waitFor(20) { receiver.standardOutput.contains("listening on ") }, receiver.standardError)
            let healthy = try ToolRunner.run("env", ["CAPTURE_HEALTHCHECK_PID=\(receiver.process.processIdentifier)"] + command)
            let source = inEnvironment ? "CAPTURE_RECV_LISTEN" : "--listen"
            XCTAssertEqual(healthy.exitStatus, 0, "the health check does not follow \(source) \(host):\(port): \(healthy.errorText)")
            receiver.signal(SIGTERM)
            XCTAssertEqual(receiver.wait(seconds: 30), 0)
            let stopped = try ToolRunner.run("env", ["CAPTURE_HEALTHCHECK_PID=\(receiver.process.processIdentifier)"] + command)
            XCTAssertNotEqual(stopped.exitStatus, 0, "healthy without a receiver")
        }
    }

    func testAHealthProbeOnATLSPortIsNotLoggedAsARefusedHandshake() throws {
        let keys = temporaryFolder()
        let generated = try runAsTest(Products.recv, ["gen-cert", "--out", keys.path] + ownerArguments())
        XCTAssertEqual(generated.exitStatus, 0, generated.errorText)
        let pin = try XCTUnwrap(generated.outputText.split(separator: "\n").first { $0.hasPrefix("sha256 fingerprint: ") }?.split(separator: " ").last.map(String.init))
        let receiver = try ReceiverUnderTest(extraArguments: [
            "--tls-cert", keys.appendingPathComponent("cert.pem").path, "--tls-key", keys.appendingPathComponent("key.pem").path, "--log-level", "debug",
        ])
        // The image's probe: connect, close, no byte sent.
        let probe = try ToolRunner.run("bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(receiver.port) && exec 3>&-"])
        XCTAssertEqual(probe.exitStatus, 0, probe.errorText)
        XCTAssertTrue(waitFor(20) { receiver.child.standardError.contains("connection closed without data") }, receiver.child.standardError)
        // A real TLS sender still gets through.
        let sent = try runSender([receiver.address, "--tls", "--pin", pin, "--source", "tone", "--duration", "0.2", "--no-pace", "--stream-name", "after-probe"])
        XCTAssertEqual(sent.status, 0, sent.stderr)
        XCTAssertEqual(receiver.stop(), 0)
        let noisy = receiver.child.standardError.split(separator: "\n").filter { $0.contains("refused") || $0.contains("handshake") || $0.contains("warning") || $0.contains("error") }
        XCTAssertEqual(noisy, [], "a health probe is no refused TLS client")
    }

    func testTheBuildStageInstallsOnlyWhatTheBuildNeeds() throws {
        let buildOnly = try ToolRunner.run(Self.root.appendingPathComponent("scripts/install-deps.sh").path, ["--build-only", "--list"])
        XCTAssertEqual(buildOnly.exitStatus, 0, buildOnly.errorText)
        XCTAssertEqual(buildOnly.outputText, "pkg-config\nlibasound2-dev\nlibopus-dev\nlibsndfile1-dev\nlibogg-dev\nlibsoxr-dev\nlibebur128-dev\n")
        let everything = try ToolRunner.run(Self.root.appendingPathComponent("scripts/install-deps.sh").path, ["--list"])
        let all = everything.outputText.split(separator: "\n").map(String.init)
        for tool in ["ffmpeg", "sox", "socat", "protobuf-compiler", "libsndfile1-dev", "haproxy", "chromium", "python:selenium"] { XCTAssertTrue(all.contains(tool), "make test still installs \(tool)") }
        let build = DeploymentFiles.dockerfileRunCommands(try text("docker/Dockerfile")).filter { $0.hasPrefix("scripts/install-deps.sh") }
        XCTAssertEqual(build, ["scripts/install-deps.sh --build-only --package"])
        let package = try ToolRunner.run(Self.root.appendingPathComponent("scripts/install-deps.sh").path, ["--build-only", "--package", "--list"])
        XCTAssertEqual(package.outputText, buildOnly.outputText + "debhelper\ndpkg-dev\n", "the package build adds debhelper only")
        XCTAssertTrue(try text("Makefile").contains("deps:\n\t@scripts/install-deps.sh\n"), "make deps installs everything")
    }

    func testComposeKeepsTheSendersSpoolInANamedVolumeTheImageUserOwns() throws {
        let compose = try text("docker/compose.yaml")
        let spool = try XCTUnwrap(DeploymentFiles.composeEnvironment(compose)["sender"]?["CAPTURE_SEND_SPOOL"], "the compose sender sets no CAPTURE_SEND_SPOOL")
        let volumes = DeploymentFiles.composeVolumes(compose)
        let mounted = try XCTUnwrap(volumes["sender"]?.first { $0.hasSuffix(":\(spool)") }, "no volume on \(spool): \(volumes)")
        let name = String(mounted.dropLast(spool.count + 1))
        XCTAssertFalse(name.hasPrefix("/") || name.hasPrefix("."), "a named volume, not a bind mount: \(mounted)")
        XCTAssertTrue(compose.contains("\nvolumes:\n") && compose.components(separatedBy: "\nvolumes:\n").last?.contains("  \(name):") == true, "volume \(name) is not declared")
        // A new named volume takes the owner of the image's folder: the image's user must own it.
        let dockerfile = try text("docker/Dockerfile")
        let setup = DeploymentFiles.dockerfileRunCommands(dockerfile)
        XCTAssertTrue(setup.contains { $0.hasPrefix("mkdir -p") && $0.split(separator: " ").contains(Substring(spool)) }, "\(setup)")
        XCTAssertTrue(setup.contains { $0.hasPrefix("chown capture:capture") && $0.split(separator: " ").contains(Substring(spool)) }, "\(setup)")
    }

    func testEveryStopTimeoutLeavesTheReceiverItsShutdownDeadline() throws {
        let source = try text("Sources/capture-recv/CaptureRecv.swift")
        let graceful = try XCTUnwrap(Self.seconds(after: "configuration.shutdownTimeout = .seconds(", in: source))
        let escalation = try XCTUnwrap(Self.seconds(after: "maximumGracefulShutdownDuration: .seconds(", in: source))
        XCTAssertGreaterThanOrEqual(escalation, graceful)

        let compose = try text("docker/compose.yaml")
        let grace = try XCTUnwrap(DeploymentFiles.composeValues(compose, key: "stop_grace_period")["receiver"])
        XCTAssertTrue(grace.hasSuffix("s"), grace)
        XCTAssertGreaterThanOrEqual(Int(grace.dropLast()) ?? 0, escalation, "compose stop_grace_period")

        let fieldKit = try text("docs/FIELD-KIT.md")
        let dockerRun = try XCTUnwrap(fieldKit.split(separator: "\n").first { $0.hasPrefix("docker run ") })
        let words = dockerRun.split(separator: " ")
        let timeout = try XCTUnwrap(words.firstIndex(of: "--stop-timeout").map { Int(words[$0 + 1]) ?? 0 }, "docker stop's default 10 s is shorter than the receiver's \(escalation) s: \(dockerRun)")
        XCTAssertGreaterThanOrEqual(timeout, escalation)
        XCTAssertTrue(try text("docker/Dockerfile").contains("`docker run --stop-timeout \(timeout) …`"), "the Dockerfile's note names the same timeout")

        let unit = try SystemdUnit(text: try text("systemd/capture-recv.service"))
        XCTAssertGreaterThanOrEqual(Int(try XCTUnwrap(unit.value("TimeoutStopSec"))) ?? 0, escalation)

        // The sender: SIGTERM delivers for at most --stop-timeout, then it exits within 2 s more.
        let sendSource = try text("Sources/capture-send/CaptureSend.swift")
        let stopTimeout = try XCTUnwrap(Self.seconds(after: "var stopTimeout = ", in: sendSource))
        let sender = try SystemdUnit(text: try text("systemd/capture-send.service"))
        XCTAssertGreaterThanOrEqual(Int(try XCTUnwrap(sender.value("TimeoutStopSec"))) ?? 0, stopTimeout + 2, "systemd must not SIGKILL a sender still within --stop-timeout")
        let senderGrace = try XCTUnwrap(DeploymentFiles.composeValues(compose, key: "stop_grace_period")["sender"])
        XCTAssertGreaterThanOrEqual(Int(senderGrace.dropLast()) ?? 0, stopTimeout + 2, "compose stop_grace_period of the sender")
    }

    // MARK: Docs and comments

    func testOneConfigurationFolderAndNoStaleComments() throws {
        let files = ["README.md", "docs/FIELD-KIT.md", "docs/SECURITY.md", "docker/Dockerfile", "docker/compose.yaml"]
            + (try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("systemd").path)).map { "systemd/\($0)" }
        for file in files {
            let contents = try text(file)
            for stale in ["/etc/capture-streamer", "/etc/capture/tls", "once TLS/auth land", "until they land", "once the sender keeps one"] {
                XCTAssertFalse(contents.contains(stale), "\(file) still says \(stale)")
            }
        }
        // The files the units read are where docs/FIELD-KIT.md installs them.
        let fieldKit = try text("docs/FIELD-KIT.md")
        for unitFile in ["capture-send.service", "capture-recv.service"] {
            let unit = try SystemdUnit(text: try text("systemd/\(unitFile)"))
            let environmentFile = try XCTUnwrap(unit.value("EnvironmentFile")).trimmingCharacters(in: CharacterSet(charactersIn: "-"))
            XCTAssertTrue(environmentFile.hasPrefix("/etc/capture/"), environmentFile)
            XCTAssertTrue(fieldKit.contains(" \(environmentFile)\n"), "docs/FIELD-KIT.md does not install \(environmentFile)")
        }
        XCTAssertTrue(fieldKit.contains("gen-cert --out /etc/capture "), "the receiver's key and certificate go to /etc/capture")
    }

    // MARK: Helpers

    /// The ids a service-user-owned key needs: `--owner nobody` when the tests are root.
    private func ownerArguments() -> [String] {
        Unprivileged.isActive ? ["--owner", "\(Unprivileged.userID)"] : []
    }

    /// Runs an executable as the test process itself (root here), as an operator runs gen-cert.
    private func runAsTest(_ executable: String, _ arguments: [String]) throws -> ToolResult {
        try ToolRunner.run(executable, arguments)
    }

    private func replacing(_ flag: String, in command: [String], with value: String) throws -> [String] {
        var command = command
        let index = try XCTUnwrap(command.firstIndex(of: flag), "no \(flag) in \(command)")
        command[index + 1] = value
        return command
    }

    private func freePort() throws -> Int { try LoopbackPort.free() }

    private static func seconds(after prefix: String, in source: String) -> Int? {
        guard let range = source.range(of: prefix) else { return nil }
        return Int(source[range.upperBound...].prefix { $0.isNumber })
    }

    private func temporaryFolder() -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fieldkit-\(UUID().uuidString)")
        addTeardownBlock { try? FileManager.default.removeItem(at: folder) }
        return folder
    }
}
