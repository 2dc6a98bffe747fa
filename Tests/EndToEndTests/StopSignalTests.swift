import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// How capture-send stops when told to (issue 14, part 1): the first SIGINT or SIGTERM delivers
/// what was captured within --stop-timeout; a second one, or that timeout, stops delivering at once,
/// keeps the rest in the spool, says where and how much in one line, and exits 3.
final class StopSignalTests: XCTestCase {
    /// A loopback port nobody listens on (a receiver bound it and stopped).
    private func closedPort() throws -> Int {
        let probe = try ReceiverUnderTest()
        let port = probe.port
        XCTAssertEqual(probe.stop(), 0)
        return port
    }

    private func spoolFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("stop-spool-\(UUID().uuidString)")
    }

    /// The final `Error: delivery stopped by …` line, with the figures it gives.
    private struct LeftoverLine {
        let text: String
        let seconds: Double
        let bytes: Int
        let folder: String

        init?(_ standardError: String) {
            guard let line = standardError.split(separator: "\n").last(where: { $0.hasPrefix("Error: delivery stopped by ") }) else { return nil }
            text = String(line)
            let words = line.split(separator: " ")
            guard let secondsIndex = words.indices.first(where: { $0 > 0 && $0 + 1 < words.count && words[$0] == "s" && words[$0 + 1] == "of" }),
                  let seconds = Double(words[secondsIndex - 1]),
                  let bytesWord = words.first(where: { $0.hasPrefix("(") && $0.dropFirst().allSatisfy(\.isNumber) }),
                  let bytes = Int(bytesWord.dropFirst()),
                  let atIndex = words.firstIndex(of: "at"), atIndex + 1 < words.count
            else { return nil }
            self.seconds = seconds
            self.bytes = bytes
            folder = String(words[atIndex + 1].trimmingCharacters(in: CharacterSet(charactersIn: ";")))
        }
    }

    /// The whole sequence a user at a terminal goes through with an unreachable receiver: Ctrl-C,
    /// Ctrl-C again. The second one ends the run within 2 s, with exit status 3 and one line that
    /// says how much audio stays where; that audio is then delivered, complete, by the next run.
    func testSecondSignalStopsDeliveryAtOnceAndTheSpoolKeepsTheAudio() throws {
        let port = try closedPort()
        let spool = spoolFolder()
        defer { try? FileManager.default.removeItem(at: spool) }
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(port)", "--source", "tone", "--rate", "8000", "--channels", "1", "--buffer-seconds", "0.1",
            "--stream-name", "stopped", "--spool", spool.path, "--reconnect-min", "0.1", "--reconnect-max", "0.3",
            "--status-interval", "0.1",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        XCTAssertTrue(waitFor(20) { sender.standardError.contains("connection refused") }, sender.standardError)
        XCTAssertTrue(waitFor(60) { Self.capturedSeconds(sender.standardError) >= 1.0 }, "at least a second of audio captured: \(sender.standardError)")
        sender.signal(SIGINT)
        XCTAssertTrue(waitFor(10) { sender.standardError.contains("stopping capture") }, sender.standardError)
        XCTAssertTrue(sender.process.isRunning, "the first signal lets delivery go on")
        let second = Date()
        sender.signal(SIGINT)
        let status = sender.wait(seconds: 10)
        let took = Date().timeIntervalSince(second)
        XCTAssertEqual(status, 3, sender.standardError)
        XCTAssertLessThan(took, 2.0, "a second signal ends the run within 2 s")
        let errorLines = sender.standardError.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
        XCTAssertEqual(errorLines.count, 1, sender.standardError)
        let line = try XCTUnwrap(LeftoverLine(sender.standardError), sender.standardError)
        XCTAssertTrue(line.text.contains("a second stop signal (SIGINT)"), line.text)
        XCTAssertTrue(line.text.contains("127.0.0.1:\(port)"), line.text)
        XCTAssertGreaterThanOrEqual(line.seconds, 1.0, line.text)
        XCTAssertEqual(Double(line.bytes) / 2 / 8_000, line.seconds, accuracy: 0.051, "16-bit mono at 8 kHz: \(line.text)")
        XCTAssertTrue(line.folder.hasPrefix(spool.path), line.text)
        XCTAssertTrue(FileManager.default.fileExists(atPath: line.folder + "/meta.json"), "the spool folder named holds the stream")

        // The receiver comes up on that address; the next run delivers the stopped stream whole.
        let receiver = try ReceiverUnderTest(port: port)
        let next = try runSender([
            "127.0.0.1:\(port)", "--source", "tone", "--rate", "8000", "--channels", "1", "--duration", "0.2", "--no-pace",
            "--stream-name", "next", "--spool", spool.path,
        ], timeout: 60)
        XCTAssertEqual(next.status, 0, next.stderr)
        XCTAssertEqual(receiver.stop(), 0)
        let stopped = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("stopped_") }, "\(receiver.files())")
        let frames = try SndFileReader.read(path: stopped.path).frames
        XCTAssertEqual(Double(frames) / 8_000, line.seconds, accuracy: 0.05, "the spool held what the line said")
        XCTAssertFalse(FileManager.default.fileExists(atPath: line.folder), "a delivered stream leaves the spool")
    }

    /// SIGTERM alone (systemd's stop) behaves like the first Ctrl-C, bounded by --stop-timeout: the
    /// run then keeps the rest in the spool and exits 3.
    func testTerminateAloneStopsDeliveringWhenTheStopTimeoutPasses() throws {
        let port = try closedPort()
        let spool = spoolFolder()
        defer { try? FileManager.default.removeItem(at: spool) }
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(port)", "--source", "tone", "--buffer-seconds", "0.1", "--stream-name", "terminated",
            "--spool", spool.path, "--stop-timeout", "2", "--reconnect-min", "0.1", "--reconnect-max", "0.3",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        XCTAssertTrue(waitFor(20) { sender.standardError.contains("connection refused") }, sender.standardError)
        let signalled = Date()
        sender.signal(SIGTERM)
        let status = sender.wait(seconds: 20)
        let took = Date().timeIntervalSince(signalled)
        XCTAssertEqual(status, 3, sender.standardError)
        XCTAssertGreaterThanOrEqual(took, 2.0, "delivery goes on until the stop timeout")
        XCTAssertLessThan(took, 4.0, "and stops within 2 s of it")
        XCTAssertTrue(sender.standardError.contains("for at most 2 s (--stop-timeout)"), sender.standardError)
        let line = try XCTUnwrap(LeftoverLine(sender.standardError), sender.standardError)
        XCTAssertTrue(line.text.contains("--stop-timeout (2 s) passed while delivering"), line.text)
        XCTAssertGreaterThan(line.bytes, 0, line.text)
        XCTAssertTrue(FileManager.default.fileExists(atPath: line.folder + "/meta.json"), line.text)
    }

    /// With a receiver there, the first SIGINT or SIGTERM ends the stream cleanly: everything
    /// captured up to the signal is delivered and the run exits 0.
    func testFirstSignalDeliversWhatWasCapturedAndExitsZero() throws {
        for (signal, name) in [(SIGINT, "int"), (SIGTERM, "term")] {
            let receiver = try ReceiverUnderTest()
            let sender = try ChildProcess(Products.send, [
                receiver.address, "--source", "tone", "--rate", "8000", "--channels", "1", "--buffer-seconds", "0.1",
                "--stream-name", "first-\(name)", "--log-level", "info",
            ])
            defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
            XCTAssertTrue(waitFor(20) {
                guard let file = receiver.files().first else { return false }
                let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
                return size > 8_000 * 2
            })
            sender.signal(signal)
            XCTAssertEqual(sender.wait(seconds: 20), 0, sender.standardError)
            XCTAssertTrue(sender.standardError.contains("stream delivered"), sender.standardError)
            XCTAssertFalse(sender.standardError.contains("Error:"), sender.standardError)
            let file = try XCTUnwrap(receiver.files().first)
            XCTAssertTrue(try CAFFile.read(path: file.path).isFinalized)
            XCTAssertGreaterThanOrEqual(try SndFileReader.read(path: file.path).frames, 8_000)
            XCTAssertEqual(receiver.stop(), 0)
        }
    }

    /// With --no-spool the line says the unacknowledged audio is lost, not that it is kept.
    func testWithoutASpoolTheLineSaysTheAudioIsLost() throws {
        let port = try closedPort()
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(port)", "--source", "tone", "--buffer-seconds", "0.1", "--no-spool",
            "--reconnect-min", "0.1", "--reconnect-max", "0.3",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        XCTAssertTrue(waitFor(20) { sender.standardError.contains("connection refused") }, sender.standardError)
        sender.signal(SIGTERM)
        XCTAssertTrue(waitFor(10) { sender.standardError.contains("stopping capture") }, sender.standardError)
        sender.signal(SIGTERM)
        XCTAssertEqual(sender.wait(seconds: 10), 3, sender.standardError)
        let line = try XCTUnwrap(sender.standardError.split(separator: "\n").last { $0.hasPrefix("Error: ") })
        XCTAssertTrue(line.contains("a second stop signal (SIGTERM)"), String(line))
        XCTAssertTrue(line.contains("is lost, because --no-spool keeps it in memory only"), String(line))
    }

    /// A stream is announced to the receiver (which creates its file at the handshake) only once it
    /// has audio: a sender killed before its first capture buffer leaves no file, even at a live
    /// receiver, and nothing in its spool.
    func testASenderKilledBeforeItsFirstBufferLeavesNoFileAtALiveReceiver() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--log-level", "debug"])
        let spool = spoolFolder()
        defer { try? FileManager.default.removeItem(at: spool) }
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--buffer-seconds", "5", "--stream-name", "early", "--spool", spool.path,
            "--log-level", "info",
        ])
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }
        // Capture has started; its first buffer takes five seconds of the paced tone.
        XCTAssertTrue(waitFor(30) { sender.standardError.contains("capturing") }, sender.standardError)
        XCTAssertTrue(sender.process.isRunning, sender.standardError)
        XCTAssertFalse(receiver.child.standardError.contains("connection accepted"), "no connection before the first buffer: \(receiver.child.standardError)")
        sender.signal(SIGKILL)
        _ = sender.wait(seconds: 10)
        XCTAssertEqual(receiver.stop(), 0)
        XCTAssertEqual(receiver.files(), [], "no file for a stream without audio")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: spool.path)) ?? []
        XCTAssertEqual(left.filter { !$0.hasPrefix(".") }, [], "nothing in the spool")
    }

    /// The most audio a status line (`captured_s=`) reported captured so far, in seconds.
    static func capturedSeconds(_ standardError: String) -> Double {
        standardError.split(separator: "\n").compactMap { line -> Double? in
            guard line.hasPrefix("status ") else { return nil }
            return line.split(separator: " ").first { $0.hasPrefix("captured_s=") }.flatMap { Double($0.dropFirst("captured_s=".count)) }
        }.max() ?? 0
    }
}
