import CAF
import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, item 5: a continuation must prove that it owns the stream it continues, the way a
/// resume does. A sender without the victim's resume secret that claims `continues = {victim id}`
/// (with the name and start time the real continuation will have) is refused with
/// NOT_STREAM_OWNER; the real sender, back after the receiver finalized its stream at the resume
/// window, continues it under its natural name, linked to the victim.
final class ForgedContinuationTests: XCTestCase {
    func testAForgedContinuationIsRefusedAndTheRealOneKeepsItsNameAndLink() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("forged-continuation-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
        defer { try? FileManager.default.removeItem(at: work) }
        let receiver = try ReceiverUnderTest(extraArguments: ["--idle-timeout", "2", "--resume-window", "3", "--log-level", "info"])
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 5)
        let spool = work.appendingPathComponent("spool")
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(link.port)", "--source", "tone", "--duration", "8", "--stream-name", "outage", "--buffer-seconds", "0.05",
            "--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--idle-timeout", "30", "--log-level", "info",
        ])
        Resilience.waitUntil("the stream is acknowledged") { sender.standardError.contains("streaming") && receiver.child.standardError.contains("stream opened") }
        // Two seconds in the first file, so that its continuation starts in another second (its
        // natural name is not the first file's).
        Resilience.waitUntil("two seconds are recorded") { Resilience.size(receiver.files().first) > 2 * 48_000 * 4 }
        link.mode = .stall
        Resilience.waitUntil("the receiver finalized the stream after its resume window") {
            receiver.child.standardError.contains("did not come back within the resume window; file finalized")
        }

        // What a forger can learn or compute: the victim's id (in logs, file metadata, spool
        // folder names), where its finalized file ends, and so the name its continuation will get.
        let folder = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: spool.path).first { UUID(uuidString: $0) != nil })
        let victim = try XCTUnwrap(UUID(uuidString: folder))
        let meta = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: spool.appendingPathComponent(folder).appendingPathComponent("meta.json"))) as? [String: Any])
        let startTime = try XCTUnwrap(meta["startTime"] as? Double)
        let entryFile = receiver.directory.appendingPathComponent(".streams").appendingPathComponent(victim.uuidString.lowercased())
        Resilience.waitUntil("the index records where the finalized file ends") {
            ((try? String(contentsOf: entryFile, encoding: .utf8)) ?? "").contains("complete=0")
        }
        let entry = try String(contentsOf: entryFile, encoding: .utf8)
        let fields = Dictionary(entry.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { field -> (String, String)? in
            let parts = field.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }) { a, _ in a }
        let end = try XCTUnwrap(fields["end-sample"].flatMap { Int64($0) }, entry)
        let lastSequence = try XCTUnwrap(fields["last-sequence"].flatMap { UInt64($0) }, entry)
        let continuationStart = startTime + Double(end) / 48_000
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let natural = "outage_\(formatter.string(from: Date(timeIntervalSince1970: continuationStart))).caf"

        let forger = try ProtocolClient(port: receiver.port)
        try forger.sendPreamble()
        try forger.send(.hello(.with {
            $0.protocolVersion = 1
            $0.streamID = UUID().wireBytes
            $0.streamName = "outage"
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
            $0.startTimeUnixNs = Int64(continuationStart * 1e9)
            $0.startSampleTime = end
            $0.resumeFromSequence = lastSequence + 1
            $0.continues = .with { $0.streamID = victim.wireBytes; $0.firstSequence = lastSequence + 1 }
            $0.resumeSecret = Data(repeating: 0x42, count: 32)
        }))
        let answer = try forger.nextAnswer()
        guard case .error(let refusal)? = answer else {
            return XCTFail("the forged continuation was not refused: \(String(describing: answer)); files: \(receiver.files().map(\.lastPathComponent))")
        }
        XCTAssertEqual(refusal.code, .notStreamOwner, refusal.message)
        XCTAssertTrue(refusal.message.contains("continue"), refusal.message)
        // The refusal reaches the forger before (or while) the receiver writes its log line.
        XCTAssertTrue(waitFor(20) { receiver.child.standardError.contains("code=notStreamOwner") }, receiver.child.standardError)

        link.mode = .pass
        link.resetAll()
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("is delivered as a new stream that continues it"), sender.standardError)

        let files = receiver.files()
        XCTAssertEqual(files.count, 2, "\(files.map(\.lastPathComponent))")
        guard files.count == 2 else { return }
        let victimFile = victim.uuidString.lowercased()
        let cafs = try files.map { try CAFFile.read(path: $0.path) }
        let firstIndex = try XCTUnwrap(cafs.firstIndex { $0.info.contains { $0.key == "stream id" && $0.value == victimFile } })
        let first = cafs[firstIndex]
        let second = cafs[1 - firstIndex]
        let secondName = files[1 - firstIndex].lastPathComponent
        let info = Dictionary(second.info.map { ($0.key, $0.value) }) { a, _ in a }
        XCTAssertEqual(secondName, natural, "the real continuation has its natural name")
        XCTAssertEqual(info["continues stream id"], victim.uuidString.lowercased(), "and links to the stream it continues: \(second.info)\n\(receiver.child.standardError)")
        XCTAssertEqual(try first.readAudioData() + second.readAudioData(), try Resilience.toneBytes(frames: 8 * 48_000),
                       "the two recordings join without a hole or a duplicate")
        XCTAssertEqual(receiver.stop(), 0)
    }
}
