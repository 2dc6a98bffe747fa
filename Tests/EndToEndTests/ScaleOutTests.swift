import CAF
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Receivers behind Debian's HAProxy on one shared output folder: a receiver killed mid-stream hands
/// its streams over to another through the balancer, and they continue in the same files, complete;
/// a receiver restarted on the folder sees what the other one finished as finished and what it left
/// as resumable.
final class ScaleOutTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") else {
            throw XCTSkip("haproxy is not installed (scripts/install-deps.sh installs it)")
        }
        work = FileManager.default.temporaryDirectory.appendingPathComponent("scale-out-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    func testAReceiverKilledMidStreamHandsItsStreamsToAnotherThroughHAProxy() throws {
        let out = work.appendingPathComponent("shared")
        let ports = try (0..<2).map { _ in try Self.freePort() }
        let first = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out, port: ports[0])
        let balancer = try HAProxyUnderTest(backends: ports, folder: work)
        // Both streams start on the first receiver (the second is not up yet; HAProxy's checks and
        // redispatch skip it), as on a site whose second receiver joins later.
        let pcm = try ChildProcess(Products.send, [
            "127.0.0.1:\(balancer.port)", "--source", "tone", "--duration", "30", "--stream-name", "handover-pcm",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool-pcm")))
        let opusArguments = ["--source", "tone", "--duration", "30", "--stream-name", "handover-opus", "--codec", "opus", "--bitrate", "64000"]
        let opus = try ChildProcess(Products.send, ["127.0.0.1:\(balancer.port)"] + opusArguments
            + Resilience.senderOptions(spool: work.appendingPathComponent("spool-opus")))
        Resilience.waitUntil("both streams record on the first receiver") {
            first.child.standardError.components(separatedBy: "stream opened").count - 1 == 2
        }
        let second = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out, port: ports[1])
        Resilience.waitUntil("ten seconds of the PCM stream are on disk", seconds: 30) {
            Resilience.size(first.files().first { $0.lastPathComponent.hasPrefix("handover-pcm") }) > 10 * 192_000
        }
        XCTAssertFalse(first.child.standardError.contains("refused"), "HAProxy's health checks are not refused handshakes: \(first.child.standardError)")
        first.child.signal(SIGKILL)
        first.child.wait()

        XCTAssertEqual(Resilience.finish(pcm), 0, pcm.standardError)
        XCTAssertEqual(Resilience.finish(opus), 0, opus.standardError)
        XCTAssertEqual(second.child.standardError.components(separatedBy: "stream resumed").count - 1, 2,
                       "the second receiver continues both streams: \(second.child.standardError)")
        XCTAssertFalse(second.child.standardError.contains("refused"), second.child.standardError)

        let files = second.files()
        XCTAssertEqual(files.map { String($0.lastPathComponent.prefix(while: { $0 != "_" })) }.sorted(), ["handover-opus", "handover-pcm"], "one file per stream")
        let pcmFile = try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("handover-pcm") })
        let caf = try CAFFile.read(path: pcmFile.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.totalFrames, 1_440_000)
        XCTAssertTrue(try caf.readAudioData() == (try Resilience.toneBytes(frames: 1_440_000)), "bit-exact: no hole, no duplicate across the handover")
        XCTAssertEqual(try SndFileReader.read(path: pcmFile.path).frames, 1_440_000, "libsndfile reads the whole stream")

        let reference = try ReceiverUnderTest()
        let clean = try runSender([reference.address, "--no-pace"] + opusArguments + Resilience.senderOptions(spool: work.appendingPathComponent("spool-reference")))
        XCTAssertEqual(clean.status, 0, clean.stderr)
        let referenceFile = try XCTUnwrap(reference.files().first).path
        let opusFile = try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("handover-opus") }).path
        let received = try Resilience.packets(of: opusFile)
        XCTAssertEqual(received.count, 1_501, "30 s of 20 ms packets and one for the lookahead")
        XCTAssertTrue(received == (try Resilience.packets(of: referenceFile)), "packet-exact across the handover")
        XCTAssertEqual(try CAFFile.read(path: opusFile).packetTable, try CAFFile.read(path: referenceFile).packetTable)
        XCTAssertEqual(try Resilience.ffprobePacketCount(opusFile), 1_501)

        // Both streams are recorded as finished (for a sender that missed its EndAccepted), naming their files.
        let index = out.appendingPathComponent(".streams")
        let names = try FileManager.default.contentsOfDirectory(atPath: index.path)
        // Beside the entries, the claims' lock file, which both receivers shared.
        let entries = names.filter { UUID(uuidString: $0) != nil }
        XCTAssertEqual(entries.count, 2, "\(names)")
        XCTAssertEqual(Set(names).subtracting(entries), [".locks"], "\(names)")
        for entry in entries {
            let text = try String(contentsOf: index.appendingPathComponent(entry), encoding: .utf8)
            XCTAssertTrue(text.hasPrefix("finished\nhandover-"), text)
            XCTAssertTrue(text.contains("owner secret="), "bound to its sender: \(text)")
        }
        XCTAssertEqual(second.stop(), 0)
        XCTAssertEqual(reference.stop(), 0)
        balancer.stop()
    }

    func testAReceiverRestartedOnTheSharedFolderSeesFinishedStreamsAsFinishedAndResumableOnesAsResumable() throws {
        let out = work.appendingPathComponent("shared")
        let first = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        let second = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        // On the second receiver: one stream finishes, another loses its sender mid-stream.
        let finished = try runSender([second.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "finished"]
            + Resilience.senderOptions(spool: work.appendingPathComponent("spool-finished")))
        XCTAssertEqual(finished.status, 0, finished.stderr)
        let finishedFile = try XCTUnwrap(second.files().first { $0.lastPathComponent.hasPrefix("finished_") })
        let finishedBytes = try Data(contentsOf: finishedFile)

        let proxy = try FaultProxy(upstreamPort: second.port, seed: 3)
        let spool = work.appendingPathComponent("spool-interrupted")
        let interrupted = try ChildProcess(Products.send, [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "60", "--stream-name", "interrupted",
        ] + Resilience.senderOptions(spool: spool))
        Resilience.waitUntil("a second of the interrupted stream is on disk") {
            Resilience.size(second.files().first { $0.lastPathComponent.hasPrefix("interrupted_") }) > 192_000
        }
        interrupted.signal(SIGKILL)
        interrupted.wait()
        Resilience.waitUntil("the second receiver lets go of the stream, resumable") {
            second.child.standardError.contains("the file stays open for the sender to resume")
        }

        // The first receiver restarts on the folder.
        XCTAssertEqual(first.stop(), 0)
        let restarted = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        Resilience.waitUntil("the restarted receiver lists the streams waiting for their senders") {
            restarted.child.standardError.contains("waiting for its sender to resume it")
        }
        let waiting = restarted.child.standardError.split(separator: "\n").filter { $0.contains("waiting for its sender to resume it") }
        XCTAssertEqual(waiting.count, 1, "only the interrupted stream: \(restarted.child.standardError)")
        XCTAssertTrue(waiting.first?.contains("interrupted_") ?? false, "\(waiting)")

        // Its sender comes back through the restarted receiver and delivers the rest, in the same file.
        let folders = try FileManager.default.contentsOfDirectory(atPath: spool.path).filter { UUID(uuidString: $0) != nil }
        let spooledEnd = try Resilience.spooledEnd(streamFolder: spool.appendingPathComponent(try XCTUnwrap(folders.first)))
        proxy.upstreamPort = restarted.port
        let delivered = try runSender([
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "0.2", "--no-pace", "--stream-name", "after",
        ] + Resilience.senderOptions(spool: spool))
        XCTAssertEqual(delivered.status, 0, delivered.stderr)
        XCTAssertTrue(restarted.child.standardError.contains("stream resumed"), restarted.child.standardError)
        let interruptedFiles = restarted.files().filter { $0.lastPathComponent.hasPrefix("interrupted_") }
        XCTAssertEqual(interruptedFiles.count, 1, "resumed in the same file")
        let caf = try CAFFile.read(path: try XCTUnwrap(interruptedFiles.first).path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.totalFrames, spooledEnd)
        XCTAssertEqual(try caf.readAudioData(), try Resilience.toneBytes(frames: Int(spooledEnd)), "sample-exact across receivers")

        XCTAssertEqual(try Data(contentsOf: finishedFile), finishedBytes, "the finished stream was left as it was")
        XCTAssertEqual(restarted.files().filter { $0.lastPathComponent.hasPrefix("finished_") }.count, 1)
        XCTAssertEqual(restarted.stop(), 0)
        XCTAssertEqual(second.stop(), 0)
    }

    func testTwoReceiversOfferedTheSameStreamAtOnceExactlyOneWritesIt() throws {
        let out = work.appendingPathComponent("shared")
        let receivers = try (0..<2).map { _ in try ReceiverUnderTest(outputDirectory: out) }
        for round in 0..<10 {
            let id = UUID()
            let hello = WirePreamble.bytes() + (try WireMessage.hello(.with {
                $0.protocolVersion = 1
                $0.streamID = withUnsafeBytes(of: id.uuid) { Data($0) }
                $0.streamName = "contested-\(round)"
                $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            }).encode())
            // Both connections are open before either Hello is sent, then the Hellos go out together.
            let sockets = try receivers.map { try LoopbackSocket.connect(port: $0.port, receiveTimeout: 10) }
            defer { sockets.forEach { close($0) } }
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                _ = hello.withUnsafeBytes { send(sockets[index], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            let answers = try sockets.map { try Self.firstMessage(from: $0) }
            let accepted = answers.filter { if case .helloAccepted = $0 { return true } else { return false } }
            let busy = answers.compactMap { if case .error(let error) = $0, error.code == .streamBusy { return error } else { return nil } }
            XCTAssertEqual(accepted.count, 1, "round \(round): exactly one receiver takes the stream: \(answers)")
            XCTAssertEqual(busy.count, 1, "round \(round): the other answers STREAM_BUSY: \(answers)")
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: out.path).filter { $0.hasPrefix("contested-") && $0.hasSuffix(".caf") }
        XCTAssertEqual(files.count, 10, "one file per stream, never two: \(files.sorted())")
        for receiver in receivers { XCTAssertEqual(receiver.stop(), 0) }
    }

    /// The first message the receiver sends on `socket`.
    private static func firstMessage(from socket: Int32) throws -> WireMessage {
        var decoder = FrameDecoder(role: .sender)
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw TestFailure("the receiver sent no message") }
            if let message = try decoder.decode(chunk[0..<count]).first { return message }
        }
    }

    /// A TCP port free on 127.0.0.1 now (the kernel's choice; bound and released).
    static func freePort() throws -> Int { try LoopbackPort.free() }
}

