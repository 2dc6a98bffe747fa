import CAF
import CSndFile
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `--segment` and `--name-template` (issue 17, items 1-3) with the real executables: a stream cut
/// at 10 s UTC boundaries of its own timeline, its link reset again and again (so it resumes across
/// boundaries), tiles exactly: no sample lost, none repeated, each file its own 10 s.
final class SegmentTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("segments-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// A 35 s stereo s16 WAV whose every sample is distinct (a frame counter on the left, its
    /// negation on the right), so any lost or repeated frame shows.
    private func counterSource(seconds: Int) throws -> (path: String, ints: [Int32]) {
        let frames = 48_000 * seconds
        var ints: [Int32] = []
        ints.reserveCapacity(frames * 2)
        for frame in 0..<frames {
            let value = Int32(truncatingIfNeeded: Int16(truncatingIfNeeded: frame &* 7 &+ frame >> 16))
            ints.append(value << 16)
            ints.append(Int32(truncatingIfNeeded: Int16(truncatingIfNeeded: ~(frame >> 3))) << 16)
        }
        let path = work.appendingPathComponent("counter.wav").path
        try writeWAV(path: path, subtype: Int32(SF_FORMAT_PCM_16), rate: 48_000, channels: 2, ints: ints)
        Unprivileged.handOver(path)
        return (path, ints)
    }

    /// Every CAF file under `folder`, with its path relative to it.
    private func recordings(in folder: URL) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        var found: [String] = []
        while let name = enumerator?.nextObject() as? String {
            if name.hasSuffix(".caf"), !name.hasPrefix(".") { found.append(name) }
        }
        return found.sorted()
    }

    private func info(_ file: CAFFile, _ key: String) -> String? { file.info.first(where: { $0.key == key })?.value }

    private func nanoseconds(_ iso: String) throws -> Int64 {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = try XCTUnwrap(formatter.date(from: iso), iso)
        return Int64((date.timeIntervalSince1970 * 1e6).rounded()) * 1_000
    }

    func testSegmentsOfAResumedPCMStreamTileItExactlyAndAreNamedByTheTemplate() throws {
        let (source, ints) = try counterSource(seconds: 35)
        let receiver = try ReceiverUnderTest(extraArguments: [
            "--segment", "10s", "--name-template", "{stream}/%Y/%m/%d/{stream}_%H%M%S", "--log-level", "info",
        ])
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 11)
        link.mode = .resetAfterRandomBytes(400_000...1_500_000)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(link.port)", "--source", "file", "--file", source, "--no-pace", "--stream-name", "tiles",
            "--spool", work.appendingPathComponent("spool").path, "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--log-level", "info",
        ])
        XCTAssertEqual(Resilience.finish(sender, seconds: 120), 0, sender.standardError)
        XCTAssertGreaterThanOrEqual(link.acceptedConnections, 3, "the link was reset: the stream resumed")

        let names = recordings(in: receiver.directory)
        XCTAssertGreaterThanOrEqual(names.count, 4, "35 s in 10 s segments: \(names)")
        XCTAssertLessThanOrEqual(names.count, 5, "\(names)")
        var files: [(name: String, caf: CAFFile, first: Int64)] = []
        for name in names {
            // {stream}/%Y/%m/%d/{stream}_%H%M%S.caf
            let parts = name.split(separator: "/")
            XCTAssertEqual(parts.count, 5, name)
            XCTAssertEqual(parts.first, "tiles", name)
            let caf = try CAFFile.read(path: receiver.directory.appendingPathComponent(name).path)
            XCTAssertTrue(caf.isFinalized, name)
            let first = try XCTUnwrap(info(caf, "first valid sample").flatMap { Int64($0) }, name)
            files.append((name, caf, first))
        }
        files.sort { $0.first < $1.first }
        XCTAssertEqual(files.first?.first, 0)

        // Concatenated, read by libsndfile: the source, bit-exact.
        var joined: [Int32] = []
        for (index, file) in files.enumerated() {
            let path = receiver.directory.appendingPathComponent(file.name).path
            let audio = try SndFileReader.read(path: path)
            XCTAssertEqual(Int64(joined.count / 2), file.first, "\(file.name) begins where the one before ends")
            joined += audio.int32Samples
            // Each file is named by, and records, the UTC time of its first sample; after the first
            // that is a 10 s boundary (to within one sample period).
            let start = try nanoseconds(try XCTUnwrap(info(file.caf, "first sample time")))
            if index > 0 {
                XCTAssertLessThan(start % 10_000_000_000, 21_000 + 1_000, "\(file.name) starts on a 10 s boundary: \(start)")
                if index < files.count - 1 { XCTAssertEqual(audio.frames, 480_000, "\(file.name) holds exactly 10 s") }
            }
            let clock = FileNameTemplateClock(nanoseconds: start)
            XCTAssertEqual(String(file.name.split(separator: "/").last ?? ""), "tiles_\(clock.hhmmss).caf", "named by its start time")
            XCTAssertEqual(info(file.caf, "source host")?.isEmpty, false)
            XCTAssertTrue(["yes", "no", "unknown"].contains(info(file.caf, "clock synchronized") ?? ""), "\(file.caf.info)")
        }
        XCTAssertEqual(joined.count, ints.count, "every frame once")
        XCTAssertTrue(joined == ints, "the segments concatenated are the source, bit-exact")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// The receiver is SIGKILLed after its first cut and restarted on the same folder: the stream
    /// resumes in the segment the index names, the sender catches up across the next boundaries, and
    /// the segments still tile the tone exactly.
    func testAReceiverKilledAfterACutResumesInTheRightSegmentAndTheSegmentsStillTileTheStream() throws {
        let output = work.appendingPathComponent("out")
        let options = Resilience.receiverOptions + ["--segment", "4s"]
        let first = try ReceiverUnderTest(extraArguments: options, outputDirectory: output)
        let proxy = try FaultProxy(upstreamPort: first.port, seed: 13)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(proxy.port)", "--source", "tone", "--duration", "13", "--stream-name", "cut-kill",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))
        Resilience.waitUntil("the first segment was cut") { self.recordings(in: output).count >= 2 }
        Thread.sleep(forTimeInterval: 0.5)
        first.child.signal(SIGKILL)
        first.child.wait()
        Thread.sleep(forTimeInterval: 1)
        let second = try ReceiverUnderTest(extraArguments: options, outputDirectory: output)
        proxy.upstreamPort = second.port
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        XCTAssertTrue(second.child.standardError.contains("stream resumed"), second.child.standardError)

        var files: [(path: String, first: Int64, frames: Int)] = []
        for name in recordings(in: output) {
            let path = output.appendingPathComponent(name).path
            let caf = try CAFFile.read(path: path)
            XCTAssertTrue(caf.isFinalized, name)
            files.append((path, try XCTUnwrap(info(caf, "first valid sample").flatMap { Int64($0) }), try SndFileReader.read(path: path).frames))
        }
        files.sort { $0.first < $1.first }
        XCTAssertGreaterThanOrEqual(files.count, 4, "13 s in 4 s segments: \(files.map(\.path))")
        var joined: [UInt8] = []
        for (index, file) in files.enumerated() {
            XCTAssertEqual(Int64(joined.count / 4), file.first, "\(file.path) begins where the one before ends")
            let audio = try CAFFile.read(path: file.path).readAudioData()
            XCTAssertEqual(audio.count / 4, file.frames, "libsndfile reads what the file holds")
            if index > 0, index < files.count - 1 { XCTAssertEqual(file.frames, 4 * 48_000, "a whole segment: \(file.path)") }
            joined += audio
        }
        XCTAssertTrue(joined == (try Resilience.toneBytes(frames: 13 * 48_000)), "the segments are the tone, once: \(joined.count / 4) frames")
        XCTAssertEqual(second.stop(), 0)
        _ = first
    }

    /// A stream spoken byte by byte: its start 2.5 s after a 10 s boundary, a gap over the first
    /// boundary, an AudioData straddling the second. The gap's marker stays in the file where it
    /// begins, its silence is split between the files, and the straddling message is cut at its
    /// boundary frame.
    func testAGapOverABoundaryKeepsItsMarkerWhereItBeginsAndAMessageIsCutAtItsBoundaryFrame() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--segment", "10s"])
        let second: Int64 = 1_000_000_000
        let now = Int64(Date().timeIntervalSince1970) * second
        let start = now / (10 * second) * (10 * second) - 30 * second + 2_500_000_000
        func audio(_ sequence: UInt64, from first: Int64, frames: Int) -> WireMessage {
            var payload = Data(count: frames * 4)
            payload.withUnsafeMutableBytes { raw in
                let samples = raw.bindMemory(to: Int16.self)
                for frame in 0..<frames {
                    let value = Int16(truncatingIfNeeded: (first + Int64(frame)) &* 3 | 1)
                    samples[frame * 2] = value
                    samples[frame * 2 + 1] = ~value
                }
            }
            return .audioData(.with {
                $0.sequence = sequence; $0.firstSampleTime = first; $0.packetCount = UInt32(frames); $0.frameCount = UInt32(frames); $0.payload = payload
            })
        }
        let client = try ProtocolClient(port: receiver.port, timeout: 20)
        try client.sendPreamble()
        try client.send(.hello(.with {
            $0.protocolVersion = 1
            $0.streamID = UUID().wireBytes
            $0.streamName = "gaps"
            $0.startTimeUnixNs = start
            $0.format = Capture_V1_StreamFormat(.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            $0.resumeSecret = Data(repeating: 7, count: 32)
        }))
        guard case .helloAccepted = try client.nextAnswer() else { return XCTFail("not accepted: \(receiver.child.standardError)") }
        var messages: [WireMessage] = [audio(1, from: 0, frames: 100_000), audio(2, from: 100_000, frames: 100_000), audio(3, from: 200_000, frames: 100_000)]
        // A gap over the boundary at 7.5 s (frame 360,000).
        messages.append(.gap(.with { $0.sequence = 4; $0.sampleTime = 300_000; $0.lengthFrames = 100_000; $0.reason = "overrun" }))
        for index in 0..<5 { messages.append(audio(UInt64(5 + index), from: 400_000 + Int64(index) * 100_000, frames: 100_000)) }
        // The last one, [800,000, 900,000), straddles the boundary at 17.5 s (frame 840,000).
        messages.append(.endOfStream(.with { $0.lastSequence = 9; $0.endSampleTime = 900_000; $0.reason = "end-of-file" }))
        for message in messages { try client.send(message) }
        guard case .endAccepted = try client.nextAnswer() else { return XCTFail("no EndAccepted: \(receiver.child.standardError)") }

        var files: [(caf: CAFFile, first: Int64, path: String)] = []
        for file in receiver.files() {
            let caf = try CAFFile.read(path: file.path)
            files.append((caf, try XCTUnwrap(info(caf, "first valid sample").flatMap { Int64($0) }), file.path))
        }
        files.sort { $0.first < $1.first }
        XCTAssertEqual(files.map(\.first), [0, 360_000, 840_000], "cut at 7.5 s and 17.5 s")
        XCTAssertEqual(files.map { $0.caf.totalFrames }, [360_000, 480_000, 60_000])
        XCTAssertEqual(files[0].caf.markers.map(\.framePosition), [300_000], "the gap's marker where it begins")
        XCTAssertEqual(files[0].caf.markers.first?.name, "gap: 100000 frames not captured (overrun)")
        XCTAssertEqual(files[1].caf.markers, [])
        XCTAssertEqual(files[2].caf.markers, [])
        // Read by libsndfile: the audio with the gap's silence, in order.
        var joined: [Int32] = []
        for file in files { joined += try SndFileReader.read(path: file.path).int32Samples }
        XCTAssertEqual(joined.count, 900_000 * 2)
        for frame in stride(from: 0, to: 900_000, by: 997) {
            let expected: Int32 = (300_000..<400_000).contains(frame) ? 0 : Int32(Int16(truncatingIfNeeded: Int64(frame) &* 3 | 1)) << 16
            XCTAssertEqual(joined[frame * 2], expected, "frame \(frame)")
        }
        XCTAssertEqual(joined[839_999 * 2], Int32(Int16(truncatingIfNeeded: Int64(839_999) &* 3 | 1)) << 16)
        XCTAssertEqual(joined[840_000 * 2], Int32(Int16(truncatingIfNeeded: Int64(840_000) &* 3 | 1)) << 16)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testOpusSegmentsEachDecodeAloneAndTheirValidFramesTileTheStream() throws {
        let (source, _) = try counterSource(seconds: 25)
        let receiver = try ReceiverUnderTest(extraArguments: ["--segment", "10s", "--log-level", "info"])
        let (status, stderr) = try runSender([
            receiver.address, "--source", "file", "--file", source, "--no-pace", "--codec", "opus", "--stream-name", "opus-tiles",
        ])
        XCTAssertEqual(status, 0, stderr)
        let files = receiver.files()
        XCTAssertGreaterThanOrEqual(files.count, 3, "\(files)")
        var segments: [(caf: CAFFile, first: Int64, path: String)] = []
        for file in files {
            let caf = try CAFFile.read(path: file.path)
            segments.append((caf, try XCTUnwrap(info(caf, "first valid sample").flatMap { Int64($0) }), file.path))
        }
        segments.sort { $0.first < $1.first }
        var expectedFirst: Int64 = 0
        for (index, segment) in segments.enumerated() {
            let table = try XCTUnwrap(segment.caf.packetTable, segment.path)
            XCTAssertEqual(segment.first, expectedFirst, "valid frames tile the stream")
            expectedFirst += table.validFrames
            if index > 0 {
                // 80 ms of pre-roll (4 packets of 960 frames) plus the boundary's offset in its packet.
                XCTAssertGreaterThanOrEqual(table.primingFrames, 3_840, "pre-roll counted in the priming")
                XCTAssertLessThan(table.primingFrames, 3_840 + 960)
            }
            // Each segment decodes on its own.
            let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", segment.path, "-f", "s16le", "-"])
            XCTAssertTrue(decoded.succeeded, "\(segment.path): \(decoded.errorText)")
        }
        XCTAssertEqual(expectedFirst, 25 * 48_000, "the valid frames add up to the captured frames")
        XCTAssertEqual(receiver.stop(), 0)
    }
}

/// The `%H%M%S` of a time, as the template renders it (UTC).
private struct FileNameTemplateClock {
    let hhmmss: String
    init(nanoseconds: Int64) {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        hhmmss = String(format: "%02d%02d%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}
