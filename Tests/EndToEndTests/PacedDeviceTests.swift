import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// capture-send's real ALSA path against a real-time paced device (PulseAudio's null sink through
/// ALSA's `pulse` PCM, see PulseFixture): a frame counter played into it must arrive bit-exact and
/// contiguous, through a stalled link, and across the device disappearing with --reopen.
final class PacedDeviceTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("paced-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private func sender(to address: String, seconds: Int, pulse: PulseFixture, extra: [String] = []) throws -> ChildProcess {
        try ChildProcess(Products.send, [
            address, "--source", "alsa", "--device", "pulse", "--rate", "48000", "--channels", "2", "--format", "s16",
            "--duration", "\(seconds)", "--stream-name", "paced", "--buffer-seconds", "0.1", "--log-level", "info",
            "--reconnect-min", "0.05", "--reconnect-max", "0.3",
        ] + extra, environment: pulse.environment)
    }

    /// The counter in the one file the receiver wrote, read by libsndfile.
    private func receivedCounter(_ receiver: ReceiverUnderTest, seconds: Int) throws -> (runs: [(first: Int, frames: Int)], breaks: Int, file: CAFFile) {
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertEqual(receiver.files().count, 1)
        let audio = try SndFileReader.read(path: file.path)
        XCTAssertEqual(audio.frames, seconds * 48_000, "the capture is exactly --duration long")
        let samples = audio.int32Samples.map { Int16(truncatingIfNeeded: $0 >> 16) }
        let found = PulseFixture.counterRuns(samples)
        return (found.runs, found.breaks, try CAFFile.read(path: file.path))
    }

    func testAFrameCounterPlayedIntoTheDeviceArrivesContiguousAndBitExact() throws {
        let pulse = try PulseFixture()
        let wav = work.appendingPathComponent("counter.wav").path
        try PulseFixture.counterWAV(at: wav, first: 1, seconds: 12)
        let receiver = try ReceiverUnderTest()
        let player = try pulse.play(wav)
        defer { player.signal(SIGKILL) }
        let capture = try sender(to: receiver.address, seconds: 6, pulse: pulse)
        XCTAssertEqual(Resilience.finish(capture, seconds: 60), 0, capture.standardError)
        let received = try receivedCounter(receiver, seconds: 6)
        XCTAssertEqual(received.breaks, 0, "no frame lost or repeated: \(received.runs.prefix(5))")
        XCTAssertEqual(received.runs.count, 1, "one contiguous run of the counter: \(received.runs.prefix(5))")
        XCTAssertGreaterThanOrEqual(received.runs.first?.frames ?? 0, 4 * 48_000, "at least 4 of the 6 s carry the counter (the device takes a moment to open)")
        XCTAssertEqual(received.file.markers, [], "no gap")
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testAStalledLinkDoesNotInterruptTheCapture() throws {
        let pulse = try PulseFixture()
        let wav = work.appendingPathComponent("counter.wav").path
        try PulseFixture.counterWAV(at: wav, first: 1, seconds: 14)
        let receiver = try ReceiverUnderTest()
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 17)
        let player = try pulse.play(wav)
        defer { player.signal(SIGKILL) }
        let capture = try sender(to: "127.0.0.1:\(link.port)", seconds: 8, pulse: pulse, extra: ["--idle-timeout", "30"])
        Resilience.waitUntil("the stream is recorded") { receiver.child.standardError.contains("stream opened") }
        Thread.sleep(forTimeInterval: 1)
        // Four seconds in which nothing the sender sends gets through: the device keeps delivering.
        link.mode = .stall
        Thread.sleep(forTimeInterval: 4)
        link.mode = .pass
        XCTAssertEqual(Resilience.finish(capture, seconds: 60), 0, capture.standardError)
        XCTAssertFalse(capture.standardError.contains("overrun"), capture.standardError)
        let received = try receivedCounter(receiver, seconds: 8)
        XCTAssertEqual(received.breaks, 0, "the stall cost no frame: \(received.runs.prefix(5))")
        XCTAssertEqual(received.runs.count, 1)
        XCTAssertEqual(received.file.markers, [], "no gap")
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testADeviceThatDisappearsIsReopenedAndTheOutageIsAGap() throws {
        let pulse = try PulseFixture()
        let before = work.appendingPathComponent("before.wav").path
        let after = work.appendingPathComponent("after.wav").path
        try PulseFixture.counterWAV(at: before, first: 1, seconds: 20)
        try PulseFixture.counterWAV(at: after, first: 1_000_000, seconds: 20)
        let receiver = try ReceiverUnderTest()
        var player = try pulse.play(before)
        let capture = try sender(to: receiver.address, seconds: 10, pulse: pulse, extra: ["--reopen"])
        Resilience.waitUntil("the stream is recorded") { receiver.child.standardError.contains("stream opened") }
        Thread.sleep(forTimeInterval: 2)
        // The sound server dies: the device is gone.
        pulse.kill()
        player.signal(SIGKILL)
        Resilience.waitUntil("the sender noticed") { capture.standardError.contains("capture device lost; retrying") }
        Thread.sleep(forTimeInterval: 1)
        try pulse.start()
        player = try pulse.play(after)
        defer { player.signal(SIGKILL) }
        XCTAssertEqual(Resilience.finish(capture, seconds: 60), 0, capture.standardError)
        XCTAssertTrue(capture.standardError.contains("capture device back; the outage is recorded as a gap"), capture.standardError)

        let received = try receivedCounter(receiver, seconds: 10)
        XCTAssertEqual(received.file.markers.count, 1, "the outage is one gap marker: \(received.file.markers)")
        let gap = try XCTUnwrap(received.file.markers.first)
        XCTAssertTrue(gap.name.contains("not captured"), gap.name)
        // Before the gap, the first recording's counter; after it, the second's: each contiguous.
        let firsts = received.runs.filter { $0.first < 1_000_000 }, seconds = received.runs.filter { $0.first >= 1_000_000 }
        XCTAssertEqual(firsts.count, 1, "one run before the outage: \(received.runs.prefix(6))")
        XCTAssertEqual(seconds.count, 1, "one run after it: \(received.runs.prefix(6))")
        XCTAssertGreaterThanOrEqual(firsts.first?.frames ?? 0, 48_000, "seconds of audio before the outage")
        XCTAssertGreaterThanOrEqual(seconds.first?.frames ?? 0, 48_000, "seconds of audio after it")
        XCTAssertEqual(received.breaks, 0, "each run is contiguous, and the outage between them is the gap's silence")
        XCTAssertEqual(receiver.stop(), 0)
    }
}
