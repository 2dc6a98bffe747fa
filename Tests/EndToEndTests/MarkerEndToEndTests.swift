import CAF
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Markers and pause from the field (issue 30, item 3), with the real executables: `capture-send -i`
/// driven through a pseudo-terminal (Interactive/pty_drive.py) and `SIGUSR1`, through a link reset
/// and a receiver killed mid-take. Each marker and the pause must be in the CAF exactly once, where
/// they happened, and the audio around them sample-exact. The markers are read with the project's
/// CAF parser and, independently, straight from the chunks (Interactive/caf_markers.py).
final class MarkerEndToEndTests: XCTestCase {
    private var work: URL!
    private static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Interactive")

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("markers-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// A driver of `capture-send` through a pseudo-terminal, running `steps`.
    private func drive(_ steps: [String], senderArguments: [String]) throws -> ChildProcess {
        let stepsFile = work.appendingPathComponent("steps-\(UUID().uuidString)")
        try (steps.joined(separator: "\n") + "\n").write(to: stepsFile, atomically: true, encoding: .utf8)
        Unprivileged.handOver(stepsFile.path)
        // The driver runs as the test user and starts the sender through setpriv (as the
        // unprivileged user, on the driver's terminal): the unprivileged user may not reach the
        // checkout or the built products on its own (a clone in a private folder).
        let sender = Unprivileged.command(Products.send, senderArguments)
        return try ChildProcess(
            "/usr/bin/python3",
            [Self.scripts.appendingPathComponent("pty_drive.py").path, stepsFile.path, "--", sender.executable] + sender.arguments,
            environment: ["TERM": "xterm"], unprivileged: false)
    }

    /// Waits until the driver says it reached `point`.
    private func waitUntilReached(_ driver: ChildProcess, _ point: String, file: StaticString = #filePath, line: UInt = #line) {
        Resilience.waitUntil("the driver reached \(point)", seconds: 150, file: file, line: line) {
            driver.standardOutput.contains("reached \(point)\n") || !driver.process.isRunning
        }
        XCTAssertTrue(driver.standardOutput.contains("reached \(point)\n"), "\(driver.standardOutput)\n\(driver.standardError)", file: file, line: line)
    }

    /// Lets the driver go on past `await go-<name>`.
    private func letGo(_ name: String) throws {
        let path = work.appendingPathComponent("go-\(name)")
        try Data().write(to: path)
        Unprivileged.handOver(path.path)
    }

    private func occurrences(of text: String, in haystack: String) -> Int {
        haystack.components(separatedBy: text).count - 1
    }

    /// The markers as caf_markers.py reads them from the chunks.
    private func markersReadByPython(_ path: String) throws -> [CAFMarker] {
        let run = try ToolRunner.run("python3", [Self.scripts.appendingPathComponent("caf_markers.py").path, path])
        XCTAssertTrue(run.succeeded, run.errorText)
        let objects = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.standardOutput) as? [[String: Any]])
        return try objects.map { object in
            CAFMarker(framePosition: Int64(try XCTUnwrap(object["frame"] as? Int)), name: try XCTUnwrap(object["name"] as? String))
        }
    }

    /// Keys and SIGUSR1 drop markers and pause the take while the link is reset and the receiver is
    /// killed; the file holds each marker and the pause once, and the tone around them sample-exact.
    func testMarkersAndAPauseSurviveALinkResetAndAReceiverKillExactlyOnce() throws {
        let output = work.appendingPathComponent("out")
        let first = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: output)
        let proxy = try FaultProxy(upstreamPort: first.port, seed: 0x3A2C)
        let driver = try drive([
            "expect 1 interactive: space pauses",
            "expect 1 resumed=false",
            "keys mintro\\r",
            "expect 1 : marker dropped",
            "keys  ",
            "expect 1 capture paused",
            "say paused",
            "await \(work.appendingPathComponent("go-reset").path)",
            "keys  ",
            "expect 1 capture resumed",
            "say resumed",
            "await \(work.appendingPathComponent("go-resumed").path)",
            "signal USR1",
            "expect 2 : marker dropped",
            "say second-marker",
            "await \(work.appendingPathComponent("go-killed").path)",
            "keys mnach dem Neustart ✓\\r",
            "expect 3 : marker dropped",
            "keys q",
        ], senderArguments: [
            "-i", "127.0.0.1:\(proxy.port)", "--source", "tone", "--stream-name", "field-take", "--buffer-seconds", "0.1",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))

        // Paused: the link is reset; the sender reconnects and resumes.
        waitUntilReached(driver, "paused")
        proxy.resetAll()
        Resilience.waitUntil("the sender resumed after the reset", seconds: 120) {
            occurrences(of: "resumed=true", in: driver.standardError) >= 1 || !driver.process.isRunning
        }
        XCTAssertGreaterThanOrEqual(proxy.resetConnections, 1)
        try letGo("reset")

        // Resumed: once the pause's gap reached the receiver, audio goes on after it, and a marker
        // dropped now stands after the pause.
        waitUntilReached(driver, "resumed")
        Resilience.waitUntil("the pause's gap reached the receiver", seconds: 120) {
            first.child.standardError.contains("reason=paused") || !driver.process.isRunning
        }
        try letGo("resumed")

        // The second marker was just dropped (and may be unacknowledged): the receiver is killed.
        waitUntilReached(driver, "second-marker")
        first.child.signal(SIGKILL)
        first.child.wait()
        let second = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: output)
        proxy.upstreamPort = second.port
        Resilience.waitUntil("the second receiver resumed the stream", seconds: 120) {
            second.child.standardError.contains("stream resumed") || !driver.process.isRunning
        }
        try letGo("killed")

        XCTAssertEqual(Resilience.finish(driver, seconds: 150), 0, "\(driver.standardOutput)\n\(driver.standardError)")
        XCTAssertTrue(driver.standardOutput.contains("exit 0"), driver.standardOutput)
        XCTAssertEqual(second.files().count, 1, "one file for the take")
        let file = try XCTUnwrap(second.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)

        let userMarkers = caf.markers.filter { $0.userLabel != nil }
        XCTAssertEqual(userMarkers.map(\.name), ["marker: intro", "marker", "marker: nach dem Neustart ✓"], "each marker once, in order")
        XCTAssertEqual(userMarkers.map(\.framePosition), userMarkers.map(\.framePosition).sorted())
        let pauses = caf.markers.filter { $0.name.hasSuffix("frames not captured (paused)") }
        XCTAssertEqual(pauses.count, 1, "the pause is one gap: \(caf.markers)")
        XCTAssertEqual(caf.markers.count, 4, "nothing else is marked: \(caf.markers)")
        XCTAssertEqual(try markersReadByPython(file.path), caf.markers, "an independent reader of the chunks finds the same markers")

        // The audio: the tone up to the pause, silence for the pause, then the tone where it left off.
        let pause = try XCTUnwrap(pauses.first)
        let pausedFrames = try XCTUnwrap(Int(pause.name.split(separator: " ")[1]))
        let pauseStart = Int(pause.framePosition)
        XCTAssertGreaterThan(pausedFrames, 0)
        XCTAssertLessThanOrEqual(userMarkers[0].framePosition, pause.framePosition, "the first marker came before the pause")
        XCTAssertGreaterThanOrEqual(userMarkers[1].framePosition, pause.framePosition + Int64(pausedFrames), "the second after it")
        let total = Int(try XCTUnwrap(caf.totalFrames))
        let captured = total - pausedFrames
        let tone = try Resilience.toneBytes(frames: captured)
        let audio = try caf.readAudioData()
        XCTAssertEqual(audio.count, total * 4)
        let split = pauseStart * 4
        XCTAssertEqual(Array(audio[0..<split]), Array(tone[0..<split]), "the tone before the pause, sample-exact")
        XCTAssertTrue(audio[split..<(split + pausedFrames * 4)].allSatisfy { $0 == 0 }, "silence over the pause")
        XCTAssertEqual(Array(audio[(split + pausedFrames * 4)...]), Array(tone[split...]), "the tone after it, without a hole or a duplicate")
        XCTAssertEqual(second.stop(), 0)

        // Exported: Broadcast Wave cue points with the labels, FLAC chapters.
        let exports = work.appendingPathComponent("exports")
        let (_, cues) = try exportWAVWithCues(file, to: exports)
        XCTAssertEqual(cues.compactMap { $0["label"] as? String }, [
            "intro", "gap: \(pausedFrames) frames not captured (paused)", "marker", "nach dem Neustart ✓",
        ])
        XCTAssertEqual(cues.compactMap { $0["position"] as? Int }, caf.markers.map { Int($0.framePosition) })
        let flacExport = try ChildProcess(Products.recv, ["export", file.path, "--to", "flac", "--out", exports.path])
        XCTAssertEqual(flacExport.wait(), 0, flacExport.standardError)
        let flac = exports.appendingPathComponent(file.deletingPathExtension().lastPathComponent + ".flac").path
        let probe = try ToolRunner.run("ffprobe", ["-v", "error", "-show_chapters", "-of", "json", flac])
        XCTAssertTrue(probe.succeeded, probe.errorText)
        let chapters = try XCTUnwrap(probe.jsonObject?["chapters"] as? [[String: Any]])
        XCTAssertEqual(chapters.compactMap { ($0["tags"] as? [String: String])?["title"] }, ["intro", "marker 2", "nach dem Neustart ✓"])
    }

    /// Exports `file` to WAV in `folder` with the receiver's `export`, and reads the WAV's cue points
    /// with riff_cues.py: the WAV's path and its cues (`position`, `label`).
    private func exportWAVWithCues(_ file: URL, to folder: URL, line: UInt = #line) throws -> (wav: String, cues: [[String: Any]]) {
        try Unprivileged.makeDirectory(folder)
        let export = try ChildProcess(Products.recv, ["export", file.path, "--to", "wav", "--out", folder.path])
        XCTAssertEqual(export.wait(), 0, export.standardError, line: line)
        let wav = folder.appendingPathComponent(file.deletingPathExtension().lastPathComponent + ".wav").path
        let read = try ToolRunner.run("python3", [Self.scripts.appendingPathComponent("riff_cues.py").path, wav])
        XCTAssertTrue(read.succeeded, read.errorText, line: line)
        return (wav, try XCTUnwrap(try JSONSerialization.jsonObject(with: read.standardOutput) as? [[String: Any]], line: line))
    }

    /// The seconds on disk of the API's first stream row.
    private func secondsOnDisk(_ port: Int) -> Double? {
        guard let response = try? OpsHTTPClient.request(port: port, path: "/api/streams"), response.status == 200,
              let rows = (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [[String: Any]], let row = rows.first
        else { return nil }
        return row["seconds_on_disk"] as? Double
    }

    /// An Opus take paused from the keys: the pause's silence streams while the take is paused (the
    /// receiver's seconds on disk go on), and the file holds the pause as a gap 'paused' over
    /// decoded silence, between the tone before and after it, on the wall clock; the WAV export
    /// has its cue point.
    func testAnOpusPauseIsSilenceOnTheWallClockLabelledAsAPause() throws {
        let output = work.appendingPathComponent("out")
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions + ["--http", "127.0.0.1:0"], outputDirectory: output)
        let port = try receiver.httpPort()
        let driver = try drive([
            "expect 1 interactive: space pauses",
            "say started",
            "await \(work.appendingPathComponent("go-pause").path)",
            "keys  ",
            "expect 1 capture paused",
            "say paused",
            "await \(work.appendingPathComponent("go-resume").path)",
            "keys  ",
            "expect 1 capture resumed",
            "say resumed",
            "await \(work.appendingPathComponent("go-end").path)",
            "keys q",
        ], senderArguments: [
            "-i", "127.0.0.1:\(receiver.port)", "--source", "tone", "--codec", "opus", "--stream-name", "opus-take", "--buffer-seconds", "0.1",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))

        waitUntilReached(driver, "started")
        Resilience.waitUntil("a second of the tone before the pause", seconds: 120) {
            (secondsOnDisk(port) ?? 0) >= 1 || !driver.process.isRunning
        }
        try letGo("pause")
        waitUntilReached(driver, "paused")
        let atPause = secondsOnDisk(port) ?? 0
        Resilience.waitUntil("the pause's silence reaches the receiver while paused", seconds: 120) {
            (secondsOnDisk(port) ?? 0) >= atPause + 2 || !driver.process.isRunning
        }
        try letGo("resume")
        waitUntilReached(driver, "resumed")
        let atResume = secondsOnDisk(port) ?? 0
        Resilience.waitUntil("the tone after the pause reaches the receiver", seconds: 120) {
            (secondsOnDisk(port) ?? 0) >= atResume + 1 || !driver.process.isRunning
        }
        try letGo("end")
        XCTAssertEqual(Resilience.finish(driver, seconds: 150), 0, "\(driver.standardOutput)\n\(driver.standardError)")

        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.markers.count, 1, "the pause, and nothing else: \(caf.markers)")
        let pause = try XCTUnwrap(caf.markers.first)
        XCTAssertTrue(pause.name.hasPrefix("gap: ") && pause.name.hasSuffix(" frames not captured (paused)"), pause.name)
        let pausedFrames = try XCTUnwrap(Int(pause.name.split(separator: " ")[1]))
        XCTAssertGreaterThanOrEqual(pausedFrames, 72_000, "the pause lasted while 2 s of its silence reached the receiver")
        XCTAssertEqual(try markersReadByPython(file.path), caf.markers, "an independent reader of the chunks finds the same marker")
        XCTAssertTrue(receiver.child.standardError.contains("reason=paused"), receiver.child.standardError)
        XCTAssertEqual(receiver.stop(), 0)

        // Decoded (the WAV export, through libopus): the tone, silence over the pause, the tone again.
        let exports = work.appendingPathComponent("exports")
        let (wav, cues) = try exportWAVWithCues(file, to: exports)
        XCTAssertEqual(cues.compactMap { $0["label"] as? String }, [pause.name])
        let start = try XCTUnwrap(cues.first?["position"] as? Int)
        let end = start + pausedFrames
        // Around each edge 100 ms are left out (the codec's overlap, the marker's place within a
        // capture buffer); after the tone stops, Opus's decoded energy decays for about 250 ms (CELT
        // lowers a band's energy by a bounded step per frame) before it is exactly 0.
        let peaks = try ToolRunner.run("python3", [
            Self.scripts.appendingPathComponent("wav_peaks.py").path, wav,
            "\(max(0, start - 24_000)):\(start - 4_800)", "\(start + 16_800):\(end - 4_800)", "\(end + 4_800):\(end + 24_000)",
            "\(start + 4_800):\(start + 16_800)",
        ])
        XCTAssertTrue(peaks.succeeded, peaks.errorText)
        let measured = try XCTUnwrap(peaks.jsonObject)
        let values = try XCTUnwrap(measured["peaks"] as? [Int])
        let frames = try XCTUnwrap(measured["frames"] as? Int)
        XCTAssertGreaterThan(frames, end + 24_000, "the tone goes on after the pause")
        XCTAssertEqual(values.count, 4)
        // -12 dBFS is 0.25 of full scale: 2,097,152 in 24 bits.
        XCTAssertGreaterThan(values[0], 1_500_000, "the tone before the pause")
        if values[1] != 0 {
            let windows = stride(from: start - 4_800, to: end + 4_800, by: 2_400).map { "\($0):\($0 + 2_400)" }
            let detail = try ToolRunner.run("python3", [Self.scripts.appendingPathComponent("wav_peaks.py").path, wav] + windows)
            XCTFail("digital silence over the pause (\(start)..<\(end)): \(values); peaks of 2400-frame windows from \(start - 4_800): \(String(decoding: detail.standardOutput, as: UTF8.self))")
        }
        XCTAssertGreaterThan(values[2], 1_500_000, "the tone after it")
        XCTAssertLessThanOrEqual(values[3], 8_388, "below -60 dBFS from 100 ms into the pause")
    }

    /// `-i` is refused, clearly, when standard input is not a terminal.
    func testInteractiveNeedsATerminal() throws {
        let sender = try ChildProcess(Products.send, ["-i", "127.0.0.1:9", "--source", "tone", "--duration", "1"])
        XCTAssertNotEqual(sender.wait(seconds: 30), 0)
        XCTAssertTrue(sender.standardError.contains("--interactive (-i) needs a terminal on standard input"), sender.standardError)
    }

    /// Escape cancels a label being typed (no marker), Backspace erases, and `q` stops the take as
    /// the first Ctrl-C does: the sender delivers what it captured and exits 0.
    func testKeysCancelEraseAndStop() throws {
        let receiver = try ReceiverUnderTest()
        let driver = try drive([
            "expect 1 resumed=false",
            "keys mdropped\\x1b",
            "expect 1 marker cancelled",
            "keys mtakx\\x7fe 2\\r",
            "expect 1 : marker dropped",
            "keys q",
            "expect 1 stopping capture",
        ], senderArguments: [
            "-i", receiver.address, "--source", "tone", "--stream-name", "keys", "--buffer-seconds", "0.1",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))
        XCTAssertEqual(Resilience.finish(driver, seconds: 150), 0, "\(driver.standardOutput)\n\(driver.standardError)")
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(caf.markers.map(\.name), ["marker: take 2"])
        XCTAssertEqual(try markersReadByPython(file.path), caf.markers)
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// SIGUSR1 drops a marker without a label, with or without -i; each one lands once.
    func testSIGUSR1DropsAMarker() throws {
        let receiver = try ReceiverUnderTest()
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--stream-name", "usr1", "--buffer-seconds", "0.1", "--duration", "600",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))
        Resilience.waitUntil("the stream is accepted") { sender.standardError.contains("resumed=false") || !sender.process.isRunning }
        for count in 1...3 {
            sender.signal(SIGUSR1)
            Resilience.waitUntil("marker \(count) was dropped") {
                occurrences(of: ": marker dropped", in: sender.standardError) >= count || !sender.process.isRunning
            }
            // Markers at the same sample with the same label are one: let audio move on first.
            let size = Resilience.size(receiver.files().first)
            Resilience.waitUntil("audio after marker \(count) is in the file") {
                Resilience.size(receiver.files().first) > size + 2 * 19_200 || !sender.process.isRunning
            }
        }
        sender.signal(SIGINT)
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertEqual(caf.markers.map(\.name), ["marker", "marker", "marker"], sender.standardError)
        XCTAssertEqual(try markersReadByPython(file.path), caf.markers)
        XCTAssertEqual(receiver.stop(), 0)
    }
}

