import CaptureCommitLog
import CaptureCore
import CaptureWire
import Foundation
import Logging
import Synchronization

/// The receiver's storage threads, shared by every stream: a few lanes (threads) that run each
/// stream's disk operations in the order they were submitted (create or reopen its file, append audio
/// and gaps, finish, detach, finalize abandoned files); one commit thread that makes every stream's
/// new audio durable in one round (group commit) by appending it to the receiver's commit log and
/// syncing that one file; and one checkpoint thread that makes the recordings themselves durable now
/// and then, so the log before it can be reused (docs/DURABILITY.md, "The commit log").
///
/// A round starts `SyncPolicy.interval` after the first write since the last round, or at once when
/// one stream has `SyncPolicy.bytes` not yet in a round:
/// 1. each stream with new audio, on its lane, hands over what it wrote to its file since its last
///    round (the audio, packet sizes, gaps and markers, and the stream position they reach);
/// 2. a new stream's files and entries, created without a sync, are made durable (one `syncfs`, or
///    an fdatasync of each on FUSE);
/// 3. the round is appended to the commit log and made durable with one `fdatasync`;
/// 4. each stream reports its new durable `StreamPosition` (and the session acknowledges it).
/// The recordings are written without a sync per round. A checkpoint (every
/// `SyncPolicy.checkpointInterval`, or once the log has grown `SyncPolicy.checkpointBytes`) makes
/// them durable (`syncfs`, or an fdatasync of each file on FUSE), records each stream's position in
/// its position log, makes those durable, and only then moves the log's replay point; rounds go on
/// meanwhile, so a checkpoint never holds an Ack back. After a crash the log is replayed from its
/// last checkpoint into the files (`LogRecovery`).
///
/// Created by `CaptureReceiverServer.start`; `shutDown()` drains it. Nothing here blocks the caller:
/// every operation is queued and reports through a completion or `StreamWriterEvents`, called on a
/// pool thread.
///
/// Sendability (`@unchecked Sendable`): the round and checkpoint state is read and written only
/// under `condition`, the log only on the commit thread, the lanes are thread-safe, the rest is
/// immutable after `init`.
public final class WriterPool: @unchecked Sendable {
    /// When rounds and checkpoints run.
    let policy: SyncPolicy
    /// Where disk latency and rounds are recorded.
    let metrics: (any ReceiverMetricsRecorder)?
    /// The folder the recordings are in.
    let outputDirectory: String
    /// The folder of the receivers' commit logs, and this receiver's own log's folder in it.
    let logRoot: String
    var logDirectory: String { log.directory }
    /// How checkpoints and new files are made durable.
    let syncMethod: RecordingSyncMethod
    let logger: Logger
    /// How log lines and failures name a setting to change.
    private let settingNames: any SettingNaming
    private let lanes: [WriterLane]
    private let log: ReceiverLog
    /// Syncs the file system holding a directory; the errno when it failed.
    private let synchronizeFileSystem: @Sendable (String) -> Int32?
    private let condition = NSCondition()
    /// Serializes takeover replays (`replayAbandonedLogs`).
    private let takeoverLock = NSLock()
    // Guarded by `condition`.
    private var dirty: [StreamWriter] = []
    private var firstDirtyAt: ContinuousClock.Instant?
    private var earlyRound = false
    private var stopping = false
    private var committerStopped = false
    private var lastRoundStarted = false
    private var nextLane = 0
    private var nextSubject: UInt64 = 1
    private var rounds = 0
    private var checkpoints = 0
    private var fileSystemSyncs = 0
    private var isShutDown = false
    /// Streams with rounds since the checkpoint being prepared, and what their last round reached.
    private var sinceCheckpoint: [ObjectIdentifier: CheckpointEntry] = [:]
    private var lastCheckpointAt = ContinuousClock.now
    private var checkpointRequest: (position: LogPosition, entries: [CheckpointEntry])?
    private var checkpointRunning = false
    /// A checkpoint whose recordings are durable: the commit thread moves the log's replay point.
    private var checkpointCompleted: LogPosition?
    private var checkpointerStopped = false

