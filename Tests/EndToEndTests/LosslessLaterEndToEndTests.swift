import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// "Lossless later" (issue 29, item 2), with the real executables as the unprivileged user: live
/// Opus 64k and PCM marked `priority=background` from one tone, both through one thin uplink (the
/// proxy's `.sharedLink`: one first-in first-out queue for every connection, like a field unit's
/// modem, drained at 200 kb/s). The Opus stream is acknowledged live; the PCM stream waits for the
/// link's spare capacity and is completed after the capture, bit-exact, by the same run, by
/// `capture-send spool deliver` after a Ctrl-C, or by the next run after a SIGKILL.
final class LosslessLaterEndToEndTests: XCTestCase {
    private var work: URL!
    /// 200 kb/s.
    private static let linkBytesPerSecond = 25_000
    /// 20 s of the link: a modem's deep buffer, which a sender that filled it would wait behind.
    private static let linkBufferBytes = 500_000

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("lossless-later-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    /// The JSON status lines a sender wrote so far.
    private static func statusLines(_ standardError: String) -> [[String: Any]] {
        standardError.split(separator: "\n").compactMap { line in
            guard line.contains("\"message\":\"status\"") else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }

    /// An encoding's (acknowledged, backlog) seconds in a status line.
    private static func encoding(_ label: String, in status: [String: Any]) -> (acked: Double, backlog: Double)? {
        guard let list = status["encodings"] as? [[String: Any]], let entry = list.first(where: { $0["encoding"] as? String == label }),
              let acked = entry["acked_s"] as? Double, let backlog = entry["backlog_s"] as? Double
        else { return nil }
        return (acked, backlog)
    }

    /// The sender's arguments: live Opus to the proxy, PCM in the background to the same receiver
    /// through the same proxy, buffers of 0.1 s (what one background entry costs the live stream on
    /// a thin link), ten of them (a second of slack for a loaded machine), JSON status every half
    /// second.
    private func senderArguments(proxy: FaultProxy, name: String, spool: URL, duration: Int?) -> [String] {
        var arguments = [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--codec", "opus", "--bitrate", "64k", "--buffer-seconds", "0.1",
            "--buffers", "10", "--stream-name", name, "--also", "127.0.0.1:\(proxy.port),codec=pcm,priority=background", "--spool", spool.path,
            "--log-format", "json", "--status-interval", "0.5",
        ]
        if let duration { arguments += ["--duration", "\(duration)"] }
        return arguments
    }

    /// A receiver behind the thin uplink, and a sender of `name` started through it with its spool.
    private func startThroughTheThinLink(name: String, seed: UInt64, duration: Int?) throws
        -> (receiver: ReceiverUnderTest, proxy: FaultProxy, spool: URL, sender: ChildProcess)
    {
        let receiver = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("out"))
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: seed)
        proxy.mode = .sharedLink(bytesPerSecond: Self.linkBytesPerSecond, bufferBytes: Self.linkBufferBytes)
        let spool = work.appendingPathComponent("spool")
        let sender = try ChildProcess(Products.send, senderArguments(proxy: proxy, name: name, spool: spool, duration: duration))
        return (receiver, proxy, spool, sender)
    }