/// A receiver older than markers (its HelloAccepted lists no frame types) is never sent one: a
/// marker dropped once it answered is refused at once, and one dropped before it answered stops the
/// delivery at the marker, saying to upgrade the receiver, with the audio kept in the spool.
final class MarkerOlderReceiverTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("markers-old-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// An older receiver: HelloAccepted without `accepted_frame_types`, after `delay` seconds.
    private func olderReceiver(delay: Double) throws -> ScriptedReceiver {
        try ScriptedReceiver(delay: delay) { hello in
            [.helloAccepted(.with {
                $0.nextSequence = 1
                $0.nextSampleTime = hello.startSampleTime
                $0.heartbeatIntervalMs = 5_000
                $0.maxFrameBytes = UInt32(WireProtocol.defaultMaxFrameBytes)
                $0.fileName = "older.caf"
            })]
        }
    }

    /// The frame types in what the sender sent on every connection that ended.
    private func frameTypes(_ receiver: ScriptedReceiver) -> [WireMessageType] {
        receiver.bytesSent.flatMap { bytes -> [WireMessageType] in
            var decoder = FrameDecoder(role: .receiver)
            return ((try? decoder.decode(bytes)) ?? []).map(\.type)
        }
    }

    /// A sender to `receiver` that reconnects fast and waits the default 20 s for an answer.
    private func sender(_ receiver: ScriptedReceiver) throws -> ChildProcess {
        try ChildProcess(Products.send, [
            "127.0.0.1:\(receiver.port)", "--source", "tone", "--stream-name", "older", "--buffer-seconds", "0.1",
            "--spool", work.appendingPathComponent("spool").path, "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--log-level", "info",
        ])
    }

    func testAMarkerForAnOlderReceiverIsRefusedOnceItAnswered() throws {
        let receiver = try olderReceiver(delay: 0)
        defer { receiver.stop() }
        let sender = try sender(receiver)
        Resilience.waitUntil("the older receiver accepted the stream") { sender.standardError.contains("resumed=false") || !sender.process.isRunning }
        sender.signal(SIGUSR1)
        Resilience.waitUntil("the marker was refused") { sender.standardError.contains("no marker dropped") || !sender.process.isRunning }
        XCTAssertTrue(sender.standardError.contains("does not accept markers (it predates them): upgrade capture-recv there"), sender.standardError)
        XCTAssertTrue(sender.process.isRunning, "the stream goes on")
        sender.signal(SIGKILL)
        sender.wait()
        Resilience.waitUntil("the connection ended at the receiver") { !receiver.bytesSent.isEmpty }
        let types = frameTypes(receiver)
        XCTAssertTrue(types.contains(.audioData), "audio went on: \(types)")
        XCTAssertFalse(types.contains(.marker), "no Marker frame reached the older receiver")
    }

    func testAMarkerDroppedBeforeAnOlderReceiverAnsweredStopsTheDeliveryThere() throws {
        // The receiver answers 5 s after the Hello: the marker is dropped well before.
        let receiver = try olderReceiver(delay: 5)
        defer { receiver.stop() }
        let sender = try sender(receiver)
        Resilience.waitUntil("capture started") { sender.standardError.contains(": capturing") || !sender.process.isRunning }
        sender.signal(SIGUSR1)
        Resilience.waitUntil("the marker was dropped") { sender.standardError.contains(": marker dropped") || !sender.process.isRunning }
        XCTAssertEqual(receiver.connectionsServed, 0, "the marker came before the receiver's answer: \(sender.standardError)")
        Resilience.waitUntil("the sender stopped at the marker", seconds: 120) {
            sender.standardError.contains("does not accept markers (it predates them): upgrade capture-recv") || !sender.process.isRunning
        }
        XCTAssertTrue(sender.process.isRunning, "the sender keeps the stream and retries: \(sender.standardError)")
        sender.signal(SIGKILL)
        sender.wait()
        Resilience.waitUntil("the connection ended at the receiver") { !receiver.bytesSent.isEmpty }
        XCTAssertFalse(frameTypes(receiver).contains(.marker), "no Marker frame reached the older receiver")
        let spooled = try FileManager.default.contentsOfDirectory(atPath: work.appendingPathComponent("spool").path)
        XCTAssertEqual(spooled.count, 1, "the stream, marker and audio, stays in the spool")
    }
}