    /// Opens the receiver's commit log under `logRoot` (replaying every abandoned log there into the
    /// recordings under `outputDirectory` first) and starts `threads` lanes (at least one), the
    /// commit thread and the checkpoint thread.
    public convenience init(
        threads: Int = 2, policy: SyncPolicy, metrics: (any ReceiverMetricsRecorder)?, outputDirectory: String, logRoot: String? = nil,
        segmentSize: UInt64 = WriterPool.defaultSegmentSize, logger: Logger = Logger(label: "capture-recv.storage"),
        settingNames: any SettingNaming = LibrarySettingNames()
    ) throws(ReceiverStartError) {
        let fileSystems = FileSystemSync()
        try self.init(
            threads: threads, policy: policy, metrics: metrics, outputDirectory: outputDirectory, logRoot: logRoot, segmentSize: segmentSize,
            syncMethod: RecordingSyncMethod.detect(directory: outputDirectory), logger: logger, settingNames: settingNames
        ) { fileSystems.synchronize(directory: $0) }
    }

    /// 16 MiB, as PostgreSQL's WAL segments: a round larger than a segment continues in the next.
    public static let defaultSegmentSize: UInt64 = 16 << 20

    /// A pool whose rounds sync file systems with `synchronizeFileSystem` (tests observe or fail it)
    /// and make checkpoints durable by `syncMethod`.
    init(
        threads: Int, policy: SyncPolicy, metrics: (any ReceiverMetricsRecorder)?, outputDirectory: String, logRoot: String?, segmentSize: UInt64,
        syncMethod: RecordingSyncMethod, logger: Logger, settingNames: any SettingNaming = LibrarySettingNames(),
        synchronizeFileSystem: @escaping @Sendable (String) -> Int32?
    ) throws(ReceiverStartError) {
        self.settingNames = settingNames
        self.policy = policy
        self.metrics = metrics
        self.outputDirectory = outputDirectory
        let root = logRoot ?? (outputDirectory as NSString).appendingPathComponent(LogRecovery.defaultFolderName)
        self.logRoot = root
        self.syncMethod = syncMethod
        self.logger = logger
        self.synchronizeFileSystem = synchronizeFileSystem
        do throws(LogRecovery.OpenFailure) {
            log = try LogRecovery.openReceiverLog(root: root, outputDirectory: outputDirectory, segmentSize: segmentSize, logger: logger)
        } catch {
            throw .commitLog(error)
        }
        lanes = (0..<max(1, threads)).map { WriterLane(name: "writer \($0)") }
        let committer = Thread { [self] in
            DetachedThread.nameCurrentThread("log commit")
            commitLoop()
        }
        committer.start()
        let checkpointer = Thread { [self] in
            DetachedThread.nameCurrentThread("log checkpoint")
            checkpointLoop()
        }
        checkpointer.start()
    }

    // MARK: - Operations

    /// Runs `work` on the next lane, after the operations queued there (opening a stream's files,
    /// `StreamFiles.open`): the lane it is given is the one the new stream's writer is bound to.
    func onOpeningLane(_ work: @escaping @Sendable (WriterLane) -> Void) {
        let lane = takeLane()
        lane.submit(.opening) { work(lane) }
    }

    /// Runs `work` on one of the pool's lanes (sweeping the stream index for abandoned streams).
    func submit(_ work: @escaping @Sendable () -> Void) {
        onOpeningLane { _ in work() }
    }

    /// Before continuing a stream another receiver may have written last: replays the commit logs
    /// of receivers that are gone (`LogRecovery.replayAbandonedLogs`), while `claim` is held. One
    /// lane at a time: streams of one dead receiver taken over together wait for each other here
    /// instead of finding its log locked by this very receiver.
    func replayAbandonedLogs(stream: UUID, claim: StreamClaim) -> Result<Void, StorageError> {
        takeoverLock.withLock {
            LogRecovery.replayAbandonedLogs(root: logRoot, own: log.directory, outputDirectory: outputDirectory, holding: (stream, claim), logger: logger)
        }
    }

    /// Returns once no takeover replay of this pool runs (one that began before the call has ended).
    func waitForTakeoverReplays() {
        takeoverLock.withLock {}
    }

    /// A number for a new stream writer, unique in this pool: its records' subject in the log.
    func takeSubject() -> UInt64 {
        condition.withLock {
            defer { nextSubject += 1 }
            return nextSubject
        }
    }

    /// Drains every queued operation, runs a last round, stops the threads and closes the log.
    /// Operations submitted afterwards run at once on the caller's thread.
    public func shutDown() {
        let first = condition.withLock {
            defer { isShutDown = true }
            return !isShutDown
        }
        guard first else { return }
        for lane in lanes { lane.drain() }
        condition.lock()
        stopping = true
        condition.broadcast()
        while !committerStopped || !checkpointerStopped { condition.wait() }
        condition.unlock()
        for lane in lanes { lane.stop() }
        log.close()
    }

    // MARK: - Counters (tests and metrics)

