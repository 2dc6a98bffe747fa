import CAF
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, item 3: a backup can cost itself its copy, never the main receiver its audio or its
/// pace. A backup that stops acknowledging is given up before what only it lacks fills a small
/// spool (the main's file has no gap); a stalled backup does not hold up a source read faster than
/// real time, with the spool or without; a backup that is connected but acknowledges nothing, or
/// acknowledges what was never sent, is given up after `--also-give-up`. Each time capture-send
/// exits 4 with one line naming the backup, and the main's file is whole and bit-exact.
final class StalledBackupTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("stalled-backup-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private var spool: URL { work.appendingPathComponent("spool") }

    /// Fast reconnects and a 2 s idle timeout, without a disk spool.
    private let memoryOnlyOptions = ["--no-spool", "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--idle-timeout", "2", "--log-level", "info"]

    private func lastLine(_ text: String) -> String { text.split(separator: "\n").last.map(String.init) ?? "" }

    /// The main file's audio must be exactly `expected`: finalized, every frame, no gap.
    private func assertWhole(_ receiver: ReceiverUnderTest, _ expected: [UInt8], _ what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let files = receiver.files()
        XCTAssertEqual(files.count, 1, "\(what): one file: \(files)", file: file, line: line)
        let caf = try CAFFile.read(path: try XCTUnwrap(files.first, file: file, line: line).path)
        XCTAssertTrue(caf.isFinalized, what, file: file, line: line)
        XCTAssertEqual(caf.totalFrames, Int64(expected.count / 4), what, file: file, line: line)
        XCTAssertTrue(try caf.readAudioData() == expected, "\(what): every sample exactly once, no gap", file: file, line: line)
    }

    func testABackupThatStopsAcknowledgingIsGivenUpBeforeASmallSpoolCostsTheMainAGap() throws {
        let main = try ReceiverUnderTest()
        let backup = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            main.address, "--also", backup.address, "--source", "tone", "--duration", "12", "--spool-max", "1M",
            "--stream-name", "small-spool",
        ] + Resilience.senderOptions(spool: spool))
        Resilience.waitUntil("the backup opened the stream") { backup.child.standardError.contains("stream opened") }
        backup.child.signal(SIGSTOP)
        defer { backup.child.signal(SIGCONT) }
        XCTAssertEqual(Resilience.finish(sender, seconds: 90), 4, sender.standardError)
        let last = lastLine(sender.standardError)
        XCTAssertTrue(last.contains("the main receiver \(main.address) has the whole stream; backup receiver \(backup.address) was dropped at once: its acknowledgements fell 1.0 MiB behind, the spool's limit (--spool-max), and keeping more for it would have cost the main receiver audio; its file is incomplete, it lacks the audio from second "), last)
        XCTAssertFalse(sender.standardError.contains("the spool is full"), sender.standardError)
        try assertWhole(main, try Resilience.toneBytes(frames: 576_000), "the main file is the whole 12 s tone")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [], "no overflow file, nothing left in the spool")
        XCTAssertEqual(main.stop(), 0)
    }

    /// A 30 s random WAV read as fast as possible while the backup is stopped: the main receiver
    /// closes the stream, whole, while the backup still has not answered.
    private func streamFastWhileTheBackupIsStopped(_ options: [String], name: String) throws -> (main: ReceiverUnderTest, backup: ReceiverUnderTest, sender: ChildProcess, source: [UInt8]) {
        let source = try Resilience.randomWAV(in: work, seconds: 30, seed: 27)
        let main = try ReceiverUnderTest()
        let backup = try ReceiverUnderTest()
        backup.child.signal(SIGSTOP)
        let sender = try ChildProcess(Products.send, [
            main.address, "--also", backup.address, "--source", "file", "--file", source.path, "--no-pace", "--stream-name", name,
        ] + options)
        Resilience.waitUntil("the main receiver closed the stream while the backup is stopped", seconds: 120) {
            main.child.standardError.contains("stream closed")
        }
        try assertWhole(main, source.bytes, "the main file is the whole source")
        return (main, backup, sender, source.bytes)
    }

    func testAStoppedBackupDoesNotHoldUpAFastSourceAndCatchesUpFromTheSpool() throws {
        let run = try streamFastWhileTheBackupIsStopped(Resilience.senderOptions(spool: spool), name: "fast-spooled")
        XCTAssertTrue(run.sender.process.isRunning, "the spool keeps what the backup lacks; the sender waits for it: \(run.sender.standardError)")
        run.backup.child.signal(SIGCONT)
        XCTAssertEqual(Resilience.finish(run.sender, seconds: 120), 0, run.sender.standardError)
        try assertWhole(run.backup, run.source, "the backup caught up from the spool")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [])
        XCTAssertEqual(run.main.stop(), 0)
        XCTAssertEqual(run.backup.stop(), 0)
    }

    func testAStoppedBackupDoesNotHoldUpAFastSourceWithoutASpoolAndIsGivenUp() throws {
        let run = try streamFastWhileTheBackupIsStopped(memoryOnlyOptions, name: "fast-memory")
        defer { run.backup.child.signal(SIGCONT) }
        XCTAssertEqual(Resilience.finish(run.sender, seconds: 60), 4, run.sender.standardError)
        let last = lastLine(run.sender.standardError)
        XCTAssertTrue(last.contains("the main receiver \(run.main.address) has the whole stream; backup receiver \(run.backup.address) was dropped at once: its acknowledgements fell 3.0 MiB behind, the most a source read faster than real time may keep unacknowledged, and waiting for it would have held up the main receiver; its file is incomplete, it lacks the audio from second 0.000 on"), last)
        XCTAssertEqual(run.main.stop(), 0)
    }

    /// HelloAccepted for a new stream, as a scripted receiver answers.
    private static func accept(_ hello: Capture_V1_Hello) -> WireMessage {
        .helloAccepted(.with {
            $0.nextSequence = 1
            $0.nextSampleTime = hello.startSampleTime
            $0.heartbeatIntervalMs = 5_000
            $0.maxFrameBytes = UInt32(WireProtocol.defaultMaxFrameBytes)
            $0.fileName = "scripted.caf"
        })
    }

    /// A 6 s paced tone to a real main receiver and to `backup`, given up after 3 s.
    private func sendToScriptedBackup(_ backup: ScriptedReceiver, idleTimeout: String, name: String) throws -> (status: Int32, stderr: String, main: ReceiverUnderTest) {
        let main = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            main.address, "--also", "127.0.0.1:\(backup.port)", "--also-give-up", "3s", "--source", "tone", "--duration", "6",
            "--stream-name", name, "--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.3",
            "--idle-timeout", idleTimeout, "--log-level", "info",
        ])
        let status = Resilience.finish(sender, seconds: 60)
        try assertWhole(main, try Resilience.toneBytes(frames: 288_000), "the main file is the whole tone")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [])
        return (status, sender.standardError, main)
    }

    func testABackupThatAcceptsButNeverAcknowledgesIsGivenUp() throws {
        let silent = try ScriptedReceiver { hello in [Self.accept(hello)] }
        defer { silent.stop() }
        // A long idle timeout: the connection stays up the whole time, and still nothing is acknowledged.
        let run = try sendToScriptedBackup(silent, idleTimeout: "30", name: "never-acknowledges")
        XCTAssertEqual(run.status, 4, run.stderr)
        let last = lastLine(run.stderr)
        XCTAssertTrue(last.contains("the main receiver \(run.main.address) has the whole stream; backup receiver 127.0.0.1:\(silent.port) made no progress for 3 s (--also-give-up): it was connected but acknowledged nothing new, and was dropped: its file is incomplete, it lacks the audio from second 0.000 on"), last)
        XCTAssertEqual(silent.connectionsServed, 1, "given up on its one connection")
        XCTAssertEqual(run.main.stop(), 0)
    }

    func testABackupThatAcknowledgesWhatWasNeverSentIsGivenUpThoughItKeepsReconnecting() throws {
        let liar = try ScriptedReceiver { hello in [Self.accept(hello), .ack(.with { $0.durableSequence = 1_000_000 })] }
        defer { liar.stop() }
        let run = try sendToScriptedBackup(liar, idleTimeout: "2", name: "acknowledges-too-much")
        XCTAssertEqual(run.status, 4, run.stderr)
        let last = lastLine(run.stderr)
        XCTAssertTrue(last.contains("the main receiver \(run.main.address) has the whole stream; backup receiver 127.0.0.1:\(liar.port) made no progress for 3 s (--also-give-up): it broke the protocol (the receiver acknowledged sequence 1000000 but only "), last)
        XCTAssertTrue(last.contains("was sent on this connection), and was dropped: its file is incomplete, it lacks the audio from second 0.000 on"), last)
        XCTAssertGreaterThan(liar.connectionsServed, 1, "it was reconnected to, and the reconnects did not reset the give-up clock")
        XCTAssertEqual(run.main.stop(), 0)
    }
}