    private func pcmFile(_ receiver: ReceiverUnderTest, name: String) throws -> CAFFile {
        let file = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("\(name)-pcm") }, "\(receiver.files())")
        return try CAFFile.read(path: file.path)
    }

    func testOpusIsLiveOverAThinLinkAndThePCMCompletesAfterTheCaptureBitExact() throws {
        let (receiver, proxy, _, sender) = try startThroughTheThinLink(name: "field", seed: 29, duration: 30)
        // The capture's 30 s go by; then the link gets better (the crew is back at base) and the
        // PCM that waited is delivered by the same run.
        Resilience.waitUntil("30 s captured", seconds: 300) {
            (Self.statusLines(sender.standardError).last?["captured_s"] as? Double ?? 0) >= 30 || !sender.process.isRunning
        }
        let live = Self.statusLines(sender.standardError).filter { ($0["captured_s"] as? Double ?? 0) < 30 }
        proxy.mode = .pass
        let status = sender.wait(seconds: 300)
        XCTAssertEqual(status, 0, sender.standardError)

        // Live: the Opus stream's backlog (captured, not acknowledged) at every status line of
        // the capture, p99 ≤ 1.5 s.
        let opusBacklogs = live.compactMap { Self.encoding("opus-64k-20ms", in: $0)?.backlog }.sorted()
        XCTAssertGreaterThanOrEqual(opusBacklogs.count, 40, "a status line every half second: \(live.count)")
        let p99 = opusBacklogs[min(opusBacklogs.count - 1, Int((Double(opusBacklogs.count) * 0.99).rounded(.up)) - 1)]
        XCTAssertLessThanOrEqual(p99, 1.5, "the live stream's backlog: \(opusBacklogs)")
        // The PCM (1.5 Mb/s) cannot cross a 200 kb/s link live: it fell behind, yet used the
        // capacity the live stream left.
        let lastLive = try XCTUnwrap(live.last.flatMap { Self.encoding("pcm-s16-48000", in: $0) })
        XCTAssertGreaterThan(lastLive.backlog, 20, "the PCM waited")
        XCTAssertGreaterThan(lastLive.acked, 0, "the background used the link's spare capacity")

        // After the capture, the PCM is complete, the tone bit for bit; the Opus stream too.
        let pcm = try pcmFile(receiver, name: "field")
        XCTAssertTrue(pcm.isFinalized)
        XCTAssertEqual(try pcm.readAudioData(), try Resilience.toneBytes(frames: 30 * 48_000), "bit-exact")
        let opusURL = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("field") && !$0.lastPathComponent.hasPrefix("field-pcm") })
        let opus = try CAFFile.read(path: opusURL.path)
        XCTAssertTrue(opus.isFinalized)
        XCTAssertEqual(opus.packetTable?.validFrames, 30 * 48_000)
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// The first Ctrl-C waits for the live stream only: the run ends once the Opus stream is
    /// delivered, exit 0, with a final line naming the PCM left in the spool; `capture-send spool
    /// deliver` then delivers it, bit-exact.
    func testAStopWaitsForTheLiveStreamOnlyAndSpoolDeliverCompletesThePCM() throws {
        let (receiver, proxy, spool, sender) = try startThroughTheThinLink(name: "stopped", seed: 30, duration: nil)
        Resilience.waitUntil("6 s captured", seconds: 300) {
            (Self.statusLines(sender.standardError).last?["captured_s"] as? Double ?? 0) >= 6 || !sender.process.isRunning
        }
        sender.signal(SIGINT)
        let status = sender.wait(seconds: 300)
        XCTAssertEqual(status, 0, sender.standardError)
        let lastLine = try XCTUnwrap(sender.standardError.split(separator: "\n").last.map(String.init))
        let last = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(lastLine.utf8)) as? [String: Any], lastLine)
        XCTAssertEqual(last["level"] as? String, "warning", "nothing is lost: a warning, not an error line")
        let finalLine = try XCTUnwrap(last["message"] as? String)
        XCTAssertTrue(finalLine.contains("has the whole stream"), finalLine)
        XCTAssertTrue(finalLine.contains("background pcm-s16-48000 to 127.0.0.1:\(proxy.port)"), finalLine)
        XCTAssertTrue(finalLine.contains("stays in the spool at \(spool.path)"), finalLine)
        XCTAssertTrue(finalLine.contains("capture-send spool deliver"), finalLine)
        let opusURL = try XCTUnwrap(receiver.files().first { !$0.lastPathComponent.hasPrefix("stopped-pcm") })
        let opus = try CAFFile.read(path: opusURL.path)
        XCTAssertTrue(opus.isFinalized, "the live stream was delivered before the run ended")
        let frames = try XCTUnwrap(opus.packetTable?.validFrames)
        XCTAssertGreaterThanOrEqual(frames, 6 * 48_000)
        XCTAssertFalse((try? pcmFile(receiver, name: "stopped"))?.isFinalized ?? false, "the PCM was not complete when the run ended")

        proxy.mode = .pass
        let delivered = try runSender(["spool", "deliver", "--spool", spool.path], timeout: 300)
        XCTAssertEqual(delivered.status, 0, delivered.stderr)
        let pcm = try pcmFile(receiver, name: "stopped")
        XCTAssertTrue(pcm.isFinalized)
        XCTAssertEqual(pcm.totalFrames, frames, "the same capture in both encodings")
        XCTAssertEqual(try pcm.readAudioData(), try Resilience.toneBytes(frames: Int(frames)), "bit-exact")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// A restart between the two: the sender is killed (SIGKILL) after the capture, with the PCM
    /// still pending; the next run, to the same receivers with the same spool, delivers it bit-exact.
    func testAfterASIGKILLTheNextRunDeliversThePendingPCMBitExact() throws {
        let (receiver, proxy, spool, sender) = try startThroughTheThinLink(name: "killed", seed: 31, duration: 6)
        // The capture is over and the live stream acknowledged to its end; the PCM is not.
        Resilience.waitUntil("the Opus stream acknowledged to its end", seconds: 300) {
            guard let last = Self.statusLines(sender.standardError).last, let opus = Self.encoding("opus-64k-20ms", in: last) else {
                return !sender.process.isRunning
            }
            return opus.acked >= 6 || !sender.process.isRunning
        }
        let pending = try XCTUnwrap(Self.statusLines(sender.standardError).last.flatMap { Self.encoding("pcm-s16-48000", in: $0) })
        XCTAssertGreaterThan(pending.backlog, 1, "the PCM is still pending")
        sender.signal(SIGKILL)
        _ = sender.wait(seconds: 60)
        // The spool remembers the PCM is a background stream: the next run delivers it behind its live one.
        let metas = try FileManager.default.contentsOfDirectory(atPath: spool.path).compactMap { folder -> [String: Any]? in
            guard let data = FileManager.default.contents(atPath: spool.appendingPathComponent(folder).appendingPathComponent("meta.json").path) else { return nil }
            return try JSONSerialization.jsonObject(with: data) as? [String: Any]
        }
        XCTAssertEqual(metas.first { $0["streamName"] as? String == "killed-pcm-s16-48000" }?["background"] as? Bool, true, "\(metas)")
        XCTAssertNil(metas.first { $0["streamName"] as? String == "killed" }?["background"], "the live stream is not")

        proxy.mode = .pass
        let next = try runSender(senderArguments(proxy: proxy, name: "next", spool: spool, duration: 1) + ["--no-pace"], timeout: 300)
        XCTAssertEqual(next.status, 0, next.stderr)
        let pcm = try pcmFile(receiver, name: "killed")
        XCTAssertTrue(pcm.isFinalized)
        XCTAssertEqual(pcm.totalFrames, 6 * 48_000)
        XCTAssertEqual(try pcm.readAudioData(), try Resilience.toneBytes(frames: 6 * 48_000), "bit-exact")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// `max-rate=400k` on a backup: over every stretch of the transfer, what crossed towards it is
    /// at most 50,000 bytes a second, plus the quarter-second burst and the entries in flight; the
    /// backup still gets the whole stream, bit-exact.
    func testMaxRateCapsWhatABackupIsSent() throws {
        let main = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("main"))
        let backup = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("backup"))
        let proxy = try FaultProxy(upstreamPort: backup.port, seed: 32)
        let sent = try runSender([
            "127.0.0.1:\(main.port)", "--source", "tone", "--duration", "2", "--no-pace", "--buffer-seconds", "0.1", "--stream-name", "capped",
            "--also", "127.0.0.1:\(proxy.port),max-rate=400k", "--spool", work.appendingPathComponent("spool").path,
        ], timeout: 300)
        XCTAssertEqual(sent.status, 0, sent.stderr)
        let traffic = proxy.upstreamTraffic
        let total = traffic.reduce(0) { $0 + $1.bytes }
        XCTAssertGreaterThan(total, 2 * 192_000, "the whole stream crossed")
        let entryBytes = 19_200.0
        let slack = 12_500 + 2 * entryBytes + 8_192
        var worst = 0.0
        for first in traffic.indices {
            var bytes = 0
            for last in first..<traffic.count {
                bytes += traffic[last].bytes
                let allowed = 50_000 * (traffic[last].time - traffic[first].time) + slack
                worst = max(worst, Double(bytes) - allowed)
            }
        }
        XCTAssertLessThanOrEqual(worst, 0, "bytes beyond the rate over some stretch")
        let span = (traffic.last?.time ?? 0) - (traffic.first?.time ?? 0)
        XCTAssertGreaterThanOrEqual(span, (Double(total) - slack) / 50_000, "the transfer took as long as the rate says")
        for receiver in [main, backup] {
            let caf = try CAFFile.read(path: try XCTUnwrap(receiver.files().first).path)
            XCTAssertTrue(caf.isFinalized)
            XCTAssertEqual(try caf.readAudioData(), try Resilience.toneBytes(frames: 2 * 48_000), "bit-exact")
        }
        XCTAssertEqual(main.stop(), 0)
        XCTAssertEqual(backup.stop(), 0)
    }

    /// `--spool-max` covers every encoding, and the background gives way first: with a 1 MiB spool
    /// and the background receiver unreachable, the PCM stops being kept at half of it, with one
    /// loud line naming the encoding, the receiver and the local file its audio goes to, while the
    /// live Opus stream is delivered whole. A Ctrl-C leaves the PCM in the spool; delivered later,
    /// its recording has a gap naming that file, which holds the missing audio, bit-exact.
    func testWhenTheSpoolRunsOutTheBackgroundGivesWayFirstAndSaysWhere() throws {
        let receiver = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("out"))
        let proxy = try FaultProxy(upstreamPort: receiver.port, seed: 33)
        proxy.mode = .stall
        let spool = work.appendingPathComponent("spool")
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(receiver.port)", "--source", "tone", "--duration", "5", "--no-pace", "--codec", "opus", "--bitrate", "64k",
            "--stream-name", "full", "--also", "127.0.0.1:\(proxy.port),codec=pcm,priority=background", "--spool", spool.path,
            "--spool-max", "1M", "--log-format", "json",
        ])
        Resilience.waitUntil("the live stream delivered and the spool full", seconds: 120) {
            let opusDone = receiver.files().contains { !$0.lastPathComponent.hasPrefix("full-pcm") && ((try? CAFFile.read(path: $0.path))?.isFinalized ?? false) }
            return (opusDone && sender.standardError.contains("THE SPOOL IS FULL")) || !sender.process.isRunning
        }
        sender.signal(SIGINT)
        XCTAssertEqual(sender.wait(seconds: 120), 0, sender.standardError)
        let lines = sender.standardError.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let full = lines.filter { ($0["message"] as? String)?.contains("THE SPOOL IS FULL") ?? false }
        XCTAssertEqual(full.count, 1, "said once: \(sender.standardError)")
        let warning = try XCTUnwrap(full.first)
        XCTAssertEqual(warning["level"] as? String, "critical")
        let message = try XCTUnwrap(warning["message"] as? String)
        XCTAssertTrue(message.contains("the background encoding pcm-s16-48000 for 127.0.0.1:\(proxy.port) gives way to the live stream"), message)
        let overflowPath = try XCTUnwrap(warning["file"] as? String, "\(warning)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: overflowPath), overflowPath)

        // The live stream lost nothing.
        let opus = try CAFFile.read(path: try XCTUnwrap(receiver.files().first { !$0.lastPathComponent.hasPrefix("full-pcm") }).path)
        XCTAssertTrue(opus.isFinalized)
        XCTAssertEqual(opus.packetTable?.validFrames, 5 * 48_000)
        XCTAssertTrue(opus.markers.isEmpty, "\(opus.markers)")

        // Delivered later: the PCM up to the gap, the gap naming the file, the file holding its audio.
        proxy.mode = .pass
        let delivered = try runSender(["spool", "deliver", "--spool", spool.path], timeout: 300)
        XCTAssertEqual(delivered.status, 0, delivered.stderr)
        let pcm = try pcmFile(receiver, name: "full")
        XCTAssertTrue(pcm.isFinalized)
        XCTAssertEqual(pcm.totalFrames, 5 * 48_000)
        let gap = try XCTUnwrap(pcm.markers.first { $0.name.contains(overflowPath) }, "\(pcm.markers)")
        let gapFrames = try XCTUnwrap(Int(gap.name.split(separator: " ")[1]))
        let start = Int(gap.framePosition)
        XCTAssertGreaterThan(start, 0)
        XCTAssertLessThanOrEqual(start * 4, 1 << 19, "the background kept at most half of --spool-max")
        let tone = try Resilience.toneBytes(frames: 5 * 48_000)
        let audio = try pcm.readAudioData()
        XCTAssertEqual(Array(audio[0..<(start * 4)]), Array(tone[0..<(start * 4)]), "bit-exact up to the gap")
        let kept = try CAFFile.read(path: overflowPath)
        XCTAssertEqual(try kept.readAudioData(), Array(tone[(start * 4)..<((start + gapFrames) * 4)]), "the local file holds what the gap lacks")
        XCTAssertEqual(receiver.stop(), 0)
    }
}
