import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A receiver whose storage keeps only what was synced (issue 28): it records onto the power-cut
/// file system, whose `syncfs` reaches nothing (as on any FUSE file system: GlusterFS, CephFS
/// through ceph-fuse, JuiceFS); the power is cut while the stream records, after the receiver
/// acknowledged some of it and the sender released that.
///
/// With the commit log, every acknowledged sample survives: the restarted receiver replays the log
/// into the file and the stream completes bit-exact. When the log is lost as well (a restored backup
/// of the output folder without it), the receiver holds less than it acknowledged: both sides must
/// then say exactly which seconds are lost, the continuation's file must name them, and the sender
/// must exit non-zero, never "stream delivered".
final class PowerCutTests: XCTestCase {
    func testEveryAcknowledgedSampleSurvivesAPowerCutAndTheStreamCompletesBitExact() throws {
        let run = try PowerCutRun(losingTheLog: false)
        let (sender, second, acknowledged) = (run.sender, run.second, run.acknowledged)
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, "the stream is delivered: \(sender.standardError)")
        XCTAssertEqual(second.stop(), 0, second.child.standardError)
        XCTAssertTrue(sender.standardError.contains("stream delivered"), sender.standardError)
        XCTAssertFalse(sender.standardError.contains("lost seconds"), sender.standardError)
        let receiverLog = second.child.standardError
        XCTAssertTrue(receiverLog.contains("replayed the commit log"), "the restart replays what the cut took from the file: \(receiverLog)")
        XCTAssertTrue(receiverLog.contains("stream resumed"), receiverLog)
        // One file, the whole tone: the acknowledged audio the cut took from the file came back from
        // the log, and the sender sent only what followed it.
        let files = second.files()
        XCTAssertEqual(files.count, 1, "\(files)")
        let path = try XCTUnwrap(files.first).path
        let file = try CAFFile.read(path: path)
        XCTAssertTrue(file.isFinalized)
        XCTAssertEqual(try file.readAudioData(), try Resilience.toneBytes(frames: 4 * 48_000), "every sample, none twice (\(acknowledged) s acknowledged before the cut)")
        let probe = try ffprobeStream(path)
        XCTAssertEqual(probe["duration_ts"] as? Int, 4 * 48_000)
    }

    func testAcknowledgedAudioLostWithItsCommitLogIsNamedByBothSidesAndTheSenderFails() throws {
        // The commit log is lost too (the output folder is restored from a backup without it).
        let run = try PowerCutRun(losingTheLog: true)
        let (sender, second, port) = (run.sender, run.second, run.port)
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 1, "the sender fails: \(sender.standardError)")
        XCTAssertEqual(second.stop(), 0, second.child.standardError)
        let senderLines = sender.standardError.split(separator: "\n").map(String.init)
        XCTAssertFalse(sender.standardError.contains("stream delivered"), sender.standardError)
        XCTAssertFalse(sender.standardError.contains("the two join without a hole"), sender.standardError)
        let last = try XCTUnwrap(senderLines.last)
        // Whether the cut also took the stream's index entry decides which of the two the receiver
        // can say; either way the sender names the exact seconds and fails.
        let lostPattern = try NSRegularExpression(pattern: "receiver 127\\.0\\.0\\.1:\(port) lost seconds 0\\.000-([0-9]+\\.[0-9]{3}) of the stream after acknowledging them")
        let unconfirmedPattern = try NSRegularExpression(pattern: "receiver 127\\.0\\.0\\.1:\(port) cannot confirm that it still holds seconds 0\\.000-([0-9]+\\.[0-9]{3}) of the stream, which it acknowledged")
        let range = NSRange(last.startIndex..., in: last)
        let lostMatch = lostPattern.firstMatch(in: last, range: range)
        let match = try XCTUnwrap(lostMatch ?? unconfirmedPattern.firstMatch(in: last, range: range), "the last line names the seconds: \(last)")
        let lostUntil = String(last[try XCTUnwrap(Range(match.range(at: 1), in: last))])
        let lostSeconds = try XCTUnwrap(Double(lostUntil))
        XCTAssertGreaterThanOrEqual(lostSeconds, 1, "at least the second acknowledged before the cut: \(last)")
        XCTAssertLessThan(lostSeconds, 4, last)
        XCTAssertTrue(last.contains("the rest of the stream was delivered, in powercut_"), last)
        let lostFrames = Int((lostSeconds * 48_000).rounded())

        let receiverLog = second.child.standardError
        if lostMatch != nil {
            // The receiver still knew the stream: it says where its recording ends, and the seconds.
            XCTAssertTrue(receiverLog.contains("its recording ends at sample 0"), receiverLog)
            XCTAssertTrue(receiverLog.contains("seconds 0.000-\(lostUntil)"), receiverLog)
        } else {
            // It knew nothing of the stream any more, and says so.
            XCTAssertTrue(receiverLog.contains("continues a stream this receiver no longer knows"), receiverLog)
            XCTAssertTrue(sender.standardError.contains("the receiver cannot confirm that the earlier recording holds everything before the new stream"), sender.standardError)
        }

        // The continuation's file starts where the sender's audio resumed, names the lost audio, and
        // holds exactly the rest of the stream (checked with ffprobe).
        var continuation: CAFFile?
        var continuationPath = ""
        for file in second.files() {
            guard let read = try? CAFFile.read(path: file.path), read.info.contains(where: { $0.key == "first sample" && $0.value == "\(lostFrames)" }) else { continue }
            continuation = read
            continuationPath = file.path
        }
        let file = try XCTUnwrap(continuation, "a file begins where the sender's audio resumed: \(second.files())")
        let info = Dictionary(file.info.map { ($0.key, $0.value) }) { a, _ in a }
        if lostMatch != nil {
            XCTAssertTrue(info["audio lost before this file"]?.hasPrefix("samples 0-\(lostFrames) (seconds 0.000-\(lostUntil)) of stream ") ?? false, "\(info)")
        }
        let probe = try ffprobeStream(continuationPath)
        XCTAssertEqual(probe["duration_ts"] as? Int, 4 * 48_000 - lostFrames, "the rest of the stream, whole")
    }
}

