import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 28, item 5: the receiver killed at every step of its storage path (`CAPTURE_CRASH_AT`, a
/// debug build's fault injection: SIGKILL of itself at a named point) and restarted on the same
/// folder. Each time the stream completes and its recording is the tone, sample-exact: nothing the
/// receiver acknowledged is missing, nothing is there twice.
final class CrashPointTests: XCTestCase {
    private var work: URL!
    private static let seconds = 3
    private static let frames = seconds * 48_000

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("crash-points-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    func testKilledMidAppendToTheLog() throws {
        try crashOnce(at: "mid-append:8", receiverArguments: ["--sync-ms", "50"])
    }

    func testKilledAfterAppendingToTheLogBeforeItsSync() throws {
        try crashOnce(at: "after-append-before-sync:8", receiverArguments: ["--sync-ms", "50"])
    }

    func testKilledMidCheckpoint() throws {
        try crashOnce(at: "mid-checkpoint", receiverArguments: ["--checkpoint-s", "1"])
    }

    func testKilledMidSegmentCut() throws {
        try crashOnce(at: "mid-segment-cut", receiverArguments: ["--segment", "1s"])
    }

    /// Killed at the stream's end, after its file was finalized and before the index records the
    /// stream finished: the file keeps its position log, so the sender's resume continues it and
    /// its end finishes it again; one file holds the tone.
    func testKilledFinishingTheStreamBeforeTheIndexRecordsIt() throws {
        try crashOnce(at: "finish-before-record", receiverArguments: []) { restarted in
            XCTAssertEqual(restarted.files().count, 1, "\(restarted.files())")
        }
    }

    /// Killed after the index records the stream finished, before its file's position log is
    /// removed: the sender's resume gets its EndAccepted again (no second file), and the restart
    /// removes the stale log, so the file is not taken for a resumable one.
    func testKilledAfterTheIndexRecordsTheStreamFinishedBeforeItsPositionLogGoes() throws {
        try crashOnce(at: "finish-after-record", receiverArguments: []) { restarted in
            XCTAssertEqual(restarted.files().count, 1, "\(restarted.files())")
            let names = try FileManager.default.contentsOfDirectory(atPath: restarted.directory.path)
            XCTAssertEqual(names.filter { !$0.hasPrefix(".") && !$0.hasSuffix(".caf") }, [], "no position log is left beside the finished file")
            XCTAssertTrue(restarted.child.standardError.contains("removed the position log a crash left beside a finished stream's file"),
                          restarted.child.standardError)
        }
    }

    /// Killed (as by the OOM killer), then killed again while its restart replays the log.
    func testKilledMidReplay() throws {
        let out = work.appendingPathComponent("out")
        let first = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        let proxy = try FaultProxy(upstreamPort: first.port, seed: 1)
        let sender = try startSender(port: proxy.port, name: "mid-replay")
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        Resilience.waitUntil("a second is acknowledged") { Resilience.acknowledgedSeconds(sender.standardError) >= 1 }
        first.child.signal(SIGKILL)
        first.child.wait()
        XCTAssertThrowsError(
            try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out, environment: ["CAPTURE_CRASH_AT": "mid-replay"]),
            "the restart dies while it replays")
        let last = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        proxy.upstreamPort = last.port
        try expectTheWholeTone(sender: sender, receiver: last)
        XCTAssertTrue(last.child.standardError.contains("replayed the commit log"), last.child.standardError)
    }

    /// Two receivers on one folder: the one recording the stream dies; the other, taking it over,
    /// dies while it replays the first one's log; a third finishes the stream.
    func testKilledMidTakeover() throws {
        let out = work.appendingPathComponent("out")
        let first = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        let second = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out, environment: ["CAPTURE_CRASH_AT": "mid-takeover"])
        let proxy = try FaultProxy(upstreamPort: first.port, seed: 2)
        let sender = try startSender(port: proxy.port, name: "mid-takeover")
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        Resilience.waitUntil("a second is acknowledged") { Resilience.acknowledgedSeconds(sender.standardError) >= 1 }
        first.child.signal(SIGKILL)
        first.child.wait()
        proxy.upstreamPort = second.port
        Resilience.waitUntil("the second receiver dies taking the stream over") { !second.child.process.isRunning }
        XCTAssertTrue(second.child.standardError.contains("CAPTURE_CRASH_AT: crashing at mid-takeover"), second.child.standardError)
        let third = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: out)
        proxy.upstreamPort = third.port
        try expectTheWholeTone(sender: sender, receiver: third)
    }

    // MARK: - Helpers

    /// A receiver started with `CAPTURE_CRASH_AT=point` records a paced tone until the point kills
    /// it; a receiver restarted on the folder (without it) finishes the stream. `afterwards` checks
    /// the restarted receiver once it has stopped (its folder is removed with it).
    private func crashOnce(at point: String, receiverArguments: [String], afterwards: (ReceiverUnderTest) throws -> Void = { _ in }) throws {
        let out = work.appendingPathComponent("out")
        let name = String(point.prefix { $0 != ":" })
        let first = try ReceiverUnderTest(
            extraArguments: Resilience.receiverOptions + receiverArguments, outputDirectory: out, environment: ["CAPTURE_CRASH_AT": point])
        let proxy = try FaultProxy(upstreamPort: first.port, seed: 3)
        let sender = try startSender(port: proxy.port, name: name)
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        Resilience.waitUntil("the receiver reaches \(point)") { !first.child.process.isRunning }
        XCTAssertTrue(first.child.standardError.contains("CAPTURE_CRASH_AT: crashing at \(name)"), first.child.standardError)
        let second = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions + receiverArguments, outputDirectory: out)
        proxy.upstreamPort = second.port
        try expectTheWholeTone(sender: sender, receiver: second)
        try afterwards(second)
    }

    private func startSender(port: Int, name: String) throws -> ChildProcess {
        try ChildProcess(Products.send, [
            "127.0.0.1:\(port)", "--source", "tone", "--duration", "\(Self.seconds)", "--stream-name", name, "--buffer-seconds", "0.1",
            "--status-interval", "0.05",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool-\(name)")))
    }

    /// The sender delivers the stream and exits 0, and the recording (its segments in order) is the
    /// tone, sample-exact.
    private func expectTheWholeTone(sender: ChildProcess, receiver: ReceiverUnderTest) throws {
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("stream delivered"), sender.standardError)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        var audio: [UInt8] = []
        for file in receiver.files() {
            let caf = try CAFFile.read(path: file.path)
            XCTAssertTrue(caf.isFinalized, file.path)
            audio += try caf.readAudioData()
        }
        XCTAssertFalse(receiver.files().isEmpty)
        XCTAssertEqual(audio.count, Self.frames * 4, "\(receiver.files().map(\.lastPathComponent))")
        XCTAssertTrue(audio == (try Resilience.toneBytes(frames: Self.frames)), "the tone, sample-exact, nothing missing or twice")
    }

}
