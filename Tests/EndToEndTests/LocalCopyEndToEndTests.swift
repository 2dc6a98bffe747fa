import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The safety copy on the field unit (`capture-send --record`, issue 29 item 3) with the real
/// executables, run as the unprivileged user: SIGKILLed mid-take, the local CAF decodes up to its
/// last buffer in ffmpeg and libsndfile, sample-exact against the tone, and `capture-recv recover`
/// finishes it; a full disk under the copy (a small tmpfs) stops the copy loudly while the stream
/// completes, bit-exact at the receiver, and capture-send exits 4 naming the copy.
final class LocalCopyEndToEndTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("local-copy-e2e-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    /// 16-bit stereo samples of raw little-endian bytes, as ffmpeg's `-f s16le` gives them.
    private func decodedByFFmpeg(_ path: String) throws -> [UInt8] {
        let run = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", path, "-f", "s16le", "-acodec", "pcm_s16le", "-"])
        XCTAssertTrue(run.succeeded, run.errorText)
        return [UInt8](run.standardOutput)
    }

    func testACopySIGKILLedMidTakeDecodesUpToItsLastBufferAndRecoverFinishesIt() throws {
        let receiver = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("out"))
        let copy = work.appendingPathComponent("take.caf").path
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(receiver.port)", "--source", "tone", "--stream-name", "field", "--buffer-seconds", "0.1",
            "--record", copy, "--spool", work.appendingPathComponent("spool").path,
        ])
        // Two seconds of tone in the copy (a 48 kHz stereo s16 frame is 4 bytes), then SIGKILL.
        let twoSeconds = UInt64(2 * 48_000 * 4)
        Resilience.waitUntil("two seconds in the local copy", seconds: 120) {
            ((try? FileManager.default.attributesOfItem(atPath: copy)[.size] as? UInt64) ?? 0) > twoSeconds + 4_096 || !sender.process.isRunning
        }
        sender.signal(SIGKILL)
        _ = sender.wait()
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: copy)[.size] as? UInt64)

        // As the crash left it: unfinished (its journal beside it), its data chunk's size that of
        // every buffer written.
        XCTAssertTrue(FileManager.default.fileExists(atPath: copy + ".pakt-journal"), "the copy was not finished")
        let left = try CAFFile.read(path: copy)
        let audio = try left.readAudioData()
        XCTAssertGreaterThan(UInt64(audio.count), twoSeconds)
        let frames = audio.count / 4
        let tone = try Resilience.toneBytes(frames: frames)
        XCTAssertEqual(audio, tone, "every buffer written is the tone, sample-exact")
        XCTAssertEqual(try decodedByFFmpeg(copy), tone, "ffmpeg decodes it to the last buffer")
        let sndfile = try SndFileReader.read(path: copy)
        XCTAssertEqual(sndfile.frames, frames, "libsndfile reads every frame")
        XCTAssertEqual(sndfile.int32Samples.prefix(8).map { Int16(truncatingIfNeeded: $0 >> 16) }, stride(from: 0, to: 16, by: 2).map {
            Int16(bitPattern: UInt16(tone[$0]) | UInt16(tone[$0 + 1]) << 8)
        })
        XCTAssertLessThanOrEqual(UInt64(audio.count), size)

        // capture-recv recover finishes it: sizes written, the same audio.
        let recover = try ChildProcess(Products.recv, ["recover", copy])
        XCTAssertEqual(recover.wait(), 0, recover.standardError)
        let finished = try CAFFile.read(path: copy)
        XCTAssertTrue(finished.isFinalized)
        XCTAssertFalse(FileManager.default.fileExists(atPath: copy + ".pakt-journal"), "recover finished it")
        XCTAssertEqual(try finished.readAudioData(), tone)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testAFullDiskStopsTheCopyLoudlyAndNeverTheStream() throws {
        let small = work.appendingPathComponent("small").path
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=256k,mode=0777", "tmpfs", small])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a small tmpfs here (needs root): \(mounted.errorText)") }
        defer { _ = try? ToolRunner.run("umount", ["-l", small]) }
        let receiver = try ReceiverUnderTest(outputDirectory: work.appendingPathComponent("out"))
        // 3 s of 48 kHz stereo s16 is 576,000 bytes: the copy fills the 256 KiB after about 1.3 s.
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(receiver.port)", "--source", "tone", "--duration", "3", "--no-pace", "--stream-name", "full-disk",
            "--record", small + "/take.caf", "--spool", work.appendingPathComponent("spool").path, "--log-format", "json",
        ])
        XCTAssertEqual(sender.wait(seconds: 120), 4, sender.standardError)
        let lines = sender.standardError.split(separator: "\n")
        let stopped = lines.filter { $0.contains("THE LOCAL COPY STOPPED") }
        XCTAssertEqual(stopped.count, 1, sender.standardError)
        XCTAssertTrue(stopped.first?.contains("the disk is full") ?? false, sender.standardError)
        let final = try XCTUnwrap(lines.last.map(String.init))
        XCTAssertTrue(final.contains("the main receiver 127.0.0.1:\(receiver.port) has the whole stream") && final.contains("the local copy stopped after"), final)
        // The stream is whole at the receiver, bit-exact.
        let file = try XCTUnwrap(receiver.files().first)
        let received = try CAFFile.read(path: file.path)
        XCTAssertTrue(received.isFinalized)
        XCTAssertEqual(try received.readAudioData(), try Resilience.toneBytes(frames: 3 * 48_000))
        // The copy holds the tone up to where the disk filled.
        let kept = try CAFFile.read(path: small + "/take.caf").readAudioData()
        XCTAssertGreaterThan(kept.count, 0)
        XCTAssertEqual(kept, Array(try Resilience.toneBytes(frames: 3 * 48_000).prefix(kept.count)))
        XCTAssertEqual(receiver.stop(), 0)
    }
}
