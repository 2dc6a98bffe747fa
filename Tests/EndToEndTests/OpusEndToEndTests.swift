import CAF
import CSndFile
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// capture-send --codec opus → capture-recv: an Opus CAF that ffmpeg decodes, whose packet table
/// (checked by our reader and by ffprobe) has exactly the captured frames, and whose audio, aligned
/// by the file's own priming frames, matches the source.
final class OpusEndToEndTests: XCTestCase {
    func testTwoToneOpusStreamDecodesToTheSourceWithTheRightLength() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("opus-e2e-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(directory)
        defer { try? FileManager.default.removeItem(at: directory) }

        // 3.3 s of 440 Hz + 1000 Hz at 48 kHz stereo: not a whole number of 20 ms frames.
        let frames = 158_400 + 123
        var source: [Float] = []
        source.reserveCapacity(frames * 2)
        for index in 0..<frames {
            let time = Double(index) / 48_000
            let value = Float(0.25 * sin(2 * .pi * 440 * time) + 0.25 * sin(2 * .pi * 1_000 * time))
            source += [value, value]
        }
        let path = directory.appendingPathComponent("two-tone.wav").path
        try writeWAV(path: path, subtype: Int32(SF_FORMAT_FLOAT), rate: 48_000, channels: 2, floats: source)

        let receiver = try ReceiverUnderTest()
        let result = try runSender([
            receiver.address, "--source", "file", "--file", path, "--no-pace", "--codec", "opus",
            "--bitrate", "128k", "--frame-ms", "20", "--complexity", "10", "--stream-name", "opus-two-tone",
            "--buffer-seconds", "0.0213",  // 1022-frame buffers: they never divide a 960-frame Opus frame
        ])
        XCTAssertEqual(result.status, 0, result.stderr)
        let file = try XCTUnwrap(receiver.files().first)

        // Our reader: the desc and pakt numbers.
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.format, .opus(channels: 2, framesPerPacket: 960))
        XCTAssertEqual(caf.magicCookie, [], "stereo Opus files carry no kuki (PROTOCOL.md §11.2)")
        let table = try XCTUnwrap(caf.packetTable)
        XCTAssertEqual(table.primingFrames, 312, "libopus's lookahead at 48 kHz")
        XCTAssertEqual(table.validFrames, Int64(frames), "exactly the captured frames")
        let expectedPackets = (frames + 312 + 959) / 960
        XCTAssertEqual(table.numberPackets, Int64(expectedPackets))
        XCTAssertEqual(Int64(table.remainderFrames), Int64(expectedPackets * 960 - 312 - frames))
        XCTAssertEqual(table.packetSizes.count, expectedPackets)

        // ffprobe, an independent reader of the same packet table.
        let packets = try ToolRunner.run("ffprobe", ["-v", "error", "-select_streams", "a:0", "-show_entries", "packet=size", "-of", "csv=p=0", file.path])
        XCTAssertTrue(packets.succeeded, packets.errorText)
        let sizes = packets.outputText.split(separator: "\n").compactMap { UInt32($0.trimmingCharacters(in: .whitespaces)) }
        XCTAssertEqual(sizes, table.packetSizes, "ffprobe sees the same packet sizes")
        let stream = try ffprobeStream(file.path)
        XCTAssertEqual(stream["codec_name"] as? String, "opus")
        XCTAssertEqual(stream["channels"] as? Int, 2)

