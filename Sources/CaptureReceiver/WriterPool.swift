import CaptureCore
import CaptureWire
import CaptureMetrics
import Foundation
import Logging

/// The receiver's storage threads, shared by every stream: a few lanes (threads) that run each
/// stream's disk operations in the order they were submitted (create or reopen its file, append audio
/// and gaps, finish, detach, finalize abandoned files), and one commit thread that makes every stream
/// with unsynced audio durable in one sync round (group commit) instead of a sync per stream.
///
/// A round starts `SyncPolicy.interval` after the first unsynced write since the last round, or at
/// once when one stream has `SyncPolicy.bytes` unsynced. It runs in an order that never lets a
/// position record become durable before the audio it describes:
/// 1. each dirty stream, on its lane, takes the position written so far;
/// 2. `syncfs` on the file system of the output folder makes that audio and the packet journals
///    durable;
/// 3. each stream, on its lane, writes its position record (not yet durable);
/// 4. `syncfs` again makes the records durable;
/// 5. each stream reports its new `DurablePosition` (and the session acknowledges it).
/// When a `syncfs` fails, the round syncs each of its files alone (fdatasync) to find out which
/// streams are affected; only those fail.
///
/// Created by `CaptureReceiverServer.start`; `shutDown()` drains it. Nothing here blocks the caller:
/// every operation is queued and reports through a completion or `StreamWriterEvents`, called on a
/// pool thread.
///
/// Sendability (`@unchecked Sendable`): the round state is read and written only under `condition`, the lanes are thread-safe, the rest is immutable after `init`.
public final class WriterPool: @unchecked Sendable {
    /// When rounds run.
    let policy: SyncPolicy
    /// Where disk latency is recorded.
    let metrics: ReceiverMetrics?
    private let lanes: [WriterLane]
    /// Syncs the file system holding a directory; the errno when it failed.
    private let synchronizeFileSystem: @Sendable (String) -> Int32?
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var dirty: [StreamWriter] = []
    private var firstDirtyAt: ContinuousClock.Instant?
    private var earlyRound = false
    private var stopping = false
    private var committerStopped = false
    private var lastRoundStarted = false
    private var nextLane = 0
    private var rounds = 0
    private var fileSystemSyncs = 0
    private var isShutDown = false

    /// A pool of `threads` lanes (at least one) plus its commit thread.
    public convenience init(threads: Int = 2, policy: SyncPolicy, metrics: ReceiverMetrics?) {
        let fileSystems = FileSystemSync()
        self.init(threads: threads, policy: policy, metrics: metrics) { fileSystems.synchronize(directory: $0) }
    }

    /// A pool whose rounds sync file systems with `synchronizeFileSystem` (tests observe or fail it).
    init(threads: Int, policy: SyncPolicy, metrics: ReceiverMetrics?, synchronizeFileSystem: @escaping @Sendable (String) -> Int32?) {
        self.policy = policy
        self.metrics = metrics
        self.synchronizeFileSystem = synchronizeFileSystem
        lanes = (0..<max(1, threads)).map { WriterLane(name: "writer-pool \($0)") }
        let committer = Thread { [self] in commitLoop() }
        committer.name = "writer-pool commit"
        committer.start()
    }

    // MARK: - Operations

    /// Opens an accepted stream's file: claims the stream, then continues its unfinished file or
    /// (when the stream is unknown and `mayCreate`) creates one (`StreamFiles.open`).
    func open(
        hello: ValidatedHello, mayCreate: Bool, owner: StreamOwner, start: Date, peer: String, configuration: ReceiverConfiguration,
        events: StreamWriterEvents, completion: @escaping @Sendable (Result<OpenedStream, StorageError>) -> Void
    ) {
        let lane = takeLane()
        lane.submit { [self] in
            completion(StreamFiles.open(
                hello: hello, mayCreate: mayCreate, owner: owner, start: start, peer: peer, configuration: configuration, events: events, lane: lane, pool: self))
        }
    }

    /// Runs `work` on one of the pool's lanes (sweeping the stream index for abandoned streams).
    func submit(_ work: @escaping @Sendable () -> Void) {
        takeLane().submit(work)
    }

