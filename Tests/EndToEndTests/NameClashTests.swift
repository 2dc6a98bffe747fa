import CAF
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, item 2: a name clash never stops a stream. Streams whose natural name is taken get
/// `-2`... `-9`, then a name that carries their stream id (which no other stream can make), and the
/// receiver says so in its log and in the file's `info` chunk (`intended file name`).
final class NameClashTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("name-clash-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// `count` short streams named `name` starting at `start` (ns), each opened and ended at once
    /// over the raw protocol; returns their file names as HelloAccepted gave them.
    private func shortStreams(_ count: Int, named name: String, start: Int64, port: Int) throws -> [String] {
        try (0..<count).map { _ in
            let client = try ProtocolClient(port: port)
            try client.sendPreamble()
            try client.send(.hello(.with {
                $0.protocolVersion = 1
                $0.streamID = UUID().wireBytes
                $0.streamName = name
                $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
                $0.startTimeUnixNs = start
                $0.resumeSecret = Data(repeating: 3, count: 32)
            }))
            guard case .helloAccepted(let accepted)? = try client.nextAnswer() else { throw TestFailure("a short stream was refused") }
            try client.send(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 }))
            guard case .endAccepted? = try client.nextAnswer() else { throw TestFailure("a short stream did not end") }
            return accepted.fileName
        }
    }

    private func info(_ file: CAFFile, _ key: String) -> String? { file.info.first { $0.key == key }?.value }

    /// With `--name-template '{stream}'` the 101st stream of one name was refused with
    /// STORAGE_FAILED ("cannot find a free file name") and its sender retried for ever.
    func testTheHundredAndFirstStreamOfOneNameIsRecordedUnderANameCarryingItsId() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--name-template", "{stream}", "--log-level", "info"])
        let names = try shortStreams(100, named: "clash", start: Int64(Date().timeIntervalSince1970) * 1_000_000_000, port: receiver.port)
        XCTAssertEqual(Array(names.prefix(9)), ["clash.caf"] + (2...9).map { "clash-\($0).caf" })
        XCTAssertEqual(Set(names).count, 100, "every short stream has a file of its own")
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "1", "--stream-name", "clash", "--no-pace",
            "--spool", work.appendingPathComponent("spool").path, "--log-level", "info",
        ])
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, "a taken name must not stop the stream: \(sender.standardError)\n\(receiver.child.standardError)")

        let recorded = try receiver.files().compactMap { url -> (URL, CAFFile)? in
            let file = try CAFFile.read(path: url.path)
            return file.dataSize > 0 ? (url, file) : nil
        }
        XCTAssertEqual(recorded.count, 1, "\(receiver.files())")
        let (url, file) = try XCTUnwrap(recorded.first)
        let id = try XCTUnwrap(info(file, "stream id"))
        XCTAssertEqual(url.lastPathComponent, "clash+\(id).caf")
        XCTAssertEqual(info(file, "intended file name"), "clash.caf")
        XCTAssertEqual(try file.readAudioData(), try Resilience.toneBytes(frames: 48_000))
        XCTAssertTrue(receiver.child.standardError.contains("the file name is taken; the stream is recorded under a name that carries its stream id"), receiver.child.standardError)
        XCTAssertTrue(receiver.child.standardError.contains("file=clash+\(id).caf"), receiver.child.standardError)
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// With `--segment 10s --name-template '{stream}_%H%M%S'`, 100 short streams named like a
    /// victim and starting at one of its boundaries took every name its next segment could have:
    /// the victim stopped there, its audio stayed in the spool and capture-send exited 3.
    func testStreamsThatTakeASegmentsNamesDoNotStopItsStream() throws {
        let source = try Resilience.randomWAV(in: work, seconds: 45, seed: 27)
        Unprivileged.handOver(source.path)
        let receiver = try ReceiverUnderTest(extraArguments: ["--segment", "10s", "--name-template", "{stream}_%H%M%S", "--log-level", "info"])
        // A boundary 20 to 30 s ahead: the victim starts before it, and its 45 s timeline crosses it.
        let boundary = (Int64(Date().timeIntervalSince1970) / 10 + 3) * 10
        let clashes = try shortStreams(100, named: "victim", start: boundary * 1_000_000_000, port: receiver.port)
        let natural = String(format: "victim_%@.caf", Self.hhmmss(boundary))
        XCTAssertEqual(clashes.first, natural)
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "file", "--file", source.path, "--no-pace", "--stream-name", "victim",
            "--spool", work.appendingPathComponent("spool").path, "--log-level", "info",
        ])
        XCTAssertEqual(Resilience.finish(sender, seconds: 90), 0, "\(sender.standardError)\n\(receiver.child.standardError)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.appendingPathComponent("spool").path), [], "nothing stays in the spool")

        // The victim's files: those with audio, in stream order.
        var files = try receiver.files().compactMap { url -> (name: String, file: CAFFile)? in
            let file = try CAFFile.read(path: url.path)
            return file.dataSize > 0 ? (url.lastPathComponent, file) : nil
        }
        files.sort { Int64(info($0.file, "first sample") ?? "") ?? 0 < Int64(info($1.file, "first sample") ?? "") ?? 0 }
        let id = try XCTUnwrap(files.first.flatMap { info($0.file, "stream id") })
        XCTAssertTrue(files.allSatisfy { info($0.file, "stream id") == id && $0.file.isFinalized }, "\(files.map(\.name))")
        let start = try XCTUnwrap(files.first.flatMap { info($0.file, "first sample time") })
        XCTAssertLessThan(try Self.seconds(start), Double(boundary), "the victim started before the boundary")
        XCTAssertEqual(try files.flatMap { try $0.file.readAudioData() }, source.bytes, "the whole stream, each sample once")
        let atBoundary = try XCTUnwrap(files.first { $0.name.hasPrefix(natural.dropLast(4) + "+") }, "\(files.map(\.name))")
        XCTAssertEqual(atBoundary.name, "\(natural.dropLast(4))+\(id).caf")
        XCTAssertEqual(info(atBoundary.file, "intended file name"), natural)
        let next = String(format: "victim_%@.caf", Self.hhmmss(boundary + 10))
        XCTAssertTrue(files.contains { $0.name == next }, "the segment after the taken one is made under its own name: \(files.map(\.name))")
        XCTAssertTrue(receiver.child.standardError.contains("the file name is taken; the stream is recorded under a name that carries its stream id file=\(natural.dropLast(4))+\(id).caf intended=\(natural)"), receiver.child.standardError)
        XCTAssertEqual(receiver.stop(), 0)
    }

    private static func hhmmss(_ seconds: Int64) -> String {
        let withinDay = seconds % 86_400
        return String(format: "%02lld%02lld%02lld", withinDay / 3_600, withinDay / 60 % 60, withinDay % 60)
    }

    private static func seconds(_ iso: String) throws -> Double {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return try XCTUnwrap(formatter.date(from: iso), iso).timeIntervalSince1970
    }
}
