import CaptureCodecs
import CaptureCore
import CaptureSender
import Foundation
import XCTest

/// A spooled stream belongs to its destination, is claimed under an exclusive lock, and exists on
/// disk only once it holds something; a stream without captured audio is never delivered.
final class SpoolClaimTests: XCTestCase {
    private var root: String!
    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
    private let receiverA = SpoolDestination(address: "127.0.0.1:7001")

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("spool-own-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func meta(_ id: UUID = UUID(), destination: SpoolDestination? = nil) -> SpoolMeta {
        SpoolMeta(streamID: id, streamName: "field", destination: destination ?? receiverA, description: StreamDescription(
            format: format, magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 1_800_000_000)),
            resumeSecret: Array(repeating: 0xA5, count: 32))
    }

    private func packets(first: Int64, frames: Int) -> EncodedPackets {
        EncodedPackets(payload: [UInt8](repeating: 7, count: frames * 4), packetCount: frames, packetSizes: [],
                       firstSampleTime: first, frameCount: frames)
    }

    private func folder(_ id: UUID) -> String { (root as NSString).appendingPathComponent(id.uuidString.lowercased()) }

    private func rootEntries() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted() }

    func testANewStreamHasNoFolderUntilItsFirstRecordAndNoneAtAllWhenItEndsEmpty() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        XCTAssertEqual(rootEntries(), [], "nothing on disk before the first record")
        log.finish(endSampleTime: 0, remainderFrames: 0, reason: "interrupted")
        log.flushSpool()
        XCTAssertEqual(rootEntries(), [], "a stream that ended without audio leaves nothing behind")
        XCTAssertFalse(spool.exists)
        spool.release()

        let second = UUID()
        let spooled = try StreamSpool.create(root: root, meta: meta(second))
        let secondLog = PacketLog(producerIsRealTime: true, spool: spooled)
        secondLog.append(packets(first: 0, frames: 480))
        secondLog.flushSpool()
        XCTAssertEqual(rootEntries(), [second.uuidString.lowercased()], "the folder appears, complete, with the first record")
        let metaJSON = try XCTUnwrap(FileManager.default.contents(atPath: (folder(second) as NSString).appendingPathComponent("meta.json")))
        let stored = try JSONDecoder().decode(SpoolMeta.self, from: metaJSON)
        XCTAssertEqual(stored.destination, receiverA)
        XCTAssertEqual(stored.version, 2)
        XCTAssertEqual(String(decoding: try XCTUnwrap(FileManager.default.contents(atPath: (folder(second) as NSString).appendingPathComponent("lock"))), as: UTF8.self),
                       "pid \(getpid())\n", "the lock file says which process holds the stream")
        spooled.release()
    }

    func testAStreamBelongsOnlyToTheSameAddressVerifiedTheSameWay() {
        let pinA = String(repeating: "ab", count: 32)
        let pinB = String(repeating: "cd", count: 32)
        let cases: [(stored: SpoolDestination?, run: SpoolDestination, expected: SpooledStreams.Ownership)] = [
            (receiverA, receiverA, .own),
            (receiverA, SpoolDestination(address: "127.0.0.1:7002"), .other),
            (receiverA, SpoolDestination(address: "localhost:7001"), .other),
            (SpoolDestination(address: "r:1", tls: .pinned(pinA)), SpoolDestination(address: "r:1", tls: .pinned(pinA)), .own),
            (SpoolDestination(address: "r:1", tls: .pinned(pinA)), SpoolDestination(address: "r:1", tls: .pinned(pinB)), .other),
            (SpoolDestination(address: "r:1", tls: .pinned(pinA)), SpoolDestination(address: "r:1"), .other),
            (SpoolDestination(address: "r:1"), SpoolDestination(address: "r:1", tls: .systemTrust(serverName: "r")), .other),
            (SpoolDestination(address: "r:1", tls: .authorities([pinB, pinA], serverName: "r")),
             SpoolDestination(address: "r:1", tls: .authorities([pinA, pinB], serverName: "r")), .own),
            (SpoolDestination(address: "r:1", tls: .authorities([pinA], serverName: "r")),
             SpoolDestination(address: "r:1", tls: .systemTrust(serverName: "r")), .other),
            (nil, receiverA, .unknown),
        ]
        for (index, test) in cases.enumerated() {
            var stored = meta()
            stored.destination = test.stored
            XCTAssertEqual(SpooledStreams.ownership(of: stored, for: test.run), test.expected, "case \(index)")
        }
    }

    func testAVersion1SpoolDecodesWithAnUnknownDestination() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var json = try XCTUnwrap(String(data: try encoder.encode(meta()), encoding: .utf8))
        json = json.replacingOccurrences(of: "\"version\":2", with: "\"version\":1")
        let start = try XCTUnwrap(json.range(of: "\"destination\":{"))
        let close = try XCTUnwrap(json.range(of: "},", range: start.upperBound..<json.endIndex))
        json.removeSubrange(start.lowerBound..<close.upperBound)
        let decoded = try JSONDecoder().decode(SpoolMeta.self, from: Data(json.utf8))
        XCTAssertNil(decoded.destination)
        XCTAssertEqual(decoded.version, 1)
    }

    func testAStreamIsClaimedByOneProcessAtATime() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        log.append(packets(first: 0, frames: 480))
        log.flushSpool()
        guard case .inUse(let owner) = try StreamSpool.claim(directory: folder(id)) else { return XCTFail("the recording process holds it") }
        XCTAssertEqual(owner, "pid \(getpid())")
        spool.release()
        guard case .claimed(let claimed) = try StreamSpool.claim(directory: folder(id)) else { return XCTFail("free once released") }
        guard case .inUse = try StreamSpool.claim(directory: folder(id)) else { return XCTFail("a claimed stream cannot be claimed again") }
        claimed.removeAll()
        guard case .gone = try StreamSpool.claim(directory: folder(id)) else { return XCTFail("a removed stream is gone") }
    }

    /// A spool folder whose description is not JSON, is cut short, or names another stream (copied
    /// or edited in) is never claimed or delivered: it is listed as damaged, and the folder is left
    /// as it is, with a message naming its file.
    func testAFolderWhoseDescriptionLiesOrIsBrokenIsLeftAlone() throws {
        let lying = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(lying))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        log.append(packets(first: 0, frames: 480))
        log.flushSpool()
        spool.release()
        let metaPath = folder(lying) + "/meta.json"
        let genuine = try Data(contentsOf: URL(fileURLWithPath: metaPath))
        let other = UUID()
        let cases: [(String, Data)] = [
            ("names another stream", Data(String(decoding: genuine, as: UTF8.self).replacingOccurrences(of: lying.uuidString, with: other.uuidString).utf8)),
            ("is not JSON", Data("not json at all".utf8)),
            ("is cut short", genuine.prefix(genuine.count / 2)),
            ("is empty", Data()),
            ("is an absurd 8 MiB of zero bytes", Data(count: 8 << 20)),
        ]
        for (what, contents) in cases {
            try contents.write(to: URL(fileURLWithPath: metaPath))
            XCTAssertThrowsError(try StreamSpool.claim(directory: folder(lying)), "a description that \(what)") { error in
                XCTAssertTrue("\(error)".contains(metaPath), "names the file: \(error)")
            }
            XCTAssertThrowsError(try SpooledStreams.claim(directory: folder(lying)), "a description that \(what)")
            let listed = SpooledStreams.list(root: root)
            XCTAssertEqual(listed.map(\.streamID), [lying], "a description that \(what) is listed")
            XCTAssertEqual(listed.first?.damage?.hasPrefix("damaged: meta.json: "), true, "\(listed)")
            XCTAssertEqual(listed.first?.unreadable?.description.contains(metaPath), true)
            XCTAssertEqual(rootEntries(), [lying.uuidString.lowercased()], "the folder is left as it is")
        }
        try genuine.write(to: URL(fileURLWithPath: metaPath))
        guard case .claimed(let restored) = try StreamSpool.claim(directory: folder(lying)) else { return XCTFail("the genuine description is claimed") }
        restored.release()
    }

    func testAStreamWithoutCapturedAudioIsRemovedInsteadOfDelivered() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        log.appendGap(sampleTime: 0, length: 24_000, reason: "overrun")
        log.finish(endSampleTime: 24_000, remainderFrames: 0, reason: "interrupted")
        log.flushSpool()
        spool.release()
        XCTAssertEqual(SpooledStreams.list(root: root).map(\.holdsCapturedAudio), [false])
        guard case .removedEmpty(let removed) = try SpooledStreams.claim(directory: folder(id)) else { return XCTFail("not delivered") }
        XCTAssertEqual(removed.streamID, id)
        XCTAssertEqual(rootEntries(), [])
    }

    func testAStreamWithAudioIsReadyToDeliverWithItsDestination() throws {
        let id = UUID()
        let spool = try StreamSpool.create(root: root, meta: meta(id))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        log.append(packets(first: 0, frames: 480))
        log.flushSpool()
        spool.release()
        guard case .ready(let claimed, let recovered) = try SpooledStreams.claim(directory: folder(id)) else { return XCTFail("ready") }
        XCTAssertEqual(claimed.meta.destination, receiverA)
        XCTAssertEqual(recovered.lastSequence, 1)
        claimed.release()
    }

    func testTheListShowsEachStreamsDestinationSpanBytesOwnerAndLastError() throws {
        let id = UUID()
        let pinned = SpoolDestination(address: "rec.example:7373", tls: .pinned(String(repeating: "0f", count: 32)))
        let spool = try StreamSpool.create(root: root, meta: meta(id, destination: pinned))
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        log.append(packets(first: 0, frames: 24_000))
        log.append(packets(first: 24_000, frames: 12_000))
        log.flushSpool()
        spool.recordDeliveryError("the receiver refused the stream (authenticationFailed): wrong token", at: Date(timeIntervalSince1970: 1_800_000_100))
        var listed = try XCTUnwrap(SpooledStreams.list(root: root).first)
        XCTAssertEqual(listed.owner, "pid \(getpid())")
        spool.release()
        listed = try XCTUnwrap(SpooledStreams.list(root: root).first)
        XCTAssertEqual(listed.streamID, id)
        XCTAssertEqual(listed.destination, pinned)
        XCTAssertEqual(listed.destination?.description, "rec.example:7373 tls:pin=0f0f0f0f0f0f0f0f…")
        XCTAssertEqual(listed.capturedSeconds, 0.75)
        XCTAssertEqual(listed.unacknowledgedBytes, 36_000 * 4)
        XCTAssertNil(listed.owner)
        XCTAssertEqual(listed.lastError, "2027-01-15T08:01:40Z the receiver refused the stream (authenticationFailed): wrong token")
    }

    func testHalfBuiltFoldersOfDeadRunsAreRemoved() throws {
        let partial = (root as NSString).appendingPathComponent(".\(UUID().uuidString.lowercased()).partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: (partial as NSString).appendingPathComponent("lock"), contents: Data()))
        StreamSpool.removeAbandonedPartials(root: root)
        XCTAssertEqual(rootEntries(), [])
    }
}
