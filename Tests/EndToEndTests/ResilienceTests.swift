import CAF
import CSndFile
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// "Never lose audio": the real executables through a fault-injecting proxy, with receivers and
/// senders killed mid-stream, and a receiver that cannot write. Every stream must end up in one
/// file, complete, exactly once.
final class ResilienceTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("resilience-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private func spool(_ name: String = "spool") -> URL { work.appendingPathComponent(name) }

    private func randomWAV(seconds: Double, seed: UInt64) throws -> (path: String, bytes: [UInt8]) {
        try Resilience.randomWAV(in: work, seconds: seconds, seed: seed)
    }

    // MARK: - Through the fault proxy

    func testPCMThroughConnectionsResetMidFrameArrivesBitExactInOneFile() throws {
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: 0x5EED_0001)
        proxy.mode = .resetAfterRandomBytes(30_000...400_000)
        let source = try randomWAV(seconds: 8, seed: 42)
        let result = try runSender([
            "127.0.0.1:\(proxy.port)", "--source", "file", "--file", source.path, "--no-pace", "--stream-name", "resets",
            "--buffer-seconds", "0.05",
        ] + Resilience.senderOptions(spool: spool()))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertGreaterThanOrEqual(proxy.resetConnections, 3, "the proxy must really have cut connections mid-stream")
        XCTAssertTrue(result.stderr.contains("resumed=true"), "the sender resumed the stream: \(result.stderr)")

        XCTAssertEqual(receiver.files().count, 1, "one file for the stream, however many connections")
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(try caf.readAudioData(), source.bytes, "every sample exactly once, in order")
        let audio = try SndFileReader.read(path: file.path)
        XCTAssertEqual(audio.frames, source.bytes.count / 4, "libsndfile reads the whole stream")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool().path), [], "the delivered stream left the spool")
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testOpusThroughStallThrottleBlackHoleAndResetsArrivesPacketExact() throws {
        let opus = ["--source", "tone", "--codec", "opus", "--bitrate", "64000", "--duration", "6", "--stream-name", "opus-faults"]
        // The reference: the same tone, encoded the same way, over a clean connection.
        let reference = try ReceiverUnderTest()
        let clean = try runSender([reference.address, "--no-pace"] + opus + Resilience.senderOptions(spool: spool("reference-spool")))
        XCTAssertEqual(clean.status, 0, clean.stderr)
        let expected = try Resilience.packets(of: try XCTUnwrap(reference.files().first).path)
        XCTAssertEqual(expected.count, 301, "6 s of 20 ms packets, and one more for the encoder's lookahead")

        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: 0x5EED_0002)
        let sender = try ChildProcess(Products.send, ["127.0.0.1:\(proxy.port)"] + opus + Resilience.senderOptions(spool: spool()))
        Resilience.waitUntil("the stream's file appears") { !receiver.files().isEmpty }
        proxy.mode = .stall
        usleep(1_000_000)
        proxy.mode = .throttle(bytesPerSecond: 2_000)
        usleep(1_000_000)
        proxy.mode = .blackHole  // half-open: both sides must notice by their idle timeouts
        let before = proxy.acceptedConnections
        Resilience.waitUntil("the sender declares the silent connection dead and reconnects") { proxy.acceptedConnections > before }
        proxy.mode = .resetAfterRandomBytes(200...5_000)
        Resilience.waitUntil("connections are cut mid-frame") { proxy.resetConnections >= 2 }
        proxy.mode = .pass
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("considered dead"), "the black hole was detected by the idle timeout: \(sender.standardError)")

        XCTAssertEqual(receiver.files().count, 1, "one file for the stream")
        let file = try XCTUnwrap(receiver.files().first).path
        let received = try Resilience.packets(of: file)
        XCTAssertEqual(received.count, expected.count, "no packet lost or repeated")
        XCTAssertTrue(received == expected, "every packet arrives byte-exact, in order")
        let table = try XCTUnwrap(CAFFile.read(path: file).packetTable)
        let referenceTable = try XCTUnwrap(CAFFile.read(path: try XCTUnwrap(reference.files().first).path).packetTable)
        XCTAssertEqual(table, referenceTable, "the same packet table, priming and remainder")
        XCTAssertEqual(try Resilience.ffprobePacketCount(file), expected.count, "ffprobe reads every packet")
        XCTAssertEqual(receiver.stop(), 0)
        XCTAssertEqual(reference.stop(), 0)
    }

    // MARK: - Receiver killed

    /// Starts a paced tone sender through a proxy, SIGKILLs the receiver once `killAfterBytes` are
    /// in the file (a file gets its audio 8 KiB at a time), restarts it on the same folder, points the
    /// proxy at it, and returns the finished file.
    private func killReceiverMidStream(
        codecArguments: [String], name: String, killAfterBytes: Int = 40_000
    ) throws -> (file: URL, sender: ChildProcess, receiver: ReceiverUnderTest, first: ReceiverUnderTest) {
        let output = work.appendingPathComponent("out")
        let first = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: output)
        let proxy = try FaultProxy(upstreamPort: first.port, seed: 7)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "5", "--stream-name", name,
        ] + codecArguments + Resilience.senderOptions(spool: spool()))
        Resilience.waitUntil("audio is in the file") { Resilience.size(first.files().first) > killAfterBytes }
        first.child.signal(SIGKILL)
        first.child.wait()
        let second = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: output)
        proxy.upstreamPort = second.port
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        XCTAssertTrue(second.child.standardError.contains("waiting for its sender to resume it"), second.child.standardError)
        XCTAssertTrue(second.child.standardError.contains("stream resumed"), second.child.standardError)
        XCTAssertEqual(second.files().count, 1, "the resumed stream continues the same file")
        return (try XCTUnwrap(second.files().first), sender, second, first)
    }

    func testReceiverKilledMidStreamPCMContinuesTheSameFileWithoutHoleOrDuplicate() throws {
        let run = try killReceiverMidStream(codecArguments: [], name: "pcm-kill")
        let caf = try CAFFile.read(path: run.file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.totalFrames, 240_000)
        XCTAssertEqual(try caf.readAudioData(), try Resilience.toneBytes(frames: 240_000), "the tone, sample-exact, no hole and no duplicate")
        let audio = try SndFileReader.read(path: run.file.path)
        XCTAssertEqual(audio.frames, 240_000)
        XCTAssertFalse(FileManager.default.fileExists(atPath: run.file.path + ".position"), "a finished file keeps no position log")
        XCTAssertFalse(FileManager.default.fileExists(atPath: run.file.path + ".pakt-journal"))
        XCTAssertEqual(run.receiver.stop(), 0)
    }

    func testReceiverKilledMidStreamOpusKeepsEveryPacketAndItsPacketTable() throws {
        let opus = ["--codec", "opus", "--bitrate", "64000"]
        // 5 s at 64 kb/s are 40 kB in all: killed once the first 8 KiB (a second) are in the file.
        let run = try killReceiverMidStream(codecArguments: opus, name: "opus-kill", killAfterBytes: 8_192)
        let reference = try ReceiverUnderTest()
        let clean = try runSender([reference.address, "--source", "tone", "--duration", "5", "--no-pace", "--stream-name", "opus-kill"] + opus + Resilience.senderOptions(spool: spool("reference-spool")))
        XCTAssertEqual(clean.status, 0, clean.stderr)
        let referenceFile = try XCTUnwrap(reference.files().first).path

        let received = try Resilience.packets(of: run.file.path)
        XCTAssertEqual(received.count, 251, "5 s of 20 ms packets and one for the lookahead")
        XCTAssertTrue(received == (try Resilience.packets(of: referenceFile)), "every packet byte-exact, none missing or repeated")
        XCTAssertEqual(try CAFFile.read(path: run.file.path).packetTable, try CAFFile.read(path: referenceFile).packetTable)
        XCTAssertEqual(try Resilience.ffprobePacketCount(run.file.path), 251)
        let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", run.file.path, "-f", "null", "-"])
        XCTAssertTrue(decoded.succeeded, "ffmpeg decodes the recovered file: \(decoded.errorText)")
        XCTAssertEqual(run.receiver.stop(), 0)
        XCTAssertEqual(reference.stop(), 0)
    }

    func testReceiverKilledThenRecoverCommandKeepsEveryAcknowledgedOpusPacket() throws {
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "30", "--stream-name", "opus-recover", "--codec", "opus", "--status-interval", "0.05",
        ] + Resilience.senderOptions(spool: spool()))
        Resilience.waitUntil("a second is acknowledged") { Resilience.acknowledgedSeconds(sender.standardError) >= 1 }
        receiver.child.signal(SIGKILL)
        receiver.child.wait()
        sender.signal(SIGKILL)
        sender.wait()
        let path = try XCTUnwrap(receiver.files().first).path
        // What the receiver acknowledged (20 ms packets): in its commit log, not yet all in the file's
        // position log, which only checkpoints write.
        let acknowledgedPackets = Int64(Resilience.acknowledgedSeconds(sender.standardError) * 50)
        XCTAssertGreaterThan(acknowledgedPackets, 0)

        let recovered = try ToolRunner.run(Products.recv, ["recover", path])
        XCTAssertTrue(recovered.succeeded, recovered.errorText)
        XCTAssertTrue(recovered.outputText.contains("replayed 1 commit log into the recordings of"), recovered.outputText)
        let caf = try CAFFile.read(path: path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertGreaterThanOrEqual(caf.packetCount ?? 0, acknowledgedPackets, "no acknowledged packet is missing")
        XCTAssertEqual(try Resilience.ffprobePacketCount(path), Int(caf.packetCount ?? -1))
        let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
    }


    // MARK: - Sender killed

    func testSenderKilledThenRestartedWithTheSameSpoolDeliversEverythingItSpooled() throws {
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: 11)
        let killed = try ChildProcess(Products.send, [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "60", "--stream-name", "killed",
        ] + Resilience.senderOptions(spool: spool()))
        Resilience.waitUntil("a second of audio is in the file") { Resilience.size(receiver.files().first) > 192_000 }
        // Hold the network so the spool holds audio the receiver never saw, then kill the sender.
        proxy.mode = .stall
        let bytesAtStall = Resilience.size(receiver.files().first)
        usleep(1_500_000)
        killed.signal(SIGKILL)
        killed.wait()
        let folders = try FileManager.default.contentsOfDirectory(atPath: spool().path).filter { UUID(uuidString: $0) != nil }
        XCTAssertEqual(folders.count, 1, "the killed stream's spool folder is there")
        let spooledEnd = try Resilience.spooledEnd(streamFolder: spool().appendingPathComponent(try XCTUnwrap(folders.first)))
        XCTAssertGreaterThan(spooledEnd, bytesAtStall / 4 + 24_000, "the spool holds at least half a second the receiver did not have")
        proxy.mode = .pass

        // The earlier stream belongs to the receiver it was sent to (here the proxy's address): the
        // restarted run names the same one.
        let restarted = try runSender([
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "0.5", "--no-pace", "--stream-name", "after-restart",
        ] + Resilience.senderOptions(spool: spool()))
        XCTAssertEqual(restarted.status, 0, restarted.stderr)
        XCTAssertTrue(restarted.stderr.contains("earlier stream delivered"), restarted.stderr)

        let killedFile = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("killed_") })
        let caf = try CAFFile.read(path: killedFile.path)
        XCTAssertTrue(caf.isFinalized, "the earlier stream was ended and its file finalized")
        XCTAssertEqual(caf.totalFrames, spooledEnd, "everything spooled before the kill arrived")
        XCTAssertEqual(try caf.readAudioData(), try Resilience.toneBytes(frames: Int(spooledEnd)), "sample-exact, no hole, no duplicate")
        XCTAssertNotNil(receiver.files().first { $0.lastPathComponent.hasPrefix("after-restart_") })
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool().path).filter { UUID(uuidString: $0) != nil }, [],
                       "delivered streams are removed from the spool")
        XCTAssertEqual(receiver.stop(), 0)
    }

    // MARK: - Receiver that cannot write

    func testReceiverOnAFullDiskStopsAcknowledgingAndLosesNothingOnceItCanWriteAgain() throws {
        let disk = work.appendingPathComponent("tiny-disk")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", disk.path])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a tmpfs here (needs root): \(mounted.errorText)") }
        defer { _ = try? ToolRunner.run("umount", ["-l", disk.path]) }
        let output = disk.appendingPathComponent("out")
        // The recordings' disk fills; the commit log is on another volume (--log-dir), as a receiver
        // recording onto a small or shared volume would keep it.
        let receiver = try ReceiverUnderTest(
            extraArguments: Resilience.receiverOptions + ["--log-dir", work.appendingPathComponent("log").path], outputDirectory: output)
        let source = try randomWAV(seconds: 6, seed: 7)  // 1.1 MB: more than the disk holds
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "file", "--file", source.path, "--no-pace", "--stream-name", "full-disk",
            "--buffer-seconds", "0.05",
        ] + Resilience.senderOptions(spool: spool()))
        Resilience.waitUntil("the receiver reports that it cannot write") { receiver.child.standardError.contains("cannot write the stream") }
        Resilience.waitUntil("the sender is told why and retries") { sender.standardError.contains("reconnecting") }
        XCTAssertTrue(sender.process.isRunning, "the sender keeps its audio and keeps trying")
        let grown = try ToolRunner.run("mount", ["-o", "remount,size=64m", disk.path])
        XCTAssertTrue(grown.succeeded, grown.errorText)
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        XCTAssertEqual(receiver.files().count, 1)
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertEqual(try CAFFile.read(path: file.path).readAudioData(), source.bytes, "nothing lost, nothing repeated")
        XCTAssertEqual(receiver.stop(), 0)
    }
}
