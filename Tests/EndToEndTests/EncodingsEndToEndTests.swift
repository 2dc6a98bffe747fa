import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// One capture, several encodings (issue 29, item 1), with the real executables as the unprivileged
/// user: capture-send sends PCM to the main receiver and Opus 64k to a backup from one tone. The
/// PCM file is bit-exact against the tone, the Opus file packet-exact against a clean Opus run of
/// the same capture; both files and both receivers' API rows name the same capture, each with its
/// encoding.
final class EncodingsEndToEndTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("encodings-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    private func info(_ caf: CAFFile, _ key: String) -> String? { caf.info.first { $0.key == key }?.value }

    /// The first row of a receiver's `/api/streams`.
    private func row(_ port: Int) throws -> [String: Any] {
        let response = try OpsHTTPClient.request(port: port, path: "/api/streams")
        XCTAssertEqual(response.status, 200)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [[String: Any]])
        return try XCTUnwrap(rows.first)
    }

    func testPCMToTheMainAndOpusToABackupFromOneToneEachExact() throws {
        let main = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"], outputDirectory: work.appendingPathComponent("main"))
        let backup = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"], outputDirectory: work.appendingPathComponent("backup"))
        let sent = try runSender([
            "127.0.0.1:\(main.port)", "--source", "tone", "--duration", "3", "--no-pace", "--stream-name", "field",
            "--also", "127.0.0.1:\(backup.port),codec=opus,bitrate=64k", "--spool", work.appendingPathComponent("spool").path,
        ])
        XCTAssertEqual(sent.status, 0, sent.stderr)

        // A clean Opus run of the same capture, to a receiver of its own.
        let clean = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("clean"))
        let alone = try runSender([
            "127.0.0.1:\(clean.port)", "--source", "tone", "--duration", "3", "--no-pace", "--stream-name", "alone", "--codec", "opus",
            "--bitrate", "64k", "--spool", work.appendingPathComponent("spool-alone").path,
        ])
        XCTAssertEqual(alone.status, 0, alone.stderr)

        let pcmFile = try XCTUnwrap(main.files().first)
        let opusFile = try XCTUnwrap(backup.files().first)
        let pcm = try CAFFile.read(path: pcmFile.path)
        let opus = try CAFFile.read(path: opusFile.path)
        let reference = try CAFFile.read(path: try XCTUnwrap(clean.files().first).path)
        XCTAssertTrue(pcm.isFinalized && opus.isFinalized)
        XCTAssertEqual(try pcm.readAudioData(), try Resilience.toneBytes(frames: 3 * 48_000), "the PCM stream is the tone, bit for bit")
        XCTAssertEqual(opus.packetTable?.packetSizes, reference.packetTable?.packetSizes, "packet for packet")
        XCTAssertEqual(try opus.readAudioData(), try reference.readAudioData(), "byte for byte")
        XCTAssertEqual(opus.packetTable?.primingFrames, reference.packetTable?.primingFrames)
        XCTAssertEqual(opus.packetTable?.remainderFrames, reference.packetTable?.remainderFrames)

        // Linked: the same capture id in both files and both APIs, each stream with its encoding.
        let captureID = try XCTUnwrap(info(pcm, "capture id"))
        XCTAssertEqual(info(opus, "capture id"), captureID)
        XCTAssertEqual(info(pcm, "capture encoding"), "pcm-s16-48000")
        XCTAssertEqual(info(opus, "capture encoding"), "opus-64k-20ms")
        XCTAssertNotEqual(info(pcm, "stream id"), info(opus, "stream id"), "each encoding is a stream of its own")
        XCTAssertEqual(info(pcm, "title"), "field")
        XCTAssertEqual(info(opus, "title"), "field-opus-64k-20ms")
        XCTAssertNil(info(reference, "capture id"), "a capture of one encoding names no capture")
        let mainRow = try row(try main.httpPort())
        let backupRow = try row(try backup.httpPort())
        XCTAssertEqual(mainRow["capture_id"] as? String, captureID)
        XCTAssertEqual(backupRow["capture_id"] as? String, captureID)
        XCTAssertEqual(mainRow["encoding"] as? String, "pcm-s16-48000")
        XCTAssertEqual(backupRow["encoding"] as? String, "opus-64k-20ms")
        XCTAssertEqual(main.stop(), 0)
        XCTAssertEqual(backup.stop(), 0)
        XCTAssertEqual(clean.stop(), 0)
    }

    /// A capture overrun (the sender stopped with SIGSTOP for 2 s while its paced tone runs on, with
    /// a queue of two 20 ms buffers, so the catching up overruns it) is a gap at the same sample time
    /// and of the same length in the PCM stream and in the Opus stream of one capture.
    func testAnOverrunIsAGapAtTheSameSampleTimeInEveryEncoding() throws {
        let main = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("main"))
        let backup = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("backup"))
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(main.port)", "--source", "tone", "--duration", "5", "--buffers", "2", "--buffer-seconds", "0.02",
            "--stream-name", "overrun", "--also", "127.0.0.1:\(backup.port),codec=opus,bitrate=64k", "--no-spool",
        ])
        // A second of audio at the main receiver, then the sender stops for 2 s.
        Resilience.waitUntil("a second of audio at the main receiver", seconds: 120) {
            ((main.files().first.flatMap { try? FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? UInt64 }) ?? 0) > 48_000 * 4
                || !sender.process.isRunning
        }
        sender.signal(SIGSTOP)
        usleep(2_000_000)
        sender.signal(SIGCONT)
        let status = sender.wait(seconds: 120)
        guard sender.standardError.contains("capture overruns") else {
            throw XCTSkip("the sender caught up without an overrun this time, so there was nothing to check: \(sender.standardError)")
        }
        XCTAssertEqual(status, 0, sender.standardError)
        let pcm = try CAFFile.read(path: try XCTUnwrap(main.files().first).path)
        let opus = try CAFFile.read(path: try XCTUnwrap(backup.files().first).path)
        let pcmGaps = pcm.markers.filter { $0.name.hasSuffix("(overrun)") }
        XCTAssertFalse(pcmGaps.isEmpty, "the PCM stream records the overrun: \(pcm.markers)")
        XCTAssertEqual(pcm.totalFrames, 5 * 48_000, "the PCM timeline is the capture's, gaps included")
        // A loss at the very end (a loaded machine) has no audio after it: Opus, whose packets
        // carry a loss as silence, ends before it and does not label it.
        let frames = { (marker: CAFMarker) in Int64(marker.name.split(separator: " ")[1]) ?? 0 }
        let trailing = pcmGaps.last.map { $0.framePosition + frames($0) == 5 * 48_000 ? frames($0) : 0 } ?? 0
        XCTAssertEqual(opus.packetTable?.validFrames, 5 * 48_000 - trailing, "the Opus timeline is the capture's too")
        XCTAssertEqual(
            opus.markers.filter { $0.name.hasSuffix("(overrun)") }, trailing > 0 ? Array(pcmGaps.dropLast()) : pcmGaps,
            "at the same sample times, of the same lengths")
        XCTAssertEqual(main.stop(), 0)
        XCTAssertEqual(backup.stop(), 0)
    }
}