    /// Rounds committed so far.
    var roundCount: Int { condition.withLock { rounds } }
    /// Checkpoints completed so far.
    var checkpointCount: Int { condition.withLock { checkpoints } }
    /// Checkpoints that could not make the recordings durable so far (each is tried again).
    var failedCheckpointCount: Int { condition.withLock { failedCheckpoints } }
    private var failedCheckpoints = 0
    /// `syncfs` calls made so far (new streams' files, checkpoints).
    var fileSystemSyncCount: Int { condition.withLock { fileSystemSyncs } }
    /// Where replay would begin now (tests).
    var logCheckpoint: LogPosition { condition.withLock { checkpointCompletedPosition } }
    private var checkpointCompletedPosition = LogPosition.start

    // MARK: - Called by writers on their lane

    /// `writer` has audio not yet in a round: the next round covers it. False when no round will
    /// come any more (the pool's last round has started).
    func needsRound(_ writer: StreamWriter) -> Bool {
        condition.withLock {
            guard !lastRoundStarted else { return false }
            dirty.append(writer)
            if firstDirtyAt == nil {
                firstDirtyAt = .now
                condition.broadcast()
            }
            return true
        }
    }

    /// `writer` let go of `path` before it was durable with its position recorded
    /// (`StreamWriter.stranded`): the next checkpoint covers it, and completes only once it is.
    func coverAtNextCheckpoint(_ writer: StreamWriter, path: String, position: StreamPositionRecord) {
        condition.withLock {
            let key = ObjectIdentifier(writer)
            if sinceCheckpoint[key] == nil { sinceCheckpoint[key] = CheckpointEntry(writer: writer, path: path, position: position) }
        }
    }

    /// A stream reached `SyncPolicy.bytes` not yet in a round: start a round now.
    func startRoundEarly() {
        condition.withLock {
            earlyRound = true
            condition.broadcast()
        }
    }

    // MARK: - Rounds

    private func takeLane() -> WriterLane {
        condition.withLock {
            defer { nextLane = (nextLane + 1) % lanes.count }
            return lanes[nextLane]
        }
    }

    private func commitLoop() {
        while true {
            condition.lock()
            while !stopping, !earlyRound, checkpointCompleted == nil, firstDirtyAt.map({ ContinuousClock.now < $0 + policy.interval }) ?? true,
                  idleCheckpointAt().map({ ContinuousClock.now < $0 }) ?? true {
                let deadlines = [firstDirtyAt.map { $0 + policy.interval }, idleCheckpointAt()].compactMap { $0 }
                if let deadline = deadlines.min() {
                    _ = condition.wait(until: Date().addingTimeInterval(max(0, (deadline - ContinuousClock.now).inSeconds)))
                } else {
                    condition.wait()
                }
            }
            let roundDue = stopping || earlyRound || firstDirtyAt.map { ContinuousClock.now >= $0 + policy.interval } ?? false
            if !roundDue, !stopping, let due = idleCheckpointAt(), ContinuousClock.now >= due {
                // No round comes to start it: the streams waiting for a checkpoint (a stranded
                // file's retry, or rounds before the receiver went quiet) get one by time.
                checkpointRunning = true
                checkpointRequest = (log.beginCheckpoint(), Array(sinceCheckpoint.values))
                sinceCheckpoint.removeAll(keepingCapacity: true)
                condition.broadcast()
            }
            let writers = roundDue ? dirty : []
            let last = stopping
            if roundDue {
                lastRoundStarted = last
                dirty.removeAll(keepingCapacity: true)
                firstDirtyAt = nil
                earlyRound = false
            }
            let completed = checkpointCompleted
            checkpointCompleted = nil
            condition.unlock()
            if let completed { completeCheckpoint(completed) }
            if !writers.isEmpty { runRound(writers) }
            if last { break }
        }
        condition.withLock {
            committerStopped = true
            condition.broadcast()
        }
    }

