import CAF
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, item 1: one Hello must not stop the receiver. Hellos whose times or positions sit at
/// the ends of their integers (they trapped in a Double→Int64 conversion, in strftime and in the
/// segment clock) are sent over real sockets to the real capture-recv, with and without `--segment`
/// and a name template, while a real capture-send streams beside them: each is refused with
/// INVALID_MESSAGE naming its field, the receiver keeps running, and the real stream is recorded
/// bit-exact.
final class HostileHelloTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-hello-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// A valid 16-bit stereo Hello of a new stream, changed by `change`.
    private static func hello(_ change: (inout Capture_V1_Hello) -> Void) -> Capture_V1_Hello {
        var hello = Capture_V1_Hello.with {
            $0.protocolVersion = 1
            $0.streamID = UUID().wireBytes
            $0.streamName = "hostile"
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            $0.startTimeUnixNs = Int64(Date().timeIntervalSince1970) * 1_000_000_000
            $0.resumeSecret = Data(repeating: 9, count: 32)
        }
        change(&hello)
        return hello
    }

    /// The hostile Hellos: the field each breaks, and the Hello.
    private static let hostile: [(field: String, hello: Capture_V1_Hello)] = [
        ("start_time_unix_ns", hello { $0.startTimeUnixNs = .max }),
        ("start_time_unix_ns", hello { $0.startTimeUnixNs = .min }),
        ("start_time_unix_ns", hello { $0.startTimeUnixNs = -1 }),
        ("start_time_unix_ns", hello { $0.startTimeUnixNs = WireProtocol.latestStartTimeUnixNanoseconds + 1 }),
        ("start_sample_time", hello { $0.startSampleTime = .max }),
        ("start_sample_time", hello { $0.startSampleTime = WireProtocol.maximumStartSampleTime + 1 }),
        ("start_sample_time", hello { $0.startSampleTime = .min }),
        ("resume_from_sequence", hello { $0.resumeFromSequence = .max }),
        ("source_host", hello { $0.sourceHost = String(repeating: "h", count: 4_096) }),
        ("application", hello { $0.application = String(repeating: "a", count: 4_096) }),
    ]

    /// Sends `hello` on a connection of its own and returns the receiver's answer.
    private func answer(to hello: Capture_V1_Hello, port: Int) throws -> WireMessage? {
        let client = try ProtocolClient(port: port)
        try client.sendPreamble()
        try client.send(.hello(hello))
        return try client.nextAnswer()
    }

    /// Every CAF file under `folder` (templates make folders), relative paths sorted.
    private func recordings(in folder: URL) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        var found: [String] = []
        while let name = enumerator?.nextObject() as? String {
            if name.hasSuffix(".caf"), !name.hasPrefix(".") { found.append(name) }
        }
        return found.sorted()
    }

    private func runHostileHellos(receiverArguments: [String]) throws {
        let receiver = try ReceiverUnderTest(extraArguments: receiverArguments + ["--log-level", "info"])
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "tone", "--duration", "3", "--stream-name", "honest", "--buffer-seconds", "0.05",
            "--spool", work.appendingPathComponent("spool").path, "--log-level", "info",
        ])
        Resilience.waitUntil("the honest stream is recorded") { receiver.child.standardError.contains("stream opened") }
        for (field, hello) in Self.hostile {
            let answer = try answer(to: hello, port: receiver.port)
            guard case .error(let error)? = answer else {
                XCTFail("a Hello with a hostile \(field) was not refused: \(String(describing: answer)); receiver: \(receiver.child.standardError)")
                continue
            }
            XCTAssertEqual(error.code, .invalidMessage, "\(field): \(error.message)")
            XCTAssertTrue(error.message.hasPrefix("invalid Hello.\(field): "), "\(field): \(error.message)")
            XCTAssertTrue(error.fatal)
            XCTAssertTrue(receiver.child.process.isRunning, "the receiver survives a hostile \(field): \(receiver.child.standardError)")
        }
        // The extremes themselves are accepted, and the accept path holds there too.
        let edge = Self.hello {
            $0.streamName = "edge"
            $0.startTimeUnixNs = WireProtocol.latestStartTimeUnixNanoseconds
            $0.startSampleTime = WireProtocol.maximumStartSampleTime
        }
        let client = try ProtocolClient(port: receiver.port)
        try client.sendPreamble()
        try client.send(.hello(edge))
        guard case .helloAccepted(let accepted)? = try client.nextAnswer() else {
            return XCTFail("the Hello at the ends of the ranges was refused: \(receiver.child.standardError)")
        }
        XCTAssertEqual(accepted.nextSampleTime, WireProtocol.maximumStartSampleTime)
        try client.send(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = WireProtocol.maximumStartSampleTime }))
        guard case .endAccepted? = try client.nextAnswer() else { return XCTFail("the edge stream did not end: \(receiver.child.standardError)") }

        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)
        XCTAssertTrue(receiver.child.process.isRunning, receiver.child.standardError)
        let refusals = receiver.child.standardError.split(separator: "\n").filter { $0.contains("refused: invalid Hello.") }
        XCTAssertEqual(refusals.count, Self.hostile.count, receiver.child.standardError)

        // The honest stream, bit-exact, in one file or (segments) several that tile it.
        let names = recordings(in: receiver.directory).filter { !$0.contains("edge") }
        XCTAssertFalse(names.isEmpty, "\(recordings(in: receiver.directory))")
        var files = try names.map { try CAFFile.read(path: receiver.directory.appendingPathComponent($0).path) }
        files.sort { Int64($0.info.first { $0.key == "first sample" }?.value ?? "") ?? 0 < Int64($1.info.first { $0.key == "first sample" }?.value ?? "") ?? 0 }
        XCTAssertTrue(files.allSatisfy(\.isFinalized))
        XCTAssertEqual(try files.flatMap { try $0.readAudioData() }, try Resilience.toneBytes(frames: 3 * 48_000), "\(names)")
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testHostileHellosAreRefusedAndTheReceiverKeepsRecording() throws {
        try runHostileHellos(receiverArguments: [])
    }

    func testHostileHellosAreRefusedWithSegments() throws {
        try runHostileHellos(receiverArguments: ["--segment", "10s"])
    }

    func testHostileHellosAreRefusedWithSegmentsAndANameTemplate() throws {
        try runHostileHellos(receiverArguments: ["--segment", "1s", "--name-template", "{stream}/%Y/{stream}_%H%M%S"])
    }
}
