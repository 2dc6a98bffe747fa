import CaptureConsole
import CAF
import CaptureCommitLog
import CaptureCore
import CaptureMetrics
@testable import CaptureReceiver
import CaptureWire
import Foundation
import Logging
import XCTest

/// The receiver's shared writer pool: per-stream order, acknowledgements only after durability,
/// one sync round for many streams, failures confined to their stream, and a draining shutdown.
final class WriterPoolTests: XCTestCase {
    private var folder = ""
    private static let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 1, sample: .s16)
    /// A policy whose timer never fires within a test: rounds come from `bytes` or `shutDown`.
    private static let noTimer = SyncPolicy(interval: .seconds(3_600), bytes: 1 << 30)

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "writer-pool-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    func testEachStreamKeepsItsOrderAmongManyConcurrentStreams() throws {
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .milliseconds(20)))
        let streams = 40, writes = 50
        let opened = try (0..<streams).map { try open(pool, name: "order-\($0)") }
        DispatchQueue.concurrentPerform(iterations: streams) { index in
            for sequence in 1...writes {
                opened[index].writer.write(
                    sequence: UInt64(sequence), payload: Self.samples(stream: index, sequence: sequence),
                    packetSizes: [], frameCount: 4, endSampleTime: Int64(sequence * 4))
            }
        }
        for (index, stream) in opened.enumerated() {
            let file = try finish(stream.writer)
            XCTAssertEqual(file.frames, Int64(writes * 4))
            let expected = (1...writes).flatMap { Array(Self.samples(stream: index, sequence: $0)) }
            XCTAssertEqual(try CAFFile.read(path: stream.writer.path).readAudioData(), expected, "stream \(index) in order")
            XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: UInt64(writes), endSampleTime: Int64(writes * 4)))
            XCTAssertNil(stream.events.failure)
        }
        pool.shutDown()
    }

    /// The pool's threads carry their own names where the system shows them (`top -H`, `perf`):
    /// they had inherited the name of whatever thread started the receiver.
    func testThePoolsThreadsAreNamedForTheSystem() throws {
        let pool = try makePool(threads: 1, policy: SyncPolicy(interval: .milliseconds(20)))
        let stream = try open(pool, name: "named")
        stream.writer.write(sequence: 1, payload: Self.samples(stream: 0, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        _ = try finish(stream.writer)
        // The stream's write went through lane 0 and its round through the commit thread: both
        // have run their first line, which names them.
        let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap { task in
            try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
        }
        XCTAssertTrue(names.contains("writer 0"), "\(names)")
        XCTAssertTrue(names.contains("log commit"), "\(names)")
    }

    func testAReportedDurablePositionIsInTheCommitLogAndTheNextStartReplaysItIntoTheFile() throws {
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .milliseconds(20)))
        let hello = try Self.hello(name: "durable")
        let stream = try open(pool, name: "durable", hello: hello)
        let path = stream.writer.path
        for sequence in 1...10 {
            stream.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 1, sequence: sequence),
                                packetSizes: [], frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        let reported = try XCTUnwrap(stream.events.waitForDurable(sequence: 10))
        XCTAssertEqual(reported, StreamPosition(lastSequence: 10, endSampleTime: 40))
        // A round syncs the commit log only: the file's position log still says where it began.
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: path), StreamPositionRecord(position: .start, packets: 0))
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        pool.shutDown()
        // The file then loses everything no checkpoint covered, as in a power cut: its audio and its
        // position record.
        _ = try StreamPositionLog.create(cafPath: path, initial: StreamPositionRecord(position: .start, packets: 0))
        try CAFWriter.resume(path: path, keepingPackets: 0).close()
        XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), [])

        // The next start replays the log into the file, and the stream resumes after sequence 10.
        let restarted = try makePool(threads: 1, policy: Self.noTimer)
        defer { restarted.shutDown() }
        XCTAssertEqual(try CAFFile.read(path: path).readAudioData(), (1...10).flatMap { Array(Self.samples(stream: 1, sequence: $0)) })
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: path), StreamPositionRecord(position: StreamPosition(lastSequence: 10, endSampleTime: 40), packets: 40))
        let reopened = try openStream(restarted, hello: hello, mayCreate: false).get()
        XCTAssertEqual(reopened.writer.path, path)
        XCTAssertEqual(reopened.resume, StreamPosition(nextSequence: 11, nextSampleTime: 40))
    }

    /// Records `count` rounds of one stream, lets it go, shuts the pool down (its log unlocked, as a
    /// dead receiver's), and returns the file and the audio written.
    private func recordAndLetGo(name: String, count: Int) throws -> (path: String, hello: ValidatedHello, audio: [UInt8]) {
        let pool = try makePool(threads: 1, policy: SyncPolicy(interval: .milliseconds(5)))
        let hello = try Self.hello(name: name)
        let stream = try open(pool, name: name, hello: hello)
        for sequence in 1...count {
            stream.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 12, sequence: sequence), packetSizes: [], frameCount: 4, endSampleTime: Int64(sequence * 4))
            // One round each: every round a record of its own in the log.
            XCTAssertEqual(stream.events.waitForDurable(sequence: UInt64(sequence))?.lastSequence, UInt64(sequence))
        }
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        pool.shutDown()
        return (stream.writer.path, hello, (1...count).flatMap { Array(Self.samples(stream: 12, sequence: $0)) })
    }

    /// The one receiver log in the folder.
    private func logFolder() throws -> String {
        let root = folder + "/.commit-log"
        let logs = try FileManager.default.contentsOfDirectory(atPath: root)
        XCTAssertEqual(logs.count, 1, "\(logs)")
        return root + "/" + (try XCTUnwrap(logs.first))
    }

    func testReplayingTwiceGivesTheSameFileAsReplayingOnce() throws {
        let recorded = try recordAndLetGo(name: "twice", count: 6)
        let log = try logFolder()
        for attempt in 1...2 {
            // As if the file lost its audio and the replay before was cut off before its last step.
            _ = try StreamPositionLog.create(cafPath: recorded.path, initial: StreamPositionRecord(position: .start, packets: 0))
            if attempt == 1 { try CAFWriter.resume(path: recorded.path, keepingPackets: 0).close() }
            let replay = LogReplay(outputDirectory: folder)
            try replay.replay(try CommitLogReader(directory: log))
            XCTAssertEqual(replay.summary.failures, [])
            XCTAssertEqual(replay.summary.files, 1)
            XCTAssertEqual(try CAFFile.read(path: recorded.path).readAudioData(), recorded.audio, "replay \(attempt)")
            XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: recorded.path), StreamPositionRecord(position: StreamPosition(lastSequence: 6, endSampleTime: 24), packets: 24))
        }
    }

    func testReplayNeverCutsBackAFileThatAnotherReceiverMovedOn() throws {
        let recorded = try recordAndLetGo(name: "moved-on", count: 4)
        // Another receiver took the stream over and recorded two more messages (its position log says so).
        let writer = try CAFWriter.resume(path: recorded.path, keepingPackets: 16)
        let later = Array(Self.samples(stream: 13, sequence: 5)) + Array(Self.samples(stream: 13, sequence: 6))
        try writer.append(later, frameCount: 8)
        try writer.synchronize()
        writer.close()
        _ = try StreamPositionLog.create(cafPath: recorded.path, initial: StreamPositionRecord(position: StreamPosition(lastSequence: 6, endSampleTime: 24), packets: 24))

        let restarted = try makePool(threads: 1, policy: Self.noTimer)
        restarted.shutDown()
        XCTAssertEqual(try CAFFile.read(path: recorded.path).readAudioData(), recorded.audio + later, "the log's rounds are in the file already: nothing replayed over it")
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: recorded.path)?.position.lastSequence, 6)
    }

    /// Migration: a recording the version before the commit log left behind after a crash (a
    /// position record per round, audio written past the last one, and no commit log) is resumed at
    /// its last record and finished, as that version would have.
    func testARecordingLeftByTheVersionBeforeTheCommitLogIsResumedAndFinished() throws {
        let recorded = try recordAndLetGo(name: "before-the-log", count: 8)
        try FileManager.default.removeItem(atPath: folder + "/.commit-log")
        let positions = try StreamPositionLog.create(cafPath: recorded.path, initial: StreamPositionRecord(position: .start, packets: 0))
        for sequence in 1...6 {
            try positions.append(StreamPositionRecord(position: StreamPosition(lastSequence: UInt64(sequence), endSampleTime: Int64(sequence * 4)), packets: Int64(sequence * 4)))
        }
        // Messages 7 and 8 are in the file but were never acknowledged: their sender sends them again.
        let pool = try makePool(threads: 1, policy: SyncPolicy(interval: .milliseconds(5)))
        defer { pool.shutDown() }
        let events = EventLog()
        let reopened = try openStream(pool, hello: recorded.hello, mayCreate: false, events: events).get()
        XCTAssertTrue(reopened.resumed)
        XCTAssertEqual(reopened.writer.path, recorded.path)
        XCTAssertEqual(reopened.resume, StreamPosition(nextSequence: 7, nextSampleTime: 24))
        for sequence in 7...10 {
            reopened.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 14, sequence: sequence), packetSizes: [], frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        XCTAssertEqual(events.waitForDurable(sequence: 10)?.lastSequence, 10)
        let finished = try finish(reopened.writer)
        XCTAssertEqual(finished.frames, 40)
        let expected = Array(recorded.audio.prefix(6 * 8)) + (7...10).flatMap { Array(Self.samples(stream: 14, sequence: $0)) }
        XCTAssertEqual(try CAFFile.read(path: recorded.path).readAudioData(), expected)
        let file = try CAFFile.read(path: recorded.path)
        XCTAssertTrue(file.isFinalized)
        XCTAssertEqual(file.totalFrames, 40)
    }

    func testAFileShorterThanTheLogsFirstRoundIsReportedNotPatched() throws {
        let recorded = try recordAndLetGo(name: "damaged", count: 3)
        let log = try logFolder()
        // A checkpoint had made the first two messages durable (the log replays from its third round);
        // the file then lost them anyway: damage, which replay reports instead of writing a hole.
        _ = try StreamPositionLog.create(cafPath: recorded.path, initial: StreamPositionRecord(position: .start, packets: 0))
        try CAFWriter.resume(path: recorded.path, keepingPackets: 0).close()
        let replay = LogReplay(outputDirectory: folder)
        let reader = try CommitLogReader(directory: log)
        var records: [CommitLogRecord] = []
        while let batch = try reader.next() { records += batch }
        let file = try XCTUnwrap(records.first { $0.kind == 1 })
        let lastRound = try XCTUnwrap(records.last { $0.kind == 2 })
        try replayRecords([file, lastRound], with: replay)
        XCTAssertEqual(replay.summary.failures.count, 1, "\(replay.summary.failures)")
        XCTAssertTrue(replay.summary.failures.first?.contains("cannot reopen it at packet 8") ?? false, "\(replay.summary.failures)")
        XCTAssertEqual(try CAFFile.read(path: recorded.path).readAudioData(), [], "no audio written after a hole")
    }

    /// Replays `records` as a log holding only them would be.
    private func replayRecords(_ records: [CommitLogRecord], with replay: LogReplay) throws {
        let directory = folder + "/.other-log"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let log = try CommitLogReader(directory: directory, segmentSize: 1 << 20).startWriting()
        for record in records { try log.append(record) }
        try log.commit()
        log.close()
        try replay.replay(try CommitLogReader(directory: directory))
    }

    func testOneRoundCommitsEveryStreamWithOneSyncOfTheLog() throws {
        let metrics = ReceiverMetrics()
        let pool = try makePool(threads: 2, policy: Self.noTimer, metrics: metrics)
        let opened = try (0..<30).map { try open(pool, name: "round-\($0)") }
        for stream in opened {
            stream.writer.write(sequence: 1, payload: Self.samples(stream: 0, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        }
        XCTAssertEqual(pool.roundCount, 0, "nothing is durable before a round")
        XCTAssertTrue(opened.allSatisfy { $0.events.lastDurable == nil })
        pool.shutDown()
        XCTAssertEqual(pool.roundCount, 1)
        XCTAssertEqual(pool.fileSystemSyncCount, 1, "one syncfs makes the 30 new streams' files durable; the round syncs only the log")
        let lines = Set(metrics.exposition().split(separator: "\n").map(String.init))
        for line in [
            "capture_disk_rounds_total 1", "capture_disk_round_seconds_count 1", #"capture_disk_round_streams_bucket{le="20.0"} 0"#,
            #"capture_disk_round_streams_bucket{le="50.0"} 1"#, "capture_disk_round_streams_sum 30.0", "capture_disk_round_streams_count 1",
        ] {
            XCTAssertTrue(lines.contains(line), "missing \(line) in \(metrics.exposition())")
        }
        for stream in opened {
            XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 1, endSampleTime: 4))
            XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path)?.position.lastSequence, 0, "no position record per round")
        }
    }

    func testACheckpointRecordsPositionsOnlyAfterTheAudioIsSyncedAndThenMovesTheReplayPoint() throws {
        let observed = SyncObserver()
        let fileSystems = FileSystemSync()
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .milliseconds(20), checkpointInterval: .zero)) { directory in
            observed.sync()
            return fileSystems.synchronize(directory: directory)
        }
        defer { pool.shutDown() }
        let stream = try open(pool, name: "ordered")
        observed.watch(stream.writer.path)
        stream.writer.write(sequence: 1, payload: Self.samples(stream: 7, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        XCTAssertEqual(stream.events.waitForDurable(sequence: 1), StreamPosition(lastSequence: 1, endSampleTime: 4))
        XCTAssertTrue(waitUntil { pool.checkpointCount >= 1 }, "a checkpoint follows the round")
        XCTAssertEqual(observed.recordsAtEachSync, [0, 0, 1], "the new file, then the checkpoint's audio with no new record, then the record")
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path), StreamPositionRecord(position: StreamPosition(lastSequence: 1, endSampleTime: 4), packets: 4))
        XCTAssertGreaterThan(pool.logCheckpoint.offset, 0, "replay begins after the round now")
    }

    /// A receiver that goes quiet still checkpoints its last rounds by time: no further round is
    /// needed to start it (nor to retry a stranded file's).
    func testAQuietReceiversLastRoundIsCheckpointedByTime() throws {
        let pool = try makePool(threads: 1, policy: SyncPolicy(interval: .milliseconds(20), checkpointInterval: .milliseconds(500)))
        defer { pool.shutDown() }
        let stream = try open(pool, name: "quiet")
        stream.writer.write(sequence: 1, payload: Self.samples(stream: 9, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        XCTAssertEqual(stream.events.waitForDurable(sequence: 1), StreamPosition(lastSequence: 1, endSampleTime: 4))
        XCTAssertTrue(waitUntil { pool.checkpointCount >= 1 }, "checkpointed without another round")
        XCTAssertEqual(pool.roundCount, 1)
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path), StreamPositionRecord(position: StreamPosition(lastSequence: 1, endSampleTime: 4), packets: 4))
    }

    func testOnFUSEACheckpointSyncsEachFileInsteadOfTheFileSystem() throws {
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .milliseconds(20), checkpointInterval: .zero), syncMethod: .eachFile) { _ in
            XCTFail("syncfs reaches no FUSE server: it must not be relied on")
            return nil
        }
        defer { pool.shutDown() }
        let opened = try (0..<3).map { try open(pool, name: "fuse-\($0)") }
        for stream in opened {
            stream.writer.write(sequence: 1, payload: Self.samples(stream: 11, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        }
        for stream in opened { XCTAssertEqual(stream.events.waitForDurable(sequence: 1), StreamPosition(lastSequence: 1, endSampleTime: 4)) }
        XCTAssertTrue(waitUntil { pool.checkpointCount >= 1 })
        XCTAssertEqual(pool.fileSystemSyncCount, 0)
        for stream in opened {
            XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path)?.position.lastSequence, 1)
        }
    }

    func testAFailedFileSystemSyncFallsBackToSyncingEachNewFile() throws {
        let pool = try makePool(threads: 2, policy: Self.noTimer) { _ in EIO }
        let opened = try (0..<3).map { try open(pool, name: "fallback-\($0)") }
        for stream in opened {
            stream.writer.write(sequence: 1, payload: Self.samples(stream: 8, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        }
        pool.shutDown()
        XCTAssertEqual(pool.fileSystemSyncCount, 1)
        for stream in opened {
            XCTAssertNil(stream.events.failure, "each file synced alone")
            XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 1, endSampleTime: 4))
        }
    }

    func testUnsyncedBytesStartARoundEarly() throws {
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .seconds(3_600), bytes: 4_096))
        let stream = try open(pool, name: "early")
        let frames = 2_048
        stream.writer.write(sequence: 1, payload: Data(count: frames * 2), packetSizes: [], frameCount: frames, endSampleTime: Int64(frames))
        XCTAssertEqual(stream.events.waitForDurable(sequence: 1), StreamPosition(lastSequence: 1, endSampleTime: Int64(frames)))
        XCTAssertEqual(pool.roundCount, 1)
        pool.shutDown()
    }

    func testAFullDiskFailsOnlyItsOwnStream() throws {
        let small = try mountSmallDisk()
        defer { _ = run("/bin/umount", small) }
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .milliseconds(20)))
        let full = try open(pool, name: "full", folder: small)
        let healthy = try open(pool, name: "healthy")
        let frames = 256 << 10
        for sequence in 1...8 {
            full.writer.write(sequence: UInt64(sequence), payload: Data(count: frames * 2), packetSizes: [], frameCount: frames,
                              endSampleTime: Int64(sequence * frames))
            healthy.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 2, sequence: sequence), packetSizes: [],
                                 frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        let failure = try XCTUnwrap(full.events.waitForFailure())
        guard case .writeFailed(let message) = failure else { return XCTFail("expected a write failure, got \(failure)") }
        XCTAssertTrue(message.hasPrefix("the disk is full: free space in \(small)"), message)
        XCTAssertEqual(healthy.events.waitForDurable(sequence: 8), StreamPosition(lastSequence: 8, endSampleTime: 32))
        XCTAssertNil(healthy.events.failure)
        XCTAssertEqual(try finish(healthy.writer).frames, 32)
        pool.shutDown()
    }

    /// Audio acknowledged through the commit log but still gathered in memory when its disk filled
    /// never leaves the log: every checkpoint waits until it is in its file, and the stream stays
    /// claimed meanwhile, so no one resumes the file without it.
    func testAcknowledgedAudioThatCannotReachItsFileHoldsCheckpointsBackUntilItDoes() throws {
        let small = try mountSmallDisk()
        defer { _ = run("/bin/umount", small) }
        let pool = try makePool(threads: 2, policy: SyncPolicy(interval: .milliseconds(20), checkpointInterval: .zero))
        defer { pool.shutDown() }
        let strandedHello = try Self.hello(name: "stranded")
        let stranded = try open(pool, name: "stranded", folder: small, hello: strandedHello)
        let healthy = try open(pool, name: "healthy")
        stranded.writer.write(sequence: 1, payload: Self.samples(stream: 1, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        XCTAssertEqual(stranded.events.waitForDurable(sequence: 1), StreamPosition(lastSequence: 1, endSampleTime: 4))
        XCTAssertTrue(waitUntil { pool.checkpointCount >= 1 })
        let replayPoint = pool.logCheckpoint
        // The disk fills; 7,200 bytes (under the 8 KiB gathered before writing) need a new page.
        let filler = small + "/filler"
        XCTAssertTrue(FileManager.default.createFile(atPath: filler, contents: nil))
        let fill = try FileHandle(forWritingTo: URL(fileURLWithPath: filler))
        while (try? fill.write(contentsOf: Data(count: 4_096))) != nil {}
        try? fill.close()
        let second = Data((0..<7_200).map { UInt8(truncatingIfNeeded: $0 * 7) })
        stranded.writer.write(sequence: 2, payload: second, packetSizes: [], frameCount: 3_600, endSampleTime: 3_604)
        XCTAssertEqual(stranded.events.waitForDurable(sequence: 2), StreamPosition(lastSequence: 2, endSampleTime: 3_604), "acknowledged from the log")
        XCTAssertNotNil(stranded.events.waitForFailure(), "the checkpoint could not write it to the file")
        let detached = DispatchSemaphore(value: 0)
        stranded.writer.detach { detached.signal() }
        detached.wait()
        // Other streams' rounds go on; their checkpoints fail while the audio is not in its file.
        let failedBefore = pool.failedCheckpointCount
        for sequence in 1...3 {
            healthy.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 2, sequence: sequence), packetSizes: [],
                                 frameCount: 4, endSampleTime: Int64(sequence * 4))
            XCTAssertNotNil(healthy.events.waitForDurable(sequence: UInt64(sequence)))
        }
        XCTAssertTrue(waitUntil { pool.failedCheckpointCount > failedBefore })
        XCTAssertEqual(pool.logCheckpoint, replayPoint, "the log keeps the audio the file lacks")
        let index = StreamIndex(outputDirectory: small)
        guard case .failure(.held) = index.claimExisting(strandedHello.streamID) else {
            return XCTFail("the stream stays claimed while its file lacks acknowledged audio")
        }
        // Room again: the next checkpoint writes it, completes, and lets the stream go.
        try FileManager.default.removeItem(atPath: filler)
        healthy.writer.write(sequence: 4, payload: Self.samples(stream: 2, sequence: 4), packetSizes: [], frameCount: 4, endSampleTime: 16)
        XCTAssertTrue(waitUntil { pool.logCheckpoint != replayPoint }, "the checkpoint completes")
        let file = try CAFFile.read(path: stranded.writer.path)
        XCTAssertEqual(try file.readAudioData(), [UInt8](Self.samples(stream: 1, sequence: 1)) + [UInt8](second), "every acknowledged byte, in order")
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stranded.writer.path), StreamPositionRecord(position: StreamPosition(lastSequence: 2, endSampleTime: 3_604), packets: 3_604),
                       "and a resume continues after it")
        guard case .success(let claim) = index.claimExisting(strandedHello.streamID) else {
            return XCTFail("the stream is let go once its file holds its audio")
        }
        claim.release(removingEntry: false)
    }

    func testFinishComesAfterEveryPendingWrite() throws {
        let pool = try makePool(threads: 1, policy: Self.noTimer)
        let stream = try open(pool, name: "finish")
        for sequence in 1...20 {
            stream.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 3, sequence: sequence), packetSizes: [],
                                frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        let file = try finish(stream.writer)
        XCTAssertEqual(file.frames, 80)
        XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 20, endSampleTime: 80))
        XCTAssertTrue(try CAFFile.read(path: file.path).isFinalized)
        XCTAssertFalse(FileManager.default.fileExists(atPath: StreamPositionLog.path(for: file.path)), "a finished file keeps no position log")
        pool.shutDown()
    }

    func testDetachAfterPendingWritesLeavesTheStreamResumableWhereItEnded() throws {
        let pool = try makePool(threads: 2, policy: Self.noTimer)
        let hello = try Self.hello(name: "detach")
        let stream = try open(pool, name: "detach", hello: hello)
        for sequence in 1...5 {
            stream.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 4, sequence: sequence), packetSizes: [],
                                frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 5, endSampleTime: 20))
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path), StreamPositionRecord(position: StreamPosition(lastSequence: 5, endSampleTime: 20), packets: 20))

        let reopened = try openStream(pool, hello: hello, mayCreate: false).get()
        XCTAssertTrue(reopened.resumed)
        XCTAssertEqual(reopened.writer.path, stream.writer.path, "the same file continues")
        XCTAssertEqual(reopened.resume, StreamPosition(nextSequence: 6, nextSampleTime: 20))
        pool.shutDown()
    }

    func testStreamsDetachingTogetherShareOneSyncRound() throws {
        // The file system sync of a round that starts while the streams are still detaching waits
        // until every detach has reached its lane, as on a busy disk. However the threads are
        // scheduled (under stress-ng a round could start after each of the first few detaches and
        // the test saw 3 rounds), the detaches that come while a round runs share the next one.
        let gate = SyncGate()
        let fileSystems = FileSystemSync()
        let pool = try makePool(threads: 2, policy: Self.noTimer) { directory in
            gate.wait()
            return fileSystems.synchronize(directory: directory)
        }
        let opened = try (0..<20).map { try open(pool, name: "detach-\($0)") }
        let detached = DispatchGroup()
        for stream in opened {
            stream.writer.write(sequence: 1, payload: Self.samples(stream: 9, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
            detached.enter()
            stream.writer.detach { detached.leave() }
        }
        // Each lane runs its jobs in order: once a job queued on each after the detaches has run,
        // every detach has asked for its round.
        let lanesPassed = DispatchGroup()
        for _ in 0..<2 {
            lanesPassed.enter()
            pool.submit { lanesPassed.leave() }
        }
        XCTAssertEqual(lanesPassed.wait(timeout: .now() + 30), .success)
        gate.open()
        XCTAssertEqual(detached.wait(timeout: .now() + 30), .success)
        XCTAssertLessThanOrEqual(pool.roundCount, 2, "the detaches share rounds instead of syncing one by one")
        XCTAssertGreaterThanOrEqual(pool.roundCount, 1)
        for stream in opened {
            XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 1, endSampleTime: 4))
            XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path)?.position.lastSequence, 1)
        }
        pool.shutDown()
    }

    func testADetachAfterShutDownSyncsItsStreamAlone() throws {
        let pool = try makePool(threads: 2, policy: Self.noTimer)
        let stream = try open(pool, name: "late-detach")
        pool.shutDown()
        stream.writer.write(sequence: 1, payload: Self.samples(stream: 10, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 1, endSampleTime: 4))
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path)?.position.lastSequence, 1)
        XCTAssertEqual(pool.roundCount, 0)
    }

    func testShutDownRunsQueuedOperationsAndALastRound() throws {
        let pool = try makePool(threads: 2, policy: Self.noTimer)
        let stream = try open(pool, name: "drain")
        for sequence in 1...100 {
            stream.writer.write(sequence: UInt64(sequence), payload: Self.samples(stream: 5, sequence: sequence), packetSizes: [],
                                frameCount: 4, endSampleTime: Int64(sequence * 4))
        }
        pool.shutDown()
        XCTAssertEqual(stream.events.lastDurable, StreamPosition(lastSequence: 100, endSampleTime: 400))
        XCTAssertEqual(try StreamPositionLog.lastRecord(cafPath: stream.writer.path)?.position.lastSequence, 0, "the commit log holds the rounds, not the position log")
        // After shutdown an operation still completes (on the caller's thread).
        XCTAssertEqual(try finish(stream.writer).frames, 400)
    }

    func testAnAbandonedFileIsFinalizedOnThePool() throws {
        let pool = try makePool(threads: 2, policy: Self.noTimer)
        let stream = try open(pool, name: "abandoned")
        stream.writer.write(sequence: 1, payload: Self.samples(stream: 6, sequence: 1), packetSizes: [], frameCount: 4, endSampleTime: 4)
        let detached = expectation(description: "detached")
        stream.writer.detach { detached.fulfill() }
        wait(for: [detached], timeout: 30)
        let index = StreamIndex(outputDirectory: folder)
        XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: Date().addingTimeInterval(-3_600)), logger: Logger(label: "test")).finalized, 0, "within its resume window")
        let swept = expectation(description: "swept")
        pool.submit {
            XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: .distantFuture), logger: Logger(label: "test")).finalized, 1)
            swept.fulfill()
        }
        wait(for: [swept], timeout: 30)
        pool.shutDown()
        let file = try CAFFile.read(path: stream.writer.path)
        XCTAssertTrue(file.isFinalized)
        XCTAssertEqual(file.totalFrames, 4)
        XCTAssertFalse(FileManager.default.fileExists(atPath: StreamPositionLog.path(for: stream.writer.path)))
        XCTAssertEqual(index.streams().count, 1, "its entry records where it ends, for a stream that continues it")
        XCTAssertEqual(AbandonedStreamSweeper.sweep(index: index, mode: .expire(before: .distantFuture), logger: Logger(label: "test")).finalized, 0)
        XCTAssertEqual(index.streams(), [], "a resume window later it is gone from the index")
    }

    // MARK: - Helpers

    /// Issue 27, item 2: a segment whose natural name, its numbered names and its name carrying the
    /// stream id are all taken is still made (under the stream id and its first sample); the stream
    /// goes on, and the file and the session are told what was done.
    func testASegmentWhoseNamesAreTakenIsMadeUnderANameOnlyItsStreamCanHave() throws {
        segmentLength = .seconds(1)
        nameTemplate = try FileNameTemplate("{stream}_%H%M%S")
        let hello = try Self.hello(name: "clash")
        let id = hello.streamID.uuidString.lowercased()
        let taken = ["clash_000001.caf"] + (2...9).map { "clash_000001-\($0).caf" } + ["clash_000001+\(id).caf"]
        for name in taken { XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/" + name, contents: Data())) }
        let pool = try makePool(threads: 1, policy: Self.noTimer)
        defer { pool.shutDown() }
        let stream = try open(pool, name: "clash", hello: hello)
        XCTAssertEqual((stream.writer.path as NSString).lastPathComponent, "clash_000000.caf")
        // 1.5 s in one message: it crosses the boundary at 00:00:01 (frame 48,000).
        stream.writer.write(sequence: 1, payload: Data(count: 72_000 * 2), packetSizes: [], frameCount: 72_000, endSampleTime: 72_000)
        _ = try finish(stream.writer)
        XCTAssertNil(stream.events.failure, "\(String(describing: stream.events.failure))")
        let segment = try XCTUnwrap(stream.events.segmentsStarted.first)
        XCTAssertEqual((segment.path as NSString).lastPathComponent, "clash_000001+\(id)+48000.caf")
        XCTAssertEqual(segment.naming, FileNaming(intended: "clash_000001.caf", used: "clash_000001+\(id)+48000.caf", carriesStreamID: true))
        let file = try CAFFile.read(path: segment.path)
        XCTAssertEqual(file.info.first { $0.key == "intended file name" }?.value, "clash_000001.caf")
        XCTAssertEqual(file.totalFrames, 24_000)
        for name in taken {
            XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.size] as? Int, 0, "\(name) is left alone")
        }
    }

    /// A stream name, host or application with a NUL followed by a combining mark (one Character,
    /// which replacing "\0" missed) made every file creation fail, STORAGE_FAILED for ever: CAF `info`
    /// strings cannot hold a NUL (found by the `hello` fuzz target). The file is made, its `info`
    /// without the NULs.
    func testNamesWithANULBeforeACombiningMarkAreStoredWithoutIt() throws {
        var message = try Self.hello(name: "studio\u{0}\u{6DB}").message
        message.sourceHost = "\u{0}\u{0}\u{6DB}io-a"
        message.application = "capture-send\u{0}\u{301}"
        let maker = RecordingFileMaker(hello: try ValidatedHello(message), start: Date(), peer: "127.0.0.1:1", configuration: configuration())
        let created = try maker.createFirstFile(at: StreamPosition(nextSequence: 1, nextSampleTime: 0))
        created.writer.close()
        let info = Dictionary(try CAFFile.read(path: created.writer.path).info.map { ($0.key, $0.value) }) { a, _ in a }
        XCTAssertEqual(info["title"], "studio\u{6DB}")
        XCTAssertEqual(info["source host"], "\u{6DB}io-a")
        XCTAssertEqual(info["source"], "\u{6DB}io-a (127.0.0.1:1)")
        XCTAssertEqual(info["encoding application"], "capture-send\u{301}, capture-recv")
        XCTAssertEqual((created.writer.path as NSString).lastPathComponent, "studio_20260101T000000Z.caf")
    }

    /// A segment that cannot be begun (its folder is a file) fails the stream naming that segment's
    /// file, not the one the stream began in.
    func testASegmentThatCannotBeBegunFailsNamingItsOwnFile() throws {
        segmentLength = .seconds(1)
        nameTemplate = try FileNameTemplate("{stream}/%S/{stream}")
        try FileManager.default.createDirectory(atPath: folder + "/blocked", withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/blocked/01", contents: Data()))
        let pool = try makePool(threads: 1, policy: Self.noTimer)
        defer { pool.shutDown() }
        let stream = try open(pool, name: "blocked")
        XCTAssertEqual(stream.writer.path, folder + "/blocked/00/blocked.caf")
        stream.writer.write(sequence: 1, payload: Data(count: 72_000 * 2), packetSizes: [], frameCount: 72_000, endSampleTime: 72_000)
        let failure = try XCTUnwrap(stream.events.waitForFailure())
        XCTAssertEqual(stream.events.failedFile, folder + "/blocked/01/blocked.caf")
        XCTAssertTrue(failure.description.hasPrefix("cannot create \(folder)/blocked/01/blocked.caf: "), failure.description)
    }

    /// A pool recording into `folder`, its commit log in `folder/.commit-log`; its file system
    /// syncs go through `synchronizeFileSystem` when given, and checkpoints by `syncMethod`.
    /// Waits (at most 30 s) until `condition` holds, checking as the pool's threads report.
    private func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while !condition() {
            guard Date() < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return true
    }

    private func makePool(
        threads: Int, policy: SyncPolicy, syncMethod: RecordingSyncMethod = .fileSystem, metrics: ReceiverMetrics? = nil,
        synchronizeFileSystem: (@Sendable (String) -> Int32?)? = nil
    ) throws -> WriterPool {
        let fileSystems = FileSystemSync()
        return try WriterPool(
            threads: threads, policy: policy, metrics: metrics, outputDirectory: folder, logRoot: nil, segmentSize: 1 << 20, syncMethod: syncMethod,
            logger: Logger(label: "test"), synchronizeFileSystem: synchronizeFileSystem ?? { fileSystems.synchronize(directory: $0) })
    }

    private struct OpenStream {
        var writer: StreamWriter
        var events: EventLog
    }

    private var segmentLength: Duration?
    private var nameTemplate = FileNameTemplate.standard

    private func configuration(folder: String? = nil) -> ReceiverConfiguration {
        var configuration = ReceiverConfiguration(outputDirectory: folder ?? self.folder)
        configuration.segmentLength = segmentLength
        configuration.nameTemplate = nameTemplate
        return configuration
    }

    private func open(_ pool: WriterPool, name: String, folder: String? = nil, hello: ValidatedHello? = nil) throws -> OpenStream {
        let events = EventLog()
        let opened = try openStream(pool, hello: try hello ?? Self.hello(name: name), folder: folder, events: events).get()
        XCTAssertFalse(opened.resumed)
        return OpenStream(writer: opened.writer, events: events)
    }

    private func openStream(
        _ pool: WriterPool, hello: ValidatedHello, mayCreate: Bool = true, folder: String? = nil, events: EventLog = EventLog()
    ) throws -> Result<OpenedStream, StorageError> {
        let opened = ResultBox<Result<OpenedStream, StorageError>>()
        let done = DispatchSemaphore(value: 0)
        StreamFiles(configuration: configuration(folder: folder), pool: pool).open(hello: hello, mayCreate: mayCreate, owner: StreamOwner(secret: hello.message.resumeSecret, identity: nil), start: Date(), peer: "127.0.0.1", events: events.events) {
            opened.value = $0
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        return try XCTUnwrap(opened.value)
    }

    private func finish(_ writer: StreamWriter) throws -> FinishedFile {
        let finished = ResultBox<Result<FinishedFile, StorageError>>()
        let done = DispatchSemaphore(value: 0)
        writer.finish(StreamEnd(position: StreamPosition(lastSequence: 0, endSampleTime: 0))) {
            finished.value = $0
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        return try XCTUnwrap(finished.value).get()
    }

    private static func hello(name: String) throws -> ValidatedHello {
        var message = Capture_V1_Hello()
        message.protocolVersion = 1
        message.streamID = UUID().wireBytes
        message.streamName = name
        message.format = Capture_V1_StreamFormat(format)
        message.startTimeUnixNs = 1_767_225_600_000_000_000
        message.resumeSecret = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        message.sourceHost = "field-recorder"
        message.application = "capture-send test"
        return try ValidatedHello(message)
    }

    /// Four mono s16 frames that name their stream and sequence.
    private static func samples(stream: Int, sequence: Int) -> Data {
        let values = [Int16(stream), Int16(sequence), Int16(-stream), Int16(-sequence)]
        return Data(values.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] })
    }

    /// A 1 MiB tmpfs in the test's folder, to fill; skips the test where it cannot be mounted.
    private func mountSmallDisk() throws -> String {
        let small = folder + "/small"
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        guard run("/bin/mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small) else {
            throw XCTSkip("cannot mount a small tmpfs here (needs root)")
        }
        return small
    }

    private func run(_ arguments: String...) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}

