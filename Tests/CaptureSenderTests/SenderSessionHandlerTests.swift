import CaptureCodecs
import CaptureCore
@testable import CaptureSender
import CaptureWire
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// `SenderSessionHandler` in an `EmbeddedChannel`: the frames it writes, a resend read back from
/// the spool, and a spool that cannot give back what it holds failing the stream loudly.
final class SenderSessionHandlerTests: XCTestCase {
    private var root: String!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("session-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)

    private func packets(first: Int64, frames: Int) -> EncodedPackets {
        let payload = (0..<(frames * 4)).map { UInt8(truncatingIfNeeded: Int(first) * 4 + $0 * 7) }
        return EncodedPackets(payload: payload, packetCount: frames, packetSizes: [], firstSampleTime: first, frameCount: frames)
    }

    /// A log with a spool holding five entries that were sent once (so they left memory).
    private func spooledLog() throws -> (PacketLog, StreamSpool) {
        let meta = SpoolMeta(streamID: UUID(), streamName: "resend", destination: SpoolDestination(address: "127.0.0.1:7373"), description: StreamDescription(
            format: format, magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 1_800_000_000)))
        let spool = try StreamSpool.create(root: root, meta: meta)
        let log = PacketLog(producerIsRealTime: true, spool: spool)
        for index in 0..<5 { log.append(packets(first: Int64(index * 1_000), frames: 1_000)) }
        log.finish(endSampleTime: 5_000, remainderFrames: 0, reason: "duration")
        log.flushSpool()
        log.markSent(through: 5)
        XCTAssertEqual(log.memoryBytesHeld, 0, "every entry is only on disk now")
        return (log, spool)
    }

    private func run(_ log: PacketLog) throws -> (channel: EmbeddedChannel, done: EventLoopFuture<ConnectionOutcome>) {
        let channel = EmbeddedChannel()
        let done = channel.eventLoop.makePromise(of: ConnectionOutcome.self)
        let handler = SenderSessionHandler(
            hello: .with { $0.protocolVersion = 1; $0.streamName = "resend" }, log: log, fetcher: PacketFetcher(log: log, pool: nil),
            windowBytes: 1 << 20, done: done, logger: Logger(label: "test"))
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, done.futureResult)
    }

    private func written(_ channel: EmbeddedChannel) throws -> [WireMessage] {
        var messages: [WireMessage] = []
        while let message = try channel.readOutbound(as: WireMessage.self) { messages.append(message) }
        return messages
    }

    func testAResumeAfterAReconnectReadsTheEntriesBackFromTheSpoolAndEnds() throws {
        let (log, _) = try spooledLog()
        let (channel, done) = try run(log)
        guard case .hello = try XCTUnwrap(try written(channel).first) else { return XCTFail("Hello first") }
        try channel.writeInbound(WireMessage.helloAccepted(.with { $0.nextSequence = 3; $0.nextSampleTime = 2_000; $0.heartbeatIntervalMs = 5_000; $0.maxFrameBytes = 1 << 20 }))
        let sent = try written(channel)
        XCTAssertEqual(sent.count, 4, "entries 3, 4, 5 and EndOfStream: \(sent)")
        let expected = (UInt64(3)...5).map { sequence -> WireMessage in
            let index = Int64(sequence - 1)
            return LoggedPacket(sequence: sequence, content: .audio(packets(first: index * 1_000, frames: 1_000))).wireMessage
        }
        XCTAssertEqual(Array(sent.prefix(3)), expected, "read back from disk exactly")
        guard case .endOfStream(let end) = try XCTUnwrap(sent.last) else { return XCTFail("EndOfStream last") }
        XCTAssertEqual(end.lastSequence, 5)
        XCTAssertEqual(log.oldestKeptSequence, 3, "the receiver's resume point released 1 and 2")
        try channel.writeInbound(WireMessage.endAccepted(.with { $0.fileName = "f.caf"; $0.totalFrames = 5_000; $0.lastSequence = 5; $0.endSampleTime = 5_000 }))
        XCTAssertEqual(try done.wait(), .delivered(StreamSummary(fileName: "f.caf", totalFrames: 5_000, totalPackets: 0)))
        XCTAssertTrue(log.isComplete)
    }

    func testASpoolThatCannotGiveBackItsAudioFailsTheStreamSayingWhatIsLost() throws {
        let (log, spool) = try spooledLog()
        // The disk loses the spool's segments under the sender (a failing card, a careless cleanup).
        for name in try FileManager.default.contentsOfDirectory(atPath: spool.directory) where name != "meta.json" && !name.hasPrefix(".") {
            let path = (spool.directory as NSString).appendingPathComponent(name)
            if let handle = FileHandle(forUpdatingAtPath: path) {
                try handle.truncate(atOffset: 0)
                try handle.close()
            }
        }
        let (channel, done) = try run(log)
        _ = try written(channel)
        try channel.writeInbound(WireMessage.helloAccepted(.with { $0.nextSequence = 1; $0.heartbeatIntervalMs = 5_000; $0.maxFrameBytes = 1 << 20 }))
        XCTAssertEqual(try written(channel).filter { if case .audioData = $0 { return true } else { return false } }, [], "nothing half-read is sent")
        guard case .interrupted(let error, let retry, _) = try done.wait() else { return XCTFail("the stream must fail") }
        XCTAssertFalse(retry, "reconnecting cannot bring the audio back")
        guard case .spoolUnreadable(let first, _) = error else { return XCTFail("\(error)") }
        XCTAssertEqual(first, 1)
        XCTAssertTrue(error.description.contains("from sequence 1 on") && error.description.contains("stays in the spool"), error.description)
        XCTAssertFalse(channel.isActive, "the connection is closed, not kept alive by heartbeats")
    }
}
