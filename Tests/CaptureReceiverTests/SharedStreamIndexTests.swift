import CaptureConsole
import CAF
import CaptureCore
import CaptureMetrics
@testable import CaptureReceiver
import CaptureWire
import Foundation
import Logging
import XCTest

/// Receivers sharing one output folder: a stream is found by id through the index, claimed by one
/// receiver at a time (an OFD lock on its byte in the folder's lock file), taken over once its holder
/// lets go, and left alone by sweeps while held. Two writer pools on one folder stand in for two
/// receivers: within one process the lock table's set of held streams excludes them, as the kernel
/// does across processes and hosts (`StreamLockTableTests`).
final class SharedStreamIndexTests: XCTestCase {
    private var folder = ""
    private static let noTimer = SyncPolicy(interval: .seconds(3_600), bytes: 1 << 30)
    private static let logger = Logger(label: "test")

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "shared-index-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try StreamIndex(outputDirectory: folder).prepare()
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    func testOfTwoReceiversOfferedOneNewStreamAtOnceExactlyOneWritesIt() throws {
        for _ in 0..<20 {
            let hello = try Self.hello()
            let first = try makePool()
            let second = try makePool()
            let results = ResultBox<[Result<OpenedStream, StorageError>]>()
            results.value = []
            let group = DispatchGroup()
            for pool in [first, second] {
                group.enter()
                StreamFiles(configuration: configuration(), pool: pool).open(hello: hello, mayCreate: true, owner: StreamOwner(secret: hello.message.resumeSecret, identity: nil), start: Date(), peer: "peer", events: Self.events) {
                    results.append($0)
                    group.leave()
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
            let outcomes = try XCTUnwrap(results.value)
            let opened = outcomes.compactMap { try? $0.get() }
            XCTAssertEqual(opened.count, 1, "exactly one receiver takes the stream: \(outcomes)")
            let refusals = outcomes.compactMap { if case .failure(let error) = $0 { return error } else { return nil } }
            guard case .streamBusy(let message)? = refusals.first else { return XCTFail("the other is told the stream is busy: \(outcomes)") }
            XCTAssertTrue(message.contains(hello.streamID.uuidString), message)
            XCTAssertEqual(try files(for: hello).count, 1, "one file for the stream")
            opened.first?.writer.detach {}
            first.shutDown()
            second.shutDown()
        }
    }

    func testAStreamHeldByOneReceiverIsBusyForAnotherUntilItLetsGoThenContinuesInTheSameFile() throws {
        let hello = try Self.hello()
        let first = try makePool()
        let second = try makePool()
        let stream = try open(first, hello).get()
        XCTAssertFalse(stream.resumed)
        stream.writer.write(sequence: 1, payload: Data(repeating: 7, count: 8), packetSizes: [], frameCount: 4, endSampleTime: 4)
        guard case .failure(.streamBusy) = try open(second, hello) else { return XCTFail("held by the first receiver") }
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)

        let taken = try open(second, hello, mayCreate: false).get()
        XCTAssertTrue(taken.resumed, "the second receiver continues the stream")
        XCTAssertEqual(taken.writer.path, stream.writer.path, "in the same file")
        XCTAssertEqual(taken.resume, StreamPosition(nextSequence: 2, nextSampleTime: 4), "where the first made it durable")
        guard case .failure(.streamBusy) = try open(first, hello) else { return XCTFail("now held by the second") }
        first.shutDown()
        second.shutDown()
    }

    /// Issue 19, item 1: a finished stream stays known, on disk, for the resume window: any receiver
    /// of the folder answers a Hello of it as finished (the session sends its EndAccepted again), and
    /// stores nothing twice; after the window the sweep removes it from the index.
    func testAFinishedStreamIsKnownAsFinishedForItsResumeWindowThenLeavesTheIndex() throws {
        let hello = try Self.hello()
        let pool = try makePool()
        let other = try makePool()
        let stream = try open(pool, hello).get()
        let index = StreamIndex(outputDirectory: folder)
        XCTAssertEqual(index.streams(), [hello.streamID])
        let finished = expectation(description: "finished")
        stream.writer.finish(StreamEnd(position: StreamPosition(lastSequence: 7, endSampleTime: 960))) { _ in finished.fulfill() }
        wait(for: [finished], timeout: 30)
        let name = (stream.writer.path as NSString).lastPathComponent
        let expected = FinishedStreamRecord(relativePath: name, frames: 0, packets: 0, end: StreamPosition(lastSequence: 7, endSampleTime: 960))
        let entry = try String(contentsOfFile: index.entryPath(hello.streamID), encoding: .utf8)
        XCTAssertTrue(entry.hasPrefix("finished\n\(name)\nframes=0 packets=0 last-sequence=7 end-sample=960\nowner secret="), entry)
        for (receiver, mayCreate) in [(pool, true), (pool, false), (other, true), (other, false)] {
            guard case .failure(.alreadyFinished(let record)) = try open(receiver, hello, mayCreate: mayCreate) else {
                return XCTFail("a Hello of the finished stream is answered as finished (mayCreate \(mayCreate))")
            }
            XCTAssertEqual(record, expected)
        }
        XCTAssertEqual(try files(for: hello).count, 1, "and no second file is made for it")
        // Within the window a sweep keeps it; after the window it leaves the index.
        AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: Date().addingTimeInterval(-60)), logger: Logger(label: "test"))
        AbandonedStreamSweeper.sweep(index: index, mode: .finalizeResumable, logger: Logger(label: "test"))
        XCTAssertEqual(index.streams(), [hello.streamID])
        AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: Date().addingTimeInterval(60)), logger: Logger(label: "test"))
        XCTAssertEqual(index.streams(), [], "the resume window has passed")
        guard case .failure(.notResumable) = try open(pool, hello, mayCreate: false) else {
            return XCTFail("after the window the stream is unknown")
        }
        XCTAssertEqual(try files(for: hello).count, 1)
        pool.shutDown()
        other.shutDown()
    }

    func testAnEntryNamingAFileOutsideTheOutputFolderIsNotFollowed() throws {
        let hello = try Self.hello()
        let index = StreamIndex(outputDirectory: folder)
        let outside = NSTemporaryDirectory() + "outside-\(UUID().uuidString).caf"
        XCTAssertTrue(FileManager.default.createFile(atPath: outside + ".pakt-journal", contents: Data()))
        defer { try? FileManager.default.removeItem(atPath: outside + ".pakt-journal") }
        let claim = try index.claimNew(hello.streamID, relativePath: "../" + (outside as NSString).lastPathComponent).get()
        claim.release(removingEntry: false)
        let pool = try makePool()
        let opened = try open(pool, hello).get()
        XCTAssertFalse(opened.resumed, "a forged entry is dropped, and the stream starts anew inside the folder")
        XCTAssertTrue(opened.writer.path.hasPrefix(folder + "/"), opened.writer.path)
        opened.writer.detach {}
        pool.shutDown()
    }

    func testAnEntryThatIsASymbolicLinkIsNotFollowed() throws {
        let hello = try Self.hello()
        let index = StreamIndex(outputDirectory: folder)
        let target = NSTemporaryDirectory() + "link-target-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("../../etc/passwd".utf8)))
        defer { try? FileManager.default.removeItem(atPath: target) }
        try FileManager.default.createSymbolicLink(atPath: index.entryPath(hello.streamID), withDestinationPath: target)
        let pool = try makePool()
        guard case .failure(.cannotCreate(let message)) = try open(pool, hello) else {
            return XCTFail("a planted link is neither followed nor replaced")
        }
        XCTAssertTrue(message.contains("stream index"), message)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "../../etc/passwd", "the link's target is untouched")
        pool.shutDown()
    }

    func testSweepsLeaveHeldStreamsAloneAndFinalizeAbandonedOnes() throws {
        let pool = try makePool()
        let held = try open(pool, try Self.hello()).get()
        let abandonedHello = try Self.hello()
        let abandoned = try open(pool, abandonedHello).get()
        abandoned.writer.write(sequence: 1, payload: Data(repeating: 1, count: 8), packetSizes: [], frameCount: 4, endSampleTime: 4)
        let detached = expectation(description: "detached")
        abandoned.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        let index = StreamIndex(outputDirectory: folder)

        XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .finalizeResumable, logger: Self.logger).finalized, 1, "only the unheld file")
        XCTAssertTrue(try CAFFile.read(path: abandoned.writer.path).isFinalized, "readers open it complete")
        XCTAssertEqual(Set(index.streams()), [held.writer.streamIDForTests, abandonedHello.streamID], "and it stays resumable")
        XCTAssertNotNil(try StreamPositionLog.lastRecord(cafPath: abandoned.writer.path))

        XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: .distantFuture), logger: Self.logger).finalized, 1)
        XCTAssertEqual(try CAFFile.read(path: abandoned.writer.path).totalFrames, 4)
        // Its entry now records where its file ends, for a stream that continues it (PROTOCOL.md §8.1).
        let entry = try String(contentsOfFile: index.entryPath(abandonedHello.streamID), encoding: .utf8)
        XCTAssertTrue(entry.contains("frames=4 packets=4 last-sequence=1 end-sample=4 complete=0\n"), entry)
        guard case .failure(.notResumable) = try open(pool, abandonedHello, mayCreate: true) else {
            return XCTFail("a stream finalized after its window is not resumed, nor made again under its id")
        }
        XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: .distantFuture), logger: Self.logger).finalized, 0)
        XCTAssertEqual(index.streams(), [held.writer.streamIDForTests], "one window later it leaves the index; the held one is untouched")
        XCTAssertTrue(FileManager.default.fileExists(atPath: held.writer.path + ".pakt-journal"), "still recording")
        held.writer.detach {}
        pool.shutDown()
    }

    /// Issue 27, item 5: a stream that says it continues another must prove it owns it, the way a
    /// resume does (the continued stream's resume secret, from the same identity); a forged one is
    /// refused and leaves nothing behind. The real one begins where the continued file ends and names
    /// it. A continuation of a stream the index no longer knows cannot be proven: it is recorded as a
    /// new stream that claims nothing.
    func testAContinuationMustProveItOwnsTheStreamItContinues() throws {
        let pool = try makePool()
        defer { pool.shutDown() }
        let victim = try Self.hello()
        let stream = try open(pool, victim, identity: "token:unit-a").get()
        stream.writer.write(sequence: 1, payload: Data(repeating: 1, count: 8), packetSizes: [], frameCount: 4, endSampleTime: 4)
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        let index = StreamIndex(outputDirectory: folder)
        XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: .distantFuture), logger: Self.logger).finalized, 1)
        let filesBefore = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".caf") }

        let forged = try Self.continuation(of: victim.streamID, secret: Data(repeating: 7, count: 32))
        guard case .failure(.notStreamOwner(let message)) = try open(pool, forged, identity: "token:unit-a") else {
            return XCTFail("a continuation without the continued stream's resume secret was accepted")
        }
        XCTAssertEqual(message, "it claims to continue stream \(victim.streamID), but the resume secret does not match the one the stream was started with: only the sender that started a stream may continue it")
        let otherIdentity = try Self.continuation(of: victim.streamID, secret: victim.message.resumeSecret)
        guard case .failure(.notStreamOwner(let identityMessage)) = try open(pool, otherIdentity, identity: "token:unit-b") else {
            return XCTFail("a continuation from another identity was accepted")
        }
        XCTAssertTrue(identityMessage.hasSuffix("the stream was started with another token: only the identity that started a stream may continue it"), identityMessage)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".caf") }, filesBefore, "no file for either")
        XCTAssertFalse(index.streams().contains(forged.streamID), "and no entry")

        let real = try Self.continuation(of: victim.streamID, secret: victim.message.resumeSecret)
        let continued = try open(pool, real, identity: "token:unit-a").get()
        guard case .linked(let linked, _)? = continued.continuation else { return XCTFail("linked: \(String(describing: continued.continuation))") }
        XCTAssertEqual(linked, victim.streamID)
        XCTAssertEqual(continued.resume, StreamPosition(nextSequence: 2, nextSampleTime: 4), "right after where the continued file ends")
        XCTAssertEqual(try CAFFile.read(path: continued.writer.path).info.first { $0.key == "continues stream id" }?.value, victim.streamID.uuidString.lowercased())
        continued.writer.detach {}

        let unknown = UUID()
        let stranger = try open(pool, try Self.continuation(of: unknown, secret: Data(repeating: 7, count: 32))).get()
        XCTAssertEqual(stranger.continuation, .unverified(unknown))
        XCTAssertEqual(stranger.resume, StreamPosition(nextSequence: 1, nextSampleTime: 0))
        XCTAssertNil(try CAFFile.read(path: stranger.writer.path).info.first { $0.key == "continues stream id" }, "it claims to continue nothing")
        stranger.writer.detach {}
    }

    func testBeyondTheCapTheStreamsWaitingLongestAreFinalizedEarly() throws {
        let pool = try makePool()
        var detached: [OpenedStream] = []
        for index in 0..<4 {
            let stream = try open(pool, try Self.hello()).get()
            stream.writer.write(sequence: 1, payload: Data(repeating: UInt8(index), count: 8), packetSizes: [], frameCount: 4, endSampleTime: 4)
            let done = expectation(description: "detached \(index)")
            stream.writer.detach { done.fulfill() }
            wait(for: [done], timeout: 30)
            // Their ages: the first waits longest.
            let log = StreamPositionLog.path(for: stream.writer.path)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(Double(index - 10) * 60)], ofItemAtPath: log)
            detached.append(stream)
        }
        let held = try open(pool, try Self.hello()).get()
        let index = StreamIndex(outputDirectory: folder)
        let result = AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: Date().addingTimeInterval(-3_600), maximumWaiting: 2), logger: Self.logger)
        XCTAssertEqual(result, .init(finalized: 2, waiting: 2))
        for (position, stream) in detached.enumerated() {
            let finalized = try CAFFile.read(path: stream.writer.path).isFinalized
            XCTAssertEqual(finalized, position < 2, "the two waiting longest are finalized, the newer two still wait: \(position)")
        }
        XCTAssertEqual(Set(index.streams()), Set([held.writer.streamIDForTests].compactMap { $0 } + detached.compactMap { $0.writer.streamIDForTests }))
        for stream in detached.prefix(2) {
            let entry = try String(contentsOfFile: index.entryPath(try XCTUnwrap(stream.writer.streamIDForTests)), encoding: .utf8)
            XCTAssertTrue(entry.hasPrefix("finished\n") && entry.contains("complete=0"), "the finalized ones record where they end: \(entry)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: held.writer.path + ".pakt-journal"), "a held stream is never counted nor touched")

        let metrics = ReceiverMetrics()
        metrics.waitingStreams(result.waiting)
        XCTAssertTrue(metrics.exposition().contains("capture_waiting_streams 2.0"), metrics.exposition())
        held.writer.detach {}
        pool.shutDown()
    }

    func testUnfinishedFilesWithoutAnEntryAreEnteredAtStartUp() throws {
        let hello = try Self.hello()
        let pool = try makePool()
        let stream = try open(pool, hello).get()
        stream.writer.write(sequence: 1, payload: Data(repeating: 3, count: 8), packetSizes: [], frameCount: 4, endSampleTime: 4)
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        let index = StreamIndex(outputDirectory: folder)
        // A file recorded before the index existed: no entry.
        try FileManager.default.removeItem(atPath: index.entryPath(hello.streamID))
        XCTAssertEqual(index.streams(), [])

        let waiting = AbandonedStreamSweeper.enterUnindexedFiles(index: index, logger: Self.logger)
        XCTAssertEqual(waiting.map(\.stream), [hello.streamID])
        XCTAssertEqual(waiting.map(\.path), [stream.writer.path])
        let resumed = try open(pool, hello, mayCreate: false).get()
        XCTAssertTrue(resumed.resumed)
        XCTAssertEqual(resumed.resume, StreamPosition(nextSequence: 2, nextSampleTime: 4))
        resumed.writer.detach {}
        pool.shutDown()
    }

    /// A receiver that dies leaves acknowledged audio in its commit log that its file may lack (the
    /// file system lost what no checkpoint synced). The receiver that takes the stream over replays
    /// the dead one's log first, and continues after everything acknowledged.
    func testAReceiverTakingOverAStreamReplaysTheDeadReceiversCommitLogFirst() throws {
        let hello = try Self.hello()
        let first = try makePool(policy: SyncPolicy(interval: .milliseconds(20)))
        let second = try makePool()
        defer { second.shutDown() }
        let recorded = DurableEvents()
        let stream = try open(first, hello, events: recorded.events).get()
        let path = stream.writer.path
        let audio = (0..<40).map { UInt8($0) }
        for sequence in 1...5 {
            stream.writer.write(sequence: UInt64(sequence), payload: Data(audio[(sequence - 1) * 8..<sequence * 8]), packetSizes: [], frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        XCTAssertEqual(recorded.wait(forSequence: 5), 5)
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        // The first receiver dies (its log's lock goes with it), and its file system loses what no
        // checkpoint covered: the audio and its position record.
        first.shutDown()
        _ = try StreamPositionLog.create(cafPath: path, initial: StreamPositionRecord(position: .start, packets: 0))
        try CAFWriter.resume(path: path, keepingPackets: 0).close()

        let taken = try open(second, hello, mayCreate: false).get()
        XCTAssertEqual(taken.writer.path, path)
        XCTAssertEqual(taken.resume, StreamPosition(nextSequence: 6, nextSampleTime: 20), "after everything the dead receiver acknowledged")
        XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), audio)
        taken.writer.detach {}
    }

    // MARK: - Helpers

    /// A writer pool (a receiver) on the shared folder, with a commit log of its own there.
    private func makePool(policy: SyncPolicy = noTimer) throws -> WriterPool {
        try WriterPool(threads: 1, policy: policy, metrics: nil, outputDirectory: folder, segmentSize: 1 << 20, logger: Self.logger)
    }

    private static let events = StreamWriterEvents(durable: { _ in }, failed: { _, _ in })

    private func configuration() -> ReceiverConfiguration {
        ReceiverConfiguration(outputDirectory: folder)
    }

    private func open(
        _ pool: WriterPool, _ hello: ValidatedHello, mayCreate: Bool = true, identity: String? = nil, events: StreamWriterEvents = events
    ) throws -> Result<OpenedStream, StorageError> {
        let opened = ResultBox<Result<OpenedStream, StorageError>>()
        let done = DispatchSemaphore(value: 0)
        StreamFiles(configuration: configuration(), pool: pool).open(hello: hello, mayCreate: mayCreate, owner: StreamOwner(secret: hello.message.resumeSecret, identity: identity), start: Date(), peer: "127.0.0.1", events: events) {
            opened.value = $0
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        return try XCTUnwrap(opened.value)
    }

    /// The CAF files in the folder that belong to `hello`'s stream (by name).
    private func files(for hello: ValidatedHello) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            $0.hasPrefix(hello.message.streamName) && $0.hasSuffix(".caf")
        }
    }

    /// A Hello of a new stream that continues `continued` from sequence 1 with `secret`.
    private static func continuation(of continued: UUID, secret: Data) throws -> ValidatedHello {
        var message = try hello().message
        message.resumeSecret = secret
        message.resumeFromSequence = 1
        message.continues = .with { $0.streamID = continued.wireBytes; $0.firstSequence = 1 }
        return try ValidatedHello(message)
    }

    private static func hello() throws -> ValidatedHello {
        let id = UUID()
        var message = Capture_V1_Hello()
        message.protocolVersion = 1
        message.streamID = id.wireBytes
        message.streamName = "unit-" + id.uuidString.prefix(8)
        message.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s16))
        message.startTimeUnixNs = 1_767_225_600_000_000_000
        message.resumeSecret = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        return try ValidatedHello(message)
    }
}

private final class ResultBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Value?
    var value: Value? {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }

    func append<Element>(_ element: Element) where Value == [Element] {
        lock.withLock { _value = (_value ?? []) + [element] }
    }
}

private extension StreamWriter {
    /// The stream id the file's `info` chunk records.
    var streamIDForTests: UUID? {
        (try? CAFFile.read(path: path))?.info.first { $0.key == "stream id" }.flatMap { UUID(uuidString: $0.value) }
    }
}

/// The durable positions a writer reports, waited for.
///
/// Sendability (`@unchecked Sendable`): `sequence` is read and written only under `condition`.
private final class DurableEvents: @unchecked Sendable {
    private let condition = NSCondition()
    private var sequence: UInt64 = 0

    var events: StreamWriterEvents {
        StreamWriterEvents(durable: { position in self.condition.withLock { self.sequence = position.lastSequence; self.condition.broadcast() } }, failed: { _, _ in })
    }

    /// Waits (at most 30 s) for a durable position at `target` or beyond; the last reported.
    func wait(forSequence target: UInt64) -> UInt64 {
        let deadline = Date().addingTimeInterval(30)
        return condition.withLock {
            while sequence < target, condition.wait(until: deadline) {}
            return sequence
        }
    }
}
