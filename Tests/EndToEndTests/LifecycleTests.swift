import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Signals and exit codes of the two executables, as a user meets them.
final class LifecycleTests: XCTestCase {
    func testReceiverSIGTERMFinalizesOpenFilesAndExitsZero() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--stream-name", "live", "--buffer-seconds", "0.05",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        // Wait until audio is on disk, then stop the receiver in the middle of the stream.
        XCTAssertTrue(waitFor(20) {
            guard let file = receiver.files().first else { return false }
            let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
            return size > 48_000 * 4
        })
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized, "shutdown sets the sizes")
        XCTAssertGreaterThanOrEqual(caf.totalFrames ?? 0, 48_000)
        let stream = try ffprobeStream(file.path)
        XCTAssertEqual(stream["codec_name"] as? String, "pcm_s16le")
        XCTAssertFalse(FileManager.default.fileExists(atPath: file.path + ".pakt-journal"), "a finished file has no journal")
        XCTAssertTrue(receiver.child.standardError.contains("shutting down"))
    }

    func testAStreamContinuesTheSameFileAfterTheReceiverRestarts() throws {
        let first = try ReceiverUnderTest()
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: spool) }
        let sender = try ChildProcess(Products.send, [
            first.address, "--source", "tone", "--rate", "8000", "--channels", "1", "--duration", "4", "--stream-name", "restarted",
            "--buffer-seconds", "0.05", "--spool", spool.path, "--reconnect-min", "0.1", "--reconnect-max", "0.3",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        XCTAssertTrue(waitFor(20) {
            guard let file = first.files().first else { return false }
            let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
            return size > 8_000 * 2
        })
        XCTAssertEqual(first.stop(), 0, first.child.standardError)
        // Shut down mid-stream: the file is complete for every reader, libsndfile included.
        let file = try XCTUnwrap(first.files().first)
        XCTAssertTrue(try CAFFile.read(path: file.path).isFinalized)
        XCTAssertGreaterThan(try SndFileReader.read(path: file.path).frames, 0)

        // The receiver comes back on the same port and folder; the sender resumes the same file.
        let second = try ReceiverUnderTest(outputDirectory: first.directory, port: first.port)
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)
        XCTAssertEqual(second.files(), [file], "one file for the whole stream")
        let audio = try SndFileReader.read(path: file.path)
        XCTAssertEqual(audio.frames, 32_000)
        let tone = try ToneSource(settings: .init(sampleRate: 8_000, channels: 1, sample: .s16, duration: .seconds(4), paced: false))
        var expected = [UInt8](repeating: 0, count: 32_000 * 2)
        expected.withUnsafeMutableBytes { _ = try? tone.read(into: $0, frameCapacity: 32_000) }
        let expectedSamples = stride(from: 0, to: expected.count, by: 2).map { Int32(Int16(bitPattern: UInt16(expected[$0]) | UInt16(expected[$0 + 1]) << 8)) << 16 }
        XCTAssertEqual(audio.int32Samples, expectedSamples, "every sample once, in place: no hole, no duplicate")
        XCTAssertTrue(second.child.standardError.contains("resum"), second.child.standardError)
        XCTAssertEqual(second.stop(), 0)
    }

    func testSenderSIGINTEndsTheStreamCleanly() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--rate", "8000", "--channels", "1", "--stream-name", "interrupted",
            "--buffer-seconds", "0.1",
        ])
        XCTAssertTrue(waitFor(20) {
            guard let file = receiver.files().first else { return false }
            let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
            return size > 8_000 * 2
        })
        sender.signal(SIGINT)
        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("stream delivered"), sender.standardError)
        // The receiver finished the file on the sender's end of stream, before any shutdown.
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertTrue(waitFor { (try? CAFFile.read(path: file.path).isFinalized) == true })
        let caf = try CAFFile.read(path: file.path)
        // Everything captured up to the interrupt: whole capture buffers of 800 frames.
        let frames = try XCTUnwrap(caf.totalFrames)
        XCTAssertGreaterThanOrEqual(frames, 8_000)
        XCTAssertEqual(frames % 800, 0)
        XCTAssertEqual(try SndFileReader.read(path: file.path).frames, Int(frames))
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testSenderKeepsTryingAnUnreachableReceiverAndDeliversOnceItIsThere() throws {
        // A port nobody listens on: bind one, close it, use it.
        let probe = try ReceiverUnderTest()
        let port = probe.port
        XCTAssertEqual(probe.stop(), 0)
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: spool) }
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(port)", "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "patient",
            "--spool", spool.path, "--reconnect-min", "0.1", "--reconnect-max", "0.3", "--log-level", "warning",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        // Capture does not wait for the network: the sender says why it cannot deliver yet, and retries.
        XCTAssertTrue(waitFor(20) { sender.standardError.contains("connection refused") }, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("reconnecting"), sender.standardError)
        XCTAssertTrue(sender.process.isRunning)

        let receiver = try ReceiverUnderTest(port: port)
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertEqual(try SndFileReader.read(path: file.path).frames, 48_000, "every captured frame arrived")
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testBadArgumentsAreRefusedWithOneClearLine() throws {
        let cases: [([String], String)] = [
            ([], "name the receiver as HOST:PORT"),
            (["127.0.0.1:7373", "--source", "file"], "--source file needs --file PATH"),
            (["127.0.0.1:7373", "--source", "tone", "--rate", "4000"], "The value '4000' is invalid for '--rate <rate>': use a whole number from 8000 to 192000 Hz"),
            (["127.0.0.1:7373", "--source", "tone", "--channels", "9"], "The value '9' is invalid for '--channels <channels>': use a whole number from 1 to 8"),
            (["127.0.0.1:7373", "--source", "tone", "--format", "s8"], "s8"),
            (["127.0.0.1:7373", "--codec", "opus", "--bitrate", "5k"], "6000 to 510000"),
            (["127.0.0.1:7373", "--codec", "opus", "--frame-ms", "15"], "2.5, 5, 10, 20, 40 or 60"),
            (["not-an-address"], "HOST:PORT"),
            (["127.0.0.1:7373", "--source", "file", "--file", "/nonexistent/a.wav"], "cannot open audio file /nonexistent/a.wav"),
            (["127.0.0.1:7373", "--source", "tone", "--stop-timeout=-1"], "The value '-1' is invalid for '--stop-timeout <SECONDS>': use 0 (no limit) to 86400 seconds (24 hours)"),
            (["127.0.0.1:7373", "--source", "tone", "--stop-timeout", "nan"], "The value 'nan' is invalid for '--stop-timeout <SECONDS>': use 0 (no limit) to 86400 seconds (24 hours)"),
            (["127.0.0.1:7373", "--source", "tone", "--stop-timeout", "inf"], "The value 'inf' is invalid for '--stop-timeout <SECONDS>': use 0 (no limit) to 86400 seconds (24 hours)"),
        ]
        for (arguments, expected) in cases {
            let result = try runSender(arguments, timeout: 30)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
        }
        let receiverResult = try ChildProcess(Products.recv, ["--out", "/proc/forbidden", "--listen", "127.0.0.1:0"])
        XCTAssertNotEqual(receiverResult.wait(seconds: 30), 0)
        XCTAssertTrue(receiverResult.standardError.contains("/proc/forbidden"), receiverResult.standardError)
    }

    func testHelpDocumentsEveryFlagWithItsDefault() throws {
        let send = try ChildProcess(Products.send, ["--help"])
        XCTAssertEqual(send.wait(), 0)
        for flag in ["--source", "--file", "--device", "--list-devices", "--rate", "--channels", "--format", "--duration",
                     "--codec", "--bitrate", "--frame-ms", "--complexity", "--stream-name", "--no-pace", "--buffers", "--buffer-seconds"] {
            XCTAssertTrue(send.standardOutput.contains(flag), "capture-send --help lacks \(flag)")
        }
        for defaultText in ["default: alsa", "default: 48000", "default: 2", "default: s16", "default: pcm", "default: 3", "default: 0.5"] {
            XCTAssertTrue(send.standardOutput.contains(defaultText), "capture-send --help lacks \(defaultText)")
        }
        let recv = try ChildProcess(Products.recv, ["serve", "--help"])
        XCTAssertEqual(recv.wait(), 0)
        XCTAssertTrue(recv.standardOutput.contains("default: 0.0.0.0:7373"), recv.standardOutput)
        XCTAssertTrue(recv.standardOutput.contains("--out"))
    }
}
