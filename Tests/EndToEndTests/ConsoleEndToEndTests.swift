import CAF
import CSndFile
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// capture-recv --http with the real executables: the streams API and its events show a live tone
/// at the level it was sent, and access off loopback needs a token.
final class ConsoleEndToEndTests: XCTestCase {
    private func rows(_ port: Int, headers: [String: String] = [:]) -> [[String: Any]] {
        guard let response = try? OpsHTTPClient.request(port: port, path: "/api/streams", headers: headers), response.status == 200 else { return [] }
        return (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [[String: Any]] ?? []
    }

    func testTheAPIShowsALiveToneAtItsLevelAndItsEventsStream() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        // capture-send's tone: 440 Hz, peak -12 dBFS (a sine: RMS 3 dB lower).
        let sender = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "6", "--stream-name", "levels-e2e", "--buffer-seconds", "0.1"])
        var row: [String: Any] = [:]
        XCTAssertTrue(waitFor(20) {
            row = rows(port).first ?? [:]
            return row["levels"] is [String: Any] && (row["seconds_acknowledged"] as? Double ?? 0) > 0.5
        }, "\(row)")
        XCTAssertEqual(row["name"] as? String, "levels-e2e")
        XCTAssertEqual(row["state"] as? String, "live")
        XCTAssertEqual(row["format"] as? String, "s16 48000 Hz 2 ch")
        XCTAssertTrue((row["file"] as? String ?? "").hasPrefix("levels-e2e_"), "\(row)")
        XCTAssertTrue((row["peer"] as? String ?? "").hasPrefix("127.0.0.1:"), "\(row)")
        XCTAssertNotNil(row["last_audio_received"] as? String)
        XCTAssertEqual(row["gap_count"] as? Int, 0)
        XCTAssertLessThanOrEqual(row["seconds_acknowledged"] as? Double ?? 99, row["seconds_on_disk"] as? Double ?? 0)
        let levels = try XCTUnwrap(row["levels"] as? [String: Any])
        let peaks = try XCTUnwrap(levels["peak_dbfs"] as? [Double])
        XCTAssertEqual(peaks.count, 2)
        for peak in peaks { XCTAssertEqual(peak, -12, accuracy: 0.5, "peak of a -12 dBFS tone") }
        for rms in levels["rms_dbfs"] as? [Double] ?? [] { XCTAssertEqual(rms, -15, accuracy: 0.5, "RMS of a sine 3 dB below its peak") }
        // The sender's loudness, shown as it sent it: ffmpeg's ebur128 measures a stereo 440 Hz sine
        // peaking at -12 dBFS at -12.7 LUFS, with a true peak of -12.0 dBTP.
        XCTAssertEqual(try XCTUnwrap(levels["momentary_lufs"] as? Double, "\(levels)"), -12.7, accuracy: 0.5)
        let shortTerm = try XCTUnwrap(levels["short_term_lufs"] as? Double, "\(levels)")
        XCTAssertLessThanOrEqual(shortTerm, -12.2, "the 3 s window still holds silence before the tone's first seconds")
        let truePeaks = try XCTUnwrap(levels["true_peak_dbtp"] as? [Double], "\(levels)")
        XCTAssertEqual(truePeaks.count, 2)
        for truePeak in truePeaks { XCTAssertEqual(truePeak, -12, accuracy: 0.5) }
        let id = try XCTUnwrap(row["id"] as? String)
        let one = try OpsHTTPClient.request(port: port, path: "/api/streams/\(id)")
        XCTAssertEqual(one.status, 200)

        // About ten levels events a second while the tone plays.
        let events = String(decoding: try OpsHTTPClient.stream(port: port, path: "/api/events", seconds: 2), as: UTF8.self)
            .replacingOccurrences(of: "\r\n", with: "\n")
        let levelLines = events.components(separatedBy: "\n\n").filter { $0.contains("event: levels") }
        XCTAssertGreaterThanOrEqual(levelLines.count, 8, events)
        XCTAssertLessThanOrEqual(levelLines.count, 24, "coalesced to about 10 a second: \(levelLines.count)")
        let data = try XCTUnwrap(levelLines.first?.components(separatedBy: "\n").first { $0.hasPrefix("data: ") })
        let update = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(data.dropFirst(6).utf8)) as? [String: Any])
        XCTAssertEqual(update["id"] as? String, id)
        XCTAssertEqual((update["peak_dbfs"] as? [Double])?.first ?? 0, -12, accuracy: 0.5)
        XCTAssertEqual(update["momentary_lufs"] as? Double ?? 0, -12.7, accuracy: 0.5, "levels events carry the loudness too")

        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        XCTAssertTrue(waitFor { (rows(port).first?["state"] as? String) == "finished" })
        XCTAssertEqual(rows(port).first?["seconds_on_disk"] as? Double ?? 0, 6, accuracy: 0.001)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    /// The dominant frequency of 16-bit mono samples, from their zero crossings.
    private func frequency(ofRaw data: Data, rate: Double = 48_000) -> Double {
        let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.dropFirst(Int(rate / 5))
        var crossings = 0
        var previous = samples.first ?? 0
        for sample in samples.dropFirst() {
            if (previous < 0) != (sample < 0) { crossings += 1 }
            previous = sample
        }
        return Double(crossings) / 2 / (Double(samples.count) / rate)
    }

    /// Decodes `seconds` of the listen URL with ffmpeg (an independent client and decoder) to
    /// 48 kHz mono s16.
    private func listen(port: Int, id: String, seconds: Int, into folder: URL) throws -> Data {
        let output = folder.appendingPathComponent("listen-\(UUID().uuidString).raw")
        let decoded = try ToolRunner.run("ffmpeg", [
            "-v", "error", "-i", "http://127.0.0.1:\(port)/api/streams/\(id)/listen", "-t", "\(seconds)",
            "-f", "s16le", "-ac", "1", "-ar", "48000", output.path,
        ])
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        return (try? Data(contentsOf: output)) ?? Data()
    }

    func testListeningToALivePCMToneGives440HzWhileASlowListenerChangesNothingInTheRecording() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("listen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        let sender = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "10", "--stream-name", "listen-pcm", "--buffer-seconds", "0.1"])
        var id = ""
        XCTAssertTrue(waitFor(20) {
            id = rows(port).first?["id"] as? String ?? ""
            return !id.isEmpty
        })
        // A listener that never reads, with a tiny receive buffer: the hub must drop it, not wait.
        let slow = try SlowHTTPClient(port: port, path: "/api/streams/\(id)/listen")
        let decoded = try listen(port: port, id: id, seconds: 3, into: folder)
        XCTAssertGreaterThanOrEqual(decoded.count, 2 * 48_000 * 5 / 2, "about 3 s of audio decoded: \(decoded.count) bytes")
        XCTAssertEqual(frequency(ofRaw: decoded), 440, accuracy: 2, "the listen URL carries the tone")
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)
        slow.close()
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertEqual(caf.totalFrames, 480_000)
        XCTAssertTrue(try caf.readAudioData() == (try Resilience.toneBytes(frames: 480_000)), "the recording is bit-exact with listeners attached")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testListeningToALiveOpusStreamRemuxesItAt440Hz() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("listen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        let sender = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "8", "--codec", "opus", "--stream-name", "listen-opus", "--buffer-seconds", "0.1"])
        var id = ""
        XCTAssertTrue(waitFor(20) {
            id = rows(port).first?["id"] as? String ?? ""
            return !id.isEmpty
        })
        let decoded = try listen(port: port, id: id, seconds: 3, into: folder)
        XCTAssertGreaterThanOrEqual(decoded.count, 2 * 48_000 * 5 / 2)
        XCTAssertEqual(frequency(ofRaw: decoded), 440, accuracy: 2)
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)
        let notLive = try OpsHTTPClient.request(port: port, path: "/api/streams/\(id)/listen")
        XCTAssertEqual(notLive.status, 404, "a finished stream is not live")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testTheConsoleInARealBrowserListsStreamsMovesItsMetersAndPlays() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"),
              (try? ToolRunner.run("python3", ["-c", "import selenium"]))?.succeeded == true
        else { throw XCTSkip("chromium, chromium-driver and selenium are installed by scripts/install-deps.sh") }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("browser-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(folder)
        defer { try? FileManager.default.removeItem(at: folder) }
        // Field audio whose level changes every quarter second, so the meters must move.
        let wav = folder.appendingPathComponent("varying.wav").path
        let rate = 48_000
        var ints: [Int32] = []
        for index in 0..<(rate * 40) {
            let loud = (index / (rate / 4)) % 2 == 0
            let value = (loud ? 0.5 : 0.03) * sin(2 * Double.pi * 440 * Double(index) / Double(rate))
            let sample = Int32(value * Double(Int32.max))
            ints.append(sample)
            ints.append(sample)
        }
        try writeWAV(path: wav, subtype: Int32(SF_FORMAT_PCM_16), rate: rate, channels: 2, ints: ints)
        Unprivileged.handOver(wav)
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try receiver.httpPort()
        let senders = try ["ridge-north", "ridge-south"].map { name in
            try ChildProcess(Products.send, [receiver.address, "--source", "file", "--file", wav, "--stream-name", name, "--buffer-seconds", "0.1"])
        }
        defer { senders.forEach { $0.signal(SIGKILL) } }
        XCTAssertTrue(waitFor(20) { rows(port).count == 2 })
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/console_browser.py").path
        let screenshot = folder.appendingPathComponent("console.png").path
        let run = try ToolRunner.run("python3", [script, "http://127.0.0.1:\(port)/", "2", screenshot])
        XCTAssertTrue(run.succeeded, run.errorText)
        let seen = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.standardOutput) as? [String: Any], run.outputText)
        XCTAssertEqual(seen["rows"] as? Int, 2, "\(seen)")
        XCTAssertEqual(seen["names"] as? [String], ["ridge-north", "ridge-south"])
        XCTAssertEqual(seen["states"] as? [String], ["live", "live"])
        XCTAssertEqual(seen["link"] as? String, "live", "the page follows the event stream")
        XCTAssertEqual(seen["meter_pictures_differ"] as? Bool, true, "the meters move: \(seen)")
        XCTAssertGreaterThan(Set(seen["meter_widths"] as? [String] ?? []).count, 1, "the meter widths change: \(seen)")
        let times = seen["current_times"] as? [Double] ?? []
        XCTAssertGreaterThan(times.last ?? 0, 1.0, "the <audio> element plays the stream: \(seen)")
        XCTAssertTrue(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 }, "its time only advances: \(times)")
        XCTAssertTrue(seen["audio_error"] is NSNull, "\(seen)")
        XCTAssertEqual(seen["button"] as? String, "Stop")
        XCTAssertTrue(FileManager.default.fileExists(atPath: screenshot))
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    /// SIGTERM with a browser attached (its event stream open) ends the receiver with status 0, every
    /// time. The HTTP server once ran a signal handler of its own and could end before the receiver's
    /// shutdown reached it: the receiver then exited 1 ("a service has finished unexpectedly").
    func testSIGTERMWithAnOpenEventStreamEndsTheReceiverCleanlyEveryTime() throws {
        for round in 1...12 {
            let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
            let port = try receiver.httpPort()
            let events = try ChildProcess("/usr/bin/curl", ["-sN", "--max-time", "30", "http://127.0.0.1:\(port)/api/events"])
            defer { events.signal(SIGKILL) }
            XCTAssertTrue(waitFor { events.standardOutput.contains("retry: 2000") }, "round \(round): the event stream is open")
            XCTAssertEqual(receiver.stop(), 0, "round \(round): \(receiver.child.standardError)")
            XCTAssertEqual(events.wait(seconds: 10), 0, "round \(round): the event stream ended when the receiver stopped")
        }
    }

    func testAnAddressBeyondLoopbackNeedsATokenAndIsOpenWithIt() throws {
        let refused = try ToolRunner.run(Products.recv, ["--out", NSTemporaryDirectory() + "never-\(UUID().uuidString)", "--http", "0.0.0.0:0"])
        XCTAssertNotEqual(refused.exitStatus, 0)
        let lines = refused.errorText.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, refused.errorText)
        XCTAssertTrue(refused.errorText.contains("--http 0.0.0.0 is reachable from other machines, and the console plays live audio: give --http-token-file FILE"), refused.errorText)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("console-token-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(folder)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokenFile = folder.appendingPathComponent("tokens")
        try "console-secret-token-1\n".write(to: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile.path, 0o600)
        Unprivileged.handOver(tokenFile.path)
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "0.0.0.0:0", "--http-token-file", tokenFile.path])
        let port = try receiver.httpPort()
        XCTAssertEqual(try OpsHTTPClient.request(port: port, path: "/api/streams").status, 401)
        XCTAssertEqual(try OpsHTTPClient.request(port: port, path: "/metrics").status, 401)
        let allowed = try OpsHTTPClient.request(port: port, path: "/api/streams", headers: ["Authorization": "Bearer console-secret-token-1"])
        XCTAssertEqual(allowed.status, 200)
        XCTAssertEqual(allowed.body, "[]")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}

/// An HTTP client that asks for a streaming response and never reads it (a listener on a stalled
/// network), with a tiny receive buffer so the server's sends back up quickly.
final class SlowHTTPClient {
    private var descriptor: Int32

    init(port: Int, path: String) throws {
        descriptor = try LoopbackSocket.connect(port: port, receiveBufferBytes: 4_096)
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func close() {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
        descriptor = -1
    }

    deinit { close() }
}