    private func runRound(_ writers: [StreamWriter]) {
        let started = ContinuousClock.now
        // 1. What each stream wrote since its last round, taken on its lane ahead of the operations
        // queued there (a write still queued goes into the next round).
        let taken = onLanes(writers, lane: \.lane, urgent: true) { writer in writer.takeRound().map { RoundEntry(writer: writer, take: $0) } }
        guard !taken.isEmpty else { return }
        // 2. New streams' files and index entries become durable.
        let creating = taken.filter(\.take.needsCreationSync)
        let failed = creating.isEmpty ? [] : makeCreationsDurable(creating)
        let logged = taken.filter { !failed.contains(ObjectIdentifier($0.writer)) }
        // 3. The round goes into the log, durably.
        do throws(CommitLogError) {
            for entry in logged { try log.append(subject: entry.take.subject, file: entry.take.file, roundBody: entry.take.roundBody) }
            try log.commit()
        } catch {
            let reason = error.message(naming: settingNames)
            logger.error("the receiver cannot acknowledge audio: \(reason)")
            onLanesLater(logged, lane: \.writer.lane) { $0.writer.failSync(.writeFailed(reason)) }
            return
        }
        let took = ContinuousClock.now - started
        metrics?.diskWrite(duration: took)
        metrics?.diskRound(duration: took, streams: logged.count)
        // The round is counted before anything is acknowledged: whoever saw an Ack of this round
        // sees the round counted.
        let checkpoint: (LogPosition, [CheckpointEntry])? = condition.withLock {
            rounds += 1
            for entry in logged {
                sinceCheckpoint[ObjectIdentifier(entry.writer)] = CheckpointEntry(writer: entry.writer, path: entry.take.path, position: entry.take.position)
            }
            guard !checkpointRunning, !stopping, checkpointDue() else { return nil }
            checkpointRunning = true
            let entries = Array(sinceCheckpoint.values)
            sinceCheckpoint.removeAll(keepingCapacity: true)
            return (log.beginCheckpoint(), entries)
        }
        // 4. The session layer may acknowledge.
        onLanesLater(logged, lane: \.writer.lane) { $0.writer.roundMadeDurable($0.take.position) }
        if let checkpoint {
            condition.withLock {
                checkpointRequest = checkpoint
                condition.broadcast()
            }
        }
    }

    /// When a checkpoint is due without a round to start it (under `condition`): streams wait for
    /// one and none runs. At most once a second, so a checkpoint that keeps failing is not retried
    /// in a loop.
    private func idleCheckpointAt() -> ContinuousClock.Instant? {
        guard !sinceCheckpoint.isEmpty, !checkpointRunning, checkpointRequest == nil else { return nil }
        return lastCheckpointAt + max(policy.checkpointInterval, .seconds(1))
    }

    /// Whether a checkpoint is due (under `condition`).
    private func checkpointDue() -> Bool {
        guard !sinceCheckpoint.isEmpty else { return false }
        if ContinuousClock.now >= lastCheckpointAt + policy.checkpointInterval { return true }
        return log.durableEnd.offset - log.checkpoint.offset >= policy.checkpointBytes
    }

    /// Makes new streams' files and index entries durable: one `syncfs` (each file alone where that
    /// fails or cannot reach the storage). The streams that failed.
    private func makeCreationsDurable(_ entries: [RoundEntry]) -> Set<ObjectIdentifier> {
        if syncMethod == .fileSystem {
            let error = synchronizeFileSystem(outputDirectory)
            condition.withLock { fileSystemSyncs += 1 }
            if error == nil {
                onLanesLater(entries, lane: \.writer.lane) { $0.writer.creationMadeDurable() }
                return []
            }
        }
        let durable = onLanes(entries, lane: \.writer.lane, urgent: true) { $0.writer.makeCreationDurable() ? ObjectIdentifier($0.writer) : nil }
        return Set(entries.map { ObjectIdentifier($0.writer) }).subtracting(durable)
    }

    // MARK: - Checkpoints

    private func checkpointLoop() {
        while true {
            condition.lock()
            while checkpointRequest == nil, !(stopping && committerStopped) { condition.wait() }
            let request = checkpointRequest
            checkpointRequest = nil
            condition.unlock()
            guard let request else { break }
            runCheckpoint(through: request.position, request.entries)
        }
        condition.withLock {
            checkpointerStopped = true
            condition.broadcast()
        }
    }