        // ffmpeg decodes every packet (ffmpeg 5.1 does not apply CAF priming); align by the file's
        // own priming frames and take its valid frames.
        let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", file.path, "-f", "f32le", "-ac", "2", "-"])
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        let samples = decoded.standardOutput.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        XCTAssertEqual(samples.count, expectedPackets * 960 * 2)
        let start = Int(table.primingFrames) * 2
        let aligned = Array(samples[start..<(start + Int(table.validFrames) * 2)])
        XCTAssertEqual(aligned.count, source.count, "exactly the source's length")
        var signal = 0.0
        var noise = 0.0
        for (original, coded) in zip(source, aligned) {
            signal += Double(original) * Double(original)
            noise += Double(original - coded) * Double(original - coded)
        }
        let snr = 10 * log10(signal / max(noise, 1e-20))
        XCTAssertGreaterThanOrEqual(snr, 30, "SNR \(snr) dB at 128 kb/s")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// A 44.1 kHz source with `--codec opus` is resampled to 48 kHz (libsoxr) instead of refused: the
    /// file is 48 kHz Opus whose valid frames are the source's duration at 48 kHz to the sample, and
    /// whose audio, decoded by ffmpeg and aligned by the file's own priming, is the same two tones.
    func testA44100HzSourceIsResampledTo48kHzOpusOfTheSourcesDuration() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("opus-44k-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let frames = 44_100 * 3 + 77
        func twoTone(_ index: Int, rate: Double) -> Float {
            let time = Double(index) / rate
            return Float(0.25 * sin(2 * .pi * 440 * time) + 0.25 * sin(2 * .pi * 1_000 * time))
        }
        let source = (0..<frames).flatMap { [twoTone($0, rate: 44_100), twoTone($0, rate: 44_100)] }
        let path = directory.appendingPathComponent("cd-rate.wav").path
        try writeWAV(path: path, subtype: Int32(SF_FORMAT_FLOAT), rate: 44_100, channels: 2, floats: source)
        Unprivileged.handOver(path)

        let receiver = try ReceiverUnderTest()
        let result = try runSender([receiver.address, "--source", "file", "--file", path, "--no-pace", "--codec", "opus", "--stream-name", "cd-rate"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertEqual(caf.format.sampleRate, 48_000)
        let table = try XCTUnwrap(caf.packetTable)
        let expected = Int64((Double(frames) * 48_000 / 44_100).rounded())
        XCTAssertEqual(table.validFrames, expected, "the source's duration at 48 kHz, to the sample")
        XCTAssertEqual(table.primingFrames, 312)

        let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", file.path, "-f", "f32le", "-ac", "2", "-"])
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        let samples = decoded.standardOutput.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let start = Int(table.primingFrames) * 2
        let aligned = samples[start..<(start + Int(table.validFrames) * 2)]
        // Against the same tones rendered at 48 kHz, leaving out the first and last 10 ms.
        var signal = 0.0
        var noise = 0.0
        for index in 480..<(Int(expected) - 480) {
            let reference = Double(twoTone(index, rate: 48_000))
            let coded = Double(aligned[aligned.startIndex + index * 2])
            signal += reference * reference
            noise += (reference - coded) * (reference - coded)
        }
        let snr = 10 * log10(signal / max(noise, 1e-20))
        XCTAssertGreaterThanOrEqual(snr, 20, "SNR \(snr) dB: in time with the source")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// A sender whose capture falls behind loses audio in overruns; its Opus stream must still be
    /// accepted (it was refused: "sample times must continue without holes"), and the file keeps the
    /// capture timeline, the lost stretch encoded as silence. The sender is stopped (SIGSTOP) for
    /// 1.5 s mid-stream: when it goes on, the paced tone has 1.5 s to catch up, read faster than the
    /// encoder takes two 20 ms buffers, so the queue drains the rest as lost frames.
    func testOpusStreamWithCaptureOverrunsIsAcceptedAndKeepsTheCaptureTimeline() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--codec", "opus", "--duration", "4", "--buffers", "2",
            "--buffer-seconds", "0.02", "--no-spool", "--stream-name", "opus-overrun",
        ])
        usleep(1_000_000)
        sender.signal(SIGSTOP)
        usleep(1_500_000)
        sender.signal(SIGCONT)
        let status = sender.wait(seconds: 120)
        guard sender.standardError.contains("capture overruns") else {
            throw XCTSkip("the sender caught up without an overrun this time, so there was nothing to check: \(sender.standardError)")
        }
        XCTAssertEqual(status, 0, sender.standardError)
        XCTAssertFalse(sender.standardError.contains("refused"), sender.standardError)
        XCTAssertTrue(sender.standardError.contains("audio was lost and encoded as silence in its place"), "the closing warning says where the lost audio went: \(sender.standardError)")
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        let table = try XCTUnwrap(caf.packetTable)
        XCTAssertEqual(table.primingFrames, 312)
        XCTAssertEqual(table.validFrames, 4 * 48_000, "4 s of capture timeline, lost frames included (as silence)")
        XCTAssertEqual(table.numberPackets, Int64((4 * 48_000 + 312 + 959) / 960))
        XCTAssertEqual(receiver.stop(), 0)
    }
}
