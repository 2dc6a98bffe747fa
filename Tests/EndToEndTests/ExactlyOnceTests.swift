import CAF
import CSndFile
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Exactly once at the end of a stream (issue 19, items 1 and 3), with the real executables: a lost
/// EndAccepted is answered again and nothing is stored twice; an EndAccepted that does not confirm
/// the stream's end releases nothing.
final class ExactlyOnceTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("exactly-once-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private var spool: URL { work.appendingPathComponent("spool") }

    /// The link's return path fails after the EndOfStream went out: the receiver finishes the file
    /// and its EndAccepted is lost. The sender reconnects; the receiver answers its Hello with the
    /// same EndAccepted; the sender exits 0 with its spool empty, and there is one file, complete.
    func testAnEndAcceptedLostWithTheLinkIsSentAgainAndTheStreamIsStoredOnce() throws {
        let receiver = try ReceiverUnderTest()
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: 7)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "2", "--stream-name", "lost-end", "--buffer-seconds", "0.05",
            "--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--log-level", "info",
        ])
        Resilience.waitUntil("the receiver opened the stream") { receiver.child.standardError.contains("stream opened") }
        // From now on nothing the receiver says reaches the sender: no Ack, no EndAccepted.
        proxy.mode = .dropReplies
        Resilience.waitUntil("the receiver finished the file") { receiver.child.standardError.contains("stream closed") }
        proxy.mode = .pass
        XCTAssertEqual(Resilience.finish(sender, seconds: 30), 0, sender.standardError)
        // The sender may exit on the EndAccepted before the receiver's log line is read.
        XCTAssertTrue(waitFor(20) { receiver.child.standardError.contains("stream already finished: sending its EndAccepted again") }, receiver.child.standardError)
        XCTAssertGreaterThanOrEqual(proxy.acceptedConnections, 2, "the sender had to reconnect")

        let files = receiver.files()
        XCTAssertEqual(files.map(\.lastPathComponent).filter { $0.hasSuffix("-2.caf") }, [], "no second file")
        XCTAssertEqual(files.count, 1, "\(files)")
        let file = try XCTUnwrap(files.first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(try caf.readAudioData(), try Resilience.toneBytes(frames: 96_000), "the whole tone, once")
        XCTAssertEqual(try SndFileReader.read(path: file.path).frames, 96_000)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [], "the delivered stream left the spool")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// A receiver that answers HelloAccepted and, at once, an EndAccepted it wrote before reading
    /// the stream's end (it cannot name it) confirms nothing: the sender calls it a protocol
    /// violation, keeps every spooled packet, and does not report the stream delivered.
    func testAnEndAcceptedThatDoesNotNameTheStreamsEndReleasesNothing() throws {
        let source = work.appendingPathComponent("short.wav").path
        let ints = (0..<(48_000 / 2) * 2).map { Int32(truncatingIfNeeded: $0 &* 2_654_435_761) & ~0xFFFF }
        try writeWAV(path: source, subtype: Int32(SF_FORMAT_PCM_16), rate: 48_000, channels: 2, ints: ints)
        Unprivileged.handOver(source)
        let liar = try ScriptedReceiver(delay: 0.5) { hello in
            [
                .helloAccepted(.with {
                    $0.nextSequence = 1
                    $0.nextSampleTime = hello.startSampleTime
                    $0.heartbeatIntervalMs = 5_000
                    $0.maxFrameBytes = UInt32(WireProtocol.defaultMaxFrameBytes)
                    $0.fileName = "never-written.caf"
                }),
                .endAccepted(.with { $0.fileName = "never-written.caf" }),
            ]
        }
        defer { liar.stop() }
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(liar.port)", "--source", "file", "--file", source, "--no-pace", "--stream-name", "premature",
            "--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.2", "--log-level", "info",
        ])
        Resilience.waitUntil("the sender met the lying receiver three times") { liar.connectionsServed >= 3 }
        XCTAssertTrue(sender.process.isRunning, "the stream is not reported delivered: \(sender.standardError)")
        XCTAssertTrue(sender.standardError.contains("the confirmation does not count"), sender.standardError)
        sender.signal(SIGKILL)
        _ = sender.wait(seconds: 10)
        let streams = try FileManager.default.contentsOfDirectory(atPath: spool.path)
        XCTAssertEqual(streams.count, 1, "the stream stays in the spool: \(streams)")
        let folder = spool.appendingPathComponent(try XCTUnwrap(streams.first))
        let spooled = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        let bytes = try spooled.reduce(Int64(0)) { total, name in
            total + ((try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)[.size] as? Int64) ?? 0)
        }
        XCTAssertGreaterThan(bytes, 48_000 / 2 * 4, "every captured frame is still spooled: \(spooled)")
    }
}

/// Issue 19, item 2: a sender offline longer than the receiver's resume window keeps capturing, and
/// delivers what the receiver no longer resumes as a new stream that names the one it continues; the
/// two files join without a hole or a duplicate.
final class ContinuationTests: XCTestCase {
    func testASenderBackAfterTheResumeWindowContinuesAsANewStreamThatJoinsTheFirstWithoutAHole() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("continuation-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
        defer { try? FileManager.default.removeItem(at: work) }
        let receiver = try ReceiverUnderTest(extraArguments: ["--idle-timeout", "2", "--resume-window", "2"])
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 5)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(link.port)", "--source", "tone", "--duration", "10", "--stream-name", "outage", "--buffer-seconds", "0.05",
            "--spool", work.appendingPathComponent("spool").path, "--reconnect-min", "0.05", "--reconnect-max", "0.3",
            "--idle-timeout", "30", "--log-level", "info",
        ])
        Resilience.waitUntil("the stream is recorded") { receiver.child.standardError.contains("stream opened") }
        Thread.sleep(forTimeInterval: 1)
        link.mode = .stall
        Resilience.waitUntil("the receiver finalized the stream after its resume window") {
            receiver.child.standardError.contains("did not come back within the resume window; file finalized")
        }
        link.mode = .pass
        link.resetAll()
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("is delivered as a new stream that continues it"), sender.standardError)
        XCTAssertTrue(sender.standardError.contains("the receiver confirms that the earlier recording ends where the new stream begins: the two join without a hole"),
                      "the join is claimed only once the receiver confirmed it: \(sender.standardError)")

        let files = receiver.files().sorted { $0.lastPathComponent < $1.lastPathComponent }
        XCTAssertEqual(files.count, 2, "\(files)")
        guard files.count == 2 else { return }
        let first = try CAFFile.read(path: files[0].path)
        let second = try CAFFile.read(path: files[1].path)
        XCTAssertTrue(first.isFinalized && second.isFinalized)
        let info = Dictionary(second.info.map { ($0.key, $0.value) }) { a, _ in a }
        let firstInfo = Dictionary(first.info.map { ($0.key, $0.value) }) { a, _ in a }
        XCTAssertEqual(info["continues stream id"], firstInfo["stream id"], "the second file names the stream it continues: \(second.info)")
        let firstFrames = try first.readAudioData().count / 4
        XCTAssertEqual(info["first sample"], "\(firstFrames)", "it begins exactly where the first file ends")
        XCTAssertNotNil(info["first sample time"])
        XCTAssertEqual(try first.readAudioData() + second.readAudioData(), try Resilience.toneBytes(frames: 10 * 48_000),
                       "the two recordings join without a hole or a duplicate")
        XCTAssertEqual(try SndFileReader.read(path: files[1].path).frames, 10 * 48_000 - firstFrames)
        XCTAssertEqual(receiver.stop(), 0)
    }
}