    /// Drains every queued operation, runs a last sync round, stops the threads. Operations submitted
    /// afterwards run at once on the caller's thread.
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
        while !committerStopped { condition.wait() }
        condition.unlock()
        for lane in lanes { lane.stop() }
    }

    // MARK: - Counters (tests and metrics)

    /// Sync rounds run so far.
    var roundCount: Int { condition.withLock { rounds } }
    /// `syncfs` calls made so far (two per round).
    var fileSystemSyncCount: Int { condition.withLock { fileSystemSyncs } }

    // MARK: - Called by writers on their lane

    /// `writer` has unsynced audio: the next round covers it. False when no round will come any more
    /// (the pool's last round has started).
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

    /// A stream reached `SyncPolicy.bytes` unsynced: start a round now.
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
            while !stopping, !earlyRound, firstDirtyAt.map({ ContinuousClock.now < $0 + policy.interval }) ?? true {
                if let firstDirtyAt {
                    let wait = (firstDirtyAt + policy.interval) - ContinuousClock.now
                    _ = condition.wait(until: Date().addingTimeInterval(Self.seconds(wait)))
                } else {
                    condition.wait()
                }
            }
            let writers = dirty
            let last = stopping
            lastRoundStarted = last
            dirty.removeAll(keepingCapacity: true)
            firstDirtyAt = nil
            earlyRound = false
            condition.unlock()
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
        // 1. What each stream has written so far (its lane has run every write before this).
        let taken = onLanes(writers, lane: \.lane) { writer in writer.takeRoundPosition().map { RoundEntry(writer: writer, record: $0) } }
        guard !taken.isEmpty else { return }
        // 2. The audio and journals become durable.
        let synced = synchronize(taken) { $0.writer.synchronizeDataAlone() }
        // 3. Only then the position records are written, 4. and made durable.
        let recorded = onLanes(synced, lane: \.writer.lane) { $0.writer.writePositionRecord($0.record) ? $0 : nil }
        let durable = synchronize(recorded) { $0.writer.synchronizePositionAlone() }
        // The round is counted before anything is acknowledged: whoever saw an Ack of this round
        // sees the round counted (a test reading the count after an Ack raced with it under load).
        metrics?.diskWrite(duration: ContinuousClock.now - started)
        condition.withLock { rounds += 1 }
        // 5. The session layer may acknowledge.
        for entry in durable { entry.writer.lane.submit { entry.writer.roundMadeDurable(entry.record) } }
    }

    /// Syncs the file systems holding `entries`; where that fails, each entry alone with `alone`
    /// (on its lane). The entries whose files are durable.
    private func synchronize(_ entries: [RoundEntry], alone: @escaping (RoundEntry) -> Bool) -> [RoundEntry] {
        var failedDirectories = Set<String>()
        for directory in Set(entries.map { $0.writer.directory }) {
            let error = synchronizeFileSystem(directory)
            condition.withLock { fileSystemSyncs += 1 }
            if error != nil { failedDirectories.insert(directory) }
        }
        guard !failedDirectories.isEmpty else { return entries }
        return onLanes(entries, lane: \.writer.lane) { entry in
            !failedDirectories.contains(entry.writer.directory) || alone(entry) ? entry : nil
        }
    }

    /// Runs `body` for each item on its writer's lane and waits for all; the non-nil results.
    private func onLanes<Item, Result>(_ items: [Item], lane: KeyPath<Item, WriterLane>, _ body: @escaping (Item) -> Result?) -> [Result] {
        let group = DispatchGroup()
        let collected = ResultCollector<Result>()
        for item in items {
            group.enter()
            item[keyPath: lane].submit {
                if let result = body(item) { collected.add(result) }
                group.leave()
            }
        }
        group.wait()
        return collected.results
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        let components = duration.components
        return max(0, Double(components.seconds) + Double(components.attoseconds) / 1e18)
    }
}

/// A stream and the position one round makes durable for it.
struct RoundEntry {
    var writer: StreamWriter
    var record: StreamPositionRecord
}

/// Results gathered from several lanes.
///
/// Sendability (`@unchecked Sendable`): `values` is read and written only under `lock`.
private final class ResultCollector<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Value] = []

    func add(_ value: Value) { lock.withLock { values.append(value) } }
    var results: [Value] { lock.withLock { values } }
}