/// Debian's HAProxy in TCP mode in front of receivers on 127.0.0.1: least connections, health checks
/// every 250 ms, and a connection to a dead receiver retried on another (redispatch).
final class HAProxyUnderTest {
    let port: Int
    private let child: ChildProcess

    /// HAProxy running `configuration`, whose frontend listens on 127.0.0.1:`port`.
    init(configuration: String, port: Int, folder: URL) throws {
        self.port = port
        let path = folder.appendingPathComponent("haproxy-\(port).cfg")
        try configuration.write(to: path, atomically: true, encoding: .utf8)
        child = try ChildProcess("/usr/sbin/haproxy", ["-db", "-f", path.path], unprivileged: false)
        guard waitFor(10, { LoopbackSocket.accepts(port: port) }) else {
            child.signal(SIGKILL)
            throw TestFailure("haproxy did not start: \(child.standardError)")
        }
    }

    /// HAProxy in front of the receivers on 127.0.0.1 at `backends`.
    convenience init(backends: [Int], folder: URL) throws {
        let port = try ScaleOutTests.freePort()
        let servers = backends.enumerated().map { "    server receiver\($0.offset + 1) 127.0.0.1:\($0.element) check inter 250ms fall 1 rise 1" }
        let configuration = """
            global
                maxconn 1000
            defaults
                mode tcp
                timeout connect 1s
                timeout client 60s
                timeout server 60s
                retries 3
                option redispatch 1
            frontend capture
                bind 127.0.0.1:\(port)
                default_backend receivers
            backend receivers
                balance leastconn
            \(servers.joined(separator: "\n"))

            """
        try self.init(configuration: configuration, port: port, folder: folder)
    }

    /// What HAProxy printed (warnings, alerts).
    var standardError: String { child.standardError }

    func stop() {
        child.signal(SIGTERM)
        child.wait(seconds: 10)
    }

    deinit {
        if child.process.isRunning { child.signal(SIGKILL) }
    }
}
