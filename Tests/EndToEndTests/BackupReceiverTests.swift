import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `capture-send MAIN --also BACKUP`: one capture recorded whole by two receivers. The main receiver
/// is killed for 10 s and the backup stalled (SIGSTOP) for 5 s at another time; both files must
/// hold every sample (PCM) or every packet (Opus), and a backup that never answers is given up
/// after `--also-give-up`, named in the exit status and message, without costing the main anything.
final class BackupReceiverTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("backup-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private var spool: URL { work.appendingPathComponent("spool") }

    /// Streams in real time to a main and a backup receiver: the main is killed once ~2 s of audio
    /// is in its file and restarted 10 s later on the same port and folder; once it has resumed, the
    /// backup is stopped for 5 s. Returns both files and the sender's standard error.
    private func streamThroughMainOutageAndBackupStall(_ arguments: [String], name: String) throws -> (main: URL, backup: URL, stderr: String) {
        let mainFolder = work.appendingPathComponent("main")
        let main = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: mainFolder)
        let backup = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let sender = try ChildProcess(Products.send, [main.address, "--also", backup.address, "--stream-name", name]
            + arguments + Resilience.senderOptions(spool: spool))
        Resilience.waitUntil("two seconds of audio are in the main file") { Resilience.size(main.files().first) > 2 * 48_000 * 4 / (arguments.contains("opus") ? 24 : 1) }
        main.child.signal(SIGKILL)
        main.child.wait()
        let backupBefore = Resilience.size(backup.files().first)
        Thread.sleep(forTimeInterval: 10)
        XCTAssertGreaterThan(Resilience.size(backup.files().first), backupBefore, "the backup kept recording while the main was down")
        let restarted = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: mainFolder, port: main.port)
        Resilience.waitUntil("the main receiver resumed the stream") { restarted.child.standardError.contains("stream resumed") }
        backup.child.signal(SIGSTOP)
        Thread.sleep(forTimeInterval: 5)
        backup.child.signal(SIGCONT)
        XCTAssertEqual(Resilience.finish(sender, seconds: 120), 0, sender.standardError)
        XCTAssertEqual(restarted.files().count, 1, "the main stream continues its one file")
        XCTAssertEqual(backup.files().count, 1, "the backup records one file")
        let files = (try XCTUnwrap(restarted.files().first), try XCTUnwrap(backup.files().first))
        // The receivers' folders go with them: keep the files.
        let kept = (work.appendingPathComponent("main.caf"), work.appendingPathComponent("backup.caf"))
        try FileManager.default.copyItem(at: files.0, to: kept.0)
        try FileManager.default.copyItem(at: files.1, to: kept.1)
        XCTAssertEqual(restarted.stop(), 0)
        XCTAssertEqual(backup.stop(), 0)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [], "delivered to both: the stream left the spool")
        return (kept.0, kept.1, sender.standardError)
    }

    func testPCMMainKilledForTenSecondsAndBackupStalledBothFilesBitExact() throws {
        let source = try Resilience.randomWAV(in: work, seconds: 16, seed: 2_020)
        let run = try streamThroughMainOutageAndBackupStall(["--source", "file", "--file", source.path], name: "dual-pcm")
        for (role, file) in [("main", run.main), ("backup", run.backup)] {
            let caf = try CAFFile.read(path: file.path)
            XCTAssertTrue(caf.isFinalized, role)
            XCTAssertEqual(try caf.readAudioData(), source.bytes, "\(role): every sample exactly once, in order")
            let audio = try SndFileReader.read(path: file.path)
            XCTAssertEqual(audio.frames, 768_000, "\(role): libsndfile reads all 16 s")
        }
        XCTAssertTrue(run.stderr.contains("reconnected; the stream resumes in the same file"), run.stderr)
        XCTAssertTrue(run.stderr.contains("stream delivered to backup receiver"), run.stderr)
    }

    func testOpusMainKilledForTenSecondsAndBackupStalledBothFilesPacketExact() throws {
        let opus = ["--source", "tone", "--duration", "16", "--codec", "opus", "--bitrate", "64000"]
        let run = try streamThroughMainOutageAndBackupStall(opus, name: "dual-opus")
        let reference = try ReceiverUnderTest()
        let clean = try runSender([reference.address, "--no-pace", "--stream-name", "dual-opus"] + opus
            + Resilience.senderOptions(spool: work.appendingPathComponent("reference-spool")))
        XCTAssertEqual(clean.status, 0, clean.stderr)
        let expected = try Resilience.packets(of: try XCTUnwrap(reference.files().first).path)
        XCTAssertEqual(expected.count, 801, "16 s of 20 ms packets and one for the lookahead")
        let referenceTable = try CAFFile.read(path: try XCTUnwrap(reference.files().first).path).packetTable
        for (role, file) in [("main", run.main), ("backup", run.backup)] {
            XCTAssertTrue(try Resilience.packets(of: file.path) == expected, "\(role): every packet byte-exact, none missing or repeated")
            XCTAssertEqual(try CAFFile.read(path: file.path).packetTable, referenceTable, role)
            XCTAssertEqual(try Resilience.ffprobePacketCount(file.path), 801, role)
        }
        XCTAssertEqual(reference.stop(), 0)
    }

    func testABackupThatNeverAnswersIsGivenUpAndNamedWhileTheMainGetsEverything() throws {
        let main = try ReceiverUnderTest()
        let deadPort = try ScaleOutTests.freePort()
        let started = Date()
        let result = try runSender([
            main.address, "--also", "127.0.0.1:\(deadPort)", "--also-give-up", "3s", "--source", "tone", "--duration", "6",
            "--stream-name", "lonely",
        ] + Resilience.senderOptions(spool: spool))
        XCTAssertEqual(result.status, 4, result.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 60)
        let lastLine = result.stderr.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(lastLine.contains("the main receiver \(main.address) has the whole stream"), lastLine)
        XCTAssertTrue(lastLine.contains("backup receiver 127.0.0.1:\(deadPort) was unreachable for 3 s (--also-give-up) and was dropped"), lastLine)
        XCTAssertTrue(lastLine.contains("lacks the audio from second 0.000 on"), lastLine)
        XCTAssertTrue(result.stderr.contains("giving up on a backup receiver"), result.stderr)
        let file = try XCTUnwrap(main.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(try caf.readAudioData(), try Resilience.toneBytes(frames: 288_000), "the main file is the whole tone")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [],
                       "the backup's cursor was released: nothing stays in the spool for it")
        XCTAssertEqual(main.stop(), 0)
    }

    func testStoppingWhileOnlyAStalledBackupLacksAudioKeepsNothingAndSaysSo() throws {
        let main = try ReceiverUnderTest()
        let backup = try ReceiverUnderTest()
        backup.child.signal(SIGSTOP)
        defer { backup.child.signal(SIGCONT) }
        let sender = try ChildProcess(Products.send, [
            main.address, "--also", backup.address, "--source", "tone", "--duration", "2", "--no-pace", "--stream-name", "stalled-backup",
            "--stop-timeout", "1",
        ] + Resilience.senderOptions(spool: spool))
        Resilience.waitUntil("the main receiver closed the stream") { main.child.standardError.contains("stream closed") }
        sender.signal(SIGINT)
        XCTAssertEqual(Resilience.finish(sender, seconds: 30), 3, sender.standardError)
        let lastLine = sender.standardError.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(lastLine.contains("delivery stopped by"), lastLine)
        XCTAssertTrue(lastLine.contains("\(main.address) has the whole stream, so nothing stays in the spool; backup receivers are not served from the spool, and what they lack is not kept"), lastLine)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.path), [], "the main has it all: the spool is removed")
        let caf = try CAFFile.read(path: try XCTUnwrap(main.files().first).path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.totalFrames, 96_000)
        XCTAssertEqual(main.stop(), 0)
    }

    func testBadBackupSettingsAreRefusedWithOneClearLine() throws {
        let cases: [([String], String)] = [
            (["--also", "127.0.0.1:7374,colour=blue"], "--also 127.0.0.1:7374,colour=blue: unknown setting 'colour'; the keys are pin, ca, cert, key, token-file, max-rate, priority, codec, bitrate, frame-ms, complexity, bitrate-mode, application"),
            (["--also", "127.0.0.1:7374,max-rate=fast"], "--also 127.0.0.1:7374,max-rate=fast: max-rate=fast is not a rate of 8000 to 10000000000 b/s (8k to 10G); write it as 200000, 200k, 1.5M or 1G"),
            (["--also", "127.0.0.1:7374,max-rate=7k"], "max-rate=7k is not a rate of 8000 to 10000000000 b/s (8k to 10G)"),
            (["--also", "127.0.0.1:7374,max-rate=-200k"], "max-rate=-200k is not a rate"),
            (["--also", "127.0.0.1:7374,priority=urgent"], "--also 127.0.0.1:7374,priority=urgent: priority=urgent is not foreground or background"),
            (["--also", "127.0.0.1:7374,codec=opus,priority=background", "--no-spool"], "the background destination 127.0.0.1:7374 needs a spool: its audio waits there until it is acknowledged, across restarts"),
            (["--also", "127.0.0.1:7374,codec=mp3"], "--also 127.0.0.1:7374,codec=mp3: codec=mp3 is not pcm or opus"),
            (["--also", "127.0.0.1:7374,codec=opus,bitrate=2k"], "--also 127.0.0.1:7374,codec=opus,bitrate=2k: bitrate=2k: "),
            (["--also", "127.0.0.1:7374,codec=opus,frame-ms=7"], "--also 127.0.0.1:7374,codec=opus,frame-ms=7: frame-ms=7: "),
            (["--also", "nowhere"], "--also nowhere: nowhere is not HOST:PORT"),
            (["--also", "127.0.0.1:7374,pin"], "'pin' is not KEY=VALUE"),
            (["--also", "127.0.0.1:7374,pin=00,ca=x.pem"], "give either pin= or ca=, not both"),
            (["--also", "127.0.0.1:7374", "--also-give-up", "soon"], "--also-give-up soon is no duration: write it like 1h, 15m, 10s or 1h30m (1 second to 7 days)"),
        ]
        for (arguments, message) in cases {
            let result = try runSender(["127.0.0.1:7373", "--source", "tone", "--duration", "1"] + arguments)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        let help = try ToolRunner.run(Products.send, ["--help"])
        XCTAssertTrue(help.outputText.contains("--also-give-up <DURATION>"), help.outputText)
        XCTAssertTrue(help.outputText.contains("(default: 1h)"), help.outputText)
    }
}