    /// Makes the recordings durable up to what the log holds before `position`, then records each
    /// stream's position in its position log, makes those durable, and hands the checkpoint to the
    /// commit thread. On failure nothing moves: the streams are covered again by the next one.
    private func runCheckpoint(through position: LogPosition, _ entries: [CheckpointEntry]) {
        let started = ContinuousClock.now
        var succeeded = synchronizeRecordings(entries)
        if succeeded {
            let recorded = onLanes(entries, lane: \.writer.lane) { entry in
                entry.writer.recordCheckpoint(path: entry.path, position: entry.position, synchronizing: self.syncMethod == .eachFile) ? true : nil
            }
            succeeded = recorded.count == entries.count
        }
        if succeeded { CrashPoint.midCheckpoint.reached() }
        if succeeded, syncMethod == .fileSystem {
            let error = synchronizeFileSystem(outputDirectory)
            condition.withLock { fileSystemSyncs += 1 }
            succeeded = error == nil
        }
        metrics?.diskWrite(duration: ContinuousClock.now - started)
        condition.withLock {
            checkpointRunning = false
            lastCheckpointAt = .now
            if succeeded {
                checkpointCompleted = position
            } else {
                failedCheckpoints += 1
                // The next checkpoint covers these streams again (with their newer positions when
                // they wrote more since).
                for entry in entries where sinceCheckpoint[ObjectIdentifier(entry.writer)] == nil {
                    sinceCheckpoint[ObjectIdentifier(entry.writer)] = entry
                }
            }
            condition.broadcast()
        }
        if !succeeded {
            logger.error("a checkpoint could not make the recordings durable: the commit log keeps everything since the last one, and the next checkpoint tries again")
        }
    }

    /// The recordings' audio durable: `syncfs`, or each stream's files where that fails or cannot
    /// reach the storage. False when any failed.
    private func synchronizeRecordings(_ entries: [CheckpointEntry]) -> Bool {
        if syncMethod == .fileSystem {
            // What the streams gather in memory goes to their files first, for the syncfs to cover.
            let flushed = onLanes(entries, lane: \.writer.lane) { $0.writer.flushForCheckpoint(path: $0.path) ? true : nil }
            guard flushed.count == entries.count else { return false }
            let error = synchronizeFileSystem(outputDirectory)
            condition.withLock { fileSystemSyncs += 1 }
            if error == nil { return true }
        }
        let synced = onLanes(entries, lane: \.writer.lane) { $0.writer.synchronizeForCheckpoint(path: $0.path) ? true : nil }
        return synced.count == entries.count
    }

    /// On the commit thread: moves the log's replay point.
    private func completeCheckpoint(_ position: LogPosition) {
        do throws(CommitLogError) {
            try log.completeCheckpoint(through: position)
            condition.withLock {
                checkpoints += 1
                checkpointCompletedPosition = position
            }
        } catch {
            logger.error("cannot record the checkpoint in the commit log: \(error.message(naming: settingNames))")
        }
    }

    // MARK: - Helpers

    /// Runs `body` for each item on its writer's lane and waits for all; the non-nil results. Each
    /// lane gets one job for all its items (a round of 10,000 streams is a few jobs, not 10,000).
    /// `urgent`: a round's step, run ahead of the operations queued (`WriterLane`).
    private func onLanes<Item, Result: Sendable>(
        _ items: [Item], lane: KeyPath<Item, WriterLane>, urgent: Bool = false, _ body: @escaping (Item) -> Result?
    ) -> [Result] {
        let group = DispatchGroup()
        let collected = ResultCollector<Result>()
        for (lane, laneItems) in byLane(items, lane: lane) {
            group.enter()
            let job = {
                collected.add(contentsOf: laneItems.compactMap(body))
                group.leave()
            }
            lane.submit(urgent ? .round : .stream, job)
        }
        group.wait()
        return collected.results
    }

    /// Runs a round's step `body` for each item on its writer's lane, in the items' order, ahead of
    /// the operations queued there, without waiting: one job per lane.
    private func onLanesLater<Item>(_ items: [Item], lane: KeyPath<Item, WriterLane>, _ body: @escaping (Item) -> Void) {
        for (lane, laneItems) in byLane(items, lane: lane) {
            lane.submit(.round) { laneItems.forEach(body) }
        }
    }

    /// `items` by the lane each belongs to, in their order.
    private func byLane<Item>(_ items: [Item], lane: KeyPath<Item, WriterLane>) -> [(WriterLane, [Item])] {
        var groups: [(WriterLane, [Item])] = []
        for item in items {
            let itemLane = item[keyPath: lane]
            if let index = groups.firstIndex(where: { $0.0 === itemLane }) {
                groups[index].1.append(item)
            } else {
                groups.append((itemLane, [item]))
            }
        }
        return groups
    }
}

/// A stream and what one round takes from it.
struct RoundEntry {
    var writer: StreamWriter
    var take: RoundTake
}

/// A stream's last round before a checkpoint: the file it wrote and the position it reached.
struct CheckpointEntry {
    var writer: StreamWriter
    var path: String
    var position: StreamPositionRecord
}

/// Results gathered from several lanes.
private final class ResultCollector<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])

    func add(contentsOf more: [Value]) { values.withLock { $0.append(contentsOf: more) } }
    var results: [Value] { values.withLock { $0 } }
}