/// What a stream's writer reported, gathered from the pool's threads.
private final class EventLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var durable: [StreamPosition] = []
    private var failed: StorageError?
    private var failedOn: String?
    private var segments: [(path: String, naming: FileNaming?)] = []

    var events: StreamWriterEvents {
        StreamWriterEvents(
            durable: { position in self.condition.withLock { self.durable.append(position); self.condition.broadcast() } },
            failed: { error, file in self.condition.withLock { self.failed = error; self.failedOn = file; self.condition.broadcast() } },
            segmentStarted: { path, naming in self.condition.withLock { self.segments.append((path, naming)) } }
        )
    }

    var lastDurable: StreamPosition? { condition.withLock { durable.last } }
    var failure: StorageError? { condition.withLock { failed } }
    /// The file the failure was on.
    var failedFile: String? { condition.withLock { failedOn } }
    /// The segment files begun, in order.
    var segmentsStarted: [(path: String, naming: FileNaming?)] { condition.withLock { segments } }

    /// Waits (at most 30 s) until a durable position at `sequence` or beyond is reported.
    func waitForDurable(sequence: UInt64) -> StreamPosition? {
        let deadline = Date().addingTimeInterval(30)
        return condition.withLock {
            while (durable.last?.lastSequence ?? 0) < sequence, condition.wait(until: deadline) {}
            return durable.last
        }
    }

    /// Waits (at most 30 s) for a failure.
    func waitForFailure() -> StorageError? {
        let deadline = Date().addingTimeInterval(30)
        return condition.withLock {
            while failed == nil, condition.wait(until: deadline) {}
            return failed
        }
    }
}

/// Records, at each file system sync, the sequence of the last position record of a watched stream.
private final class SyncObserver: @unchecked Sendable {
    private let lock = NSLock()
    private var path: String?
    private var records: [UInt64] = []

    func watch(_ path: String) { lock.withLock { self.path = path } }

    func sync() {
        lock.withLock {
            guard let path else { return }
            records.append((try? StreamPositionLog.lastRecord(cafPath: path))??.position.lastSequence ?? 99)
        }
    }

    var recordsAtEachSync: [UInt64] { lock.withLock { records } }
}

/// A value handed over from another thread.
private final class ResultBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?
    var value: Value? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// Holds a writer pool's file system syncs until opened (then lets every one through).
///
/// Sendability (`@unchecked Sendable`): `isOpen` is read and written only under `condition`.
private final class SyncGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false

    func wait() {
        condition.lock()
        while !isOpen { condition.wait() }
        condition.unlock()
    }

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }
}