/// A paced 4 s tone recorded onto the power-cut file system, the power cut once the receiver has
/// acknowledged at least a second (the receiver and its file system die together; only fsynced
/// bytes survive), and a receiver restarted on the same port over the surviving bytes, with the
/// commit log lost as well when asked. Everything goes when the run does.
private final class PowerCutRun {
    let work: URL
    let sender: ChildProcess
    let second: ReceiverUnderTest
    let port: Int
    /// The seconds the sender had acknowledged, and so released, at the cut.
    let acknowledged: Double
    private var fileSystem: PowerCutFileSystem?
    /// Killed at the cut, kept: a ReceiverUnderTest removes its output folder when it goes.
    private let first: ReceiverUnderTest

    init(losingTheLog: Bool) throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("powercut-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        chmod(work.path, 0o755)
        let backing = work.appendingPathComponent("disk")
        let mountpoint = work.appendingPathComponent("mnt")
        fileSystem = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        let out = mountpoint.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: false)
        first = try ReceiverUnderTest(outputDirectory: out)
        port = first.port
        sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(port)", "--source", "tone", "--duration", "4", "--stream-name", "powercut", "--buffer-seconds", "0.1",
            "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--status-interval", "0.05", "--log-level", "info",
        ])
        let sender = self.sender
        Resilience.waitUntil("the receiver acknowledged a second of audio") { Resilience.acknowledgedSeconds(sender.standardError) >= 1 }
        first.child.signal(SIGKILL)
        _ = first.child.wait(seconds: 10)
        acknowledged = Resilience.acknowledgedSeconds(sender.standardError)
        fileSystem?.cut()
        if losingTheLog { try FileManager.default.removeItem(at: backing.appendingPathComponent("out/.commit-log")) }
        fileSystem = try PowerCutFileSystem(backing: backing, mountpoint: mountpoint)
        second = try ReceiverUnderTest(outputDirectory: out, port: port)
    }

    deinit {
        if sender.process.isRunning { sender.signal(SIGKILL) }
        fileSystem?.cut()
        try? FileManager.default.removeItem(at: work)
    }
}
