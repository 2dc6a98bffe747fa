// capture-commit-log-bench: what a receiver's sync round costs for N streams, today's way against
// the commit log's, in one invocation on one folder (bench/bench-commit-log.sh; issue 28).
//
// Every round, each of N streams gets AUDIO bytes (3,250 by default: an Opus-shaped 130 kb/s
// stream over a 200 ms round) and one packet-size record.
// - "files + syncfs" (the receiver today, docs/DURABILITY.md "Group commit"): each stream has a data
//   file, a packet journal and a position log; the round writes the audio and the journal record,
//   syncfs, writes each position record, syncfs again.
// - "commit log": each stream has its data file only, written without a sync; the round appends one
//   record per stream (audio, packet size, position) to the log and commits it (one fdatasync). Every
//   CHECKPOINT rounds a checkpoint starts on its own thread (syncfs of the data files' file system),
//   as in the receiver's design, where checkpoints never hold an Ack back; when it is done, the next
//   round records it in the log (the control file, segment recycling), and that is counted in the
//   round. The checkpoints' own durations are reported beside.
// Rounds start every 200 ms (the default --sync-ms). Two checkpoint intervals of rounds run first,
// unmeasured (both ways), so that the log is measured recycling its segments as a receiver that has
// run for a while does, not zero-filling its first ones. Prints one Markdown row per (streams, way).
//
//   capture-commit-log-bench FOLDER STREAMS[,STREAMS...] [ROUNDS] [AUDIO] [CHECKPOINT]
import CaptureCommitLog
import CaptureCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

func fail(_ line: String) -> Never {
    FileHandle.standardError.write(Data(("capture-commit-log-bench: " + line + "\n").utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: capture-commit-log-bench FOLDER STREAMS[,STREAMS...] [ROUNDS] [AUDIO] [CHECKPOINT]") }
let folder = arguments[1]
let counts = arguments[2].split(separator: ",").compactMap { Int($0) }
let rounds = arguments.count > 3 ? Int(arguments[3]) ?? 50 : 50
let audioBytes = arguments.count > 4 ? Int(arguments[4]) ?? 3_250 : 3_250
let checkpointEvery = arguments.count > 5 ? Int(arguments[5]) ?? 10 : 10
let warmUp = 2 * checkpointEvery

typealias SyncFS = @convention(c) (Int32) -> Int32
guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { fail("no syncfs in this libc") }
let syncfs = unsafeBitCast(symbol, to: SyncFS.self)

var limit = rlimit()
getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = limit.rlim_max
setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)

/// CPU time of this process (user + system).
func cpuTime() -> Duration {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    let micros = Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    return .microseconds(micros)
}

/// Bytes this process has caused to be written to storage (/proc/self/io write_bytes).
func storageBytesWritten() -> Int64 {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("write_bytes:") {
        return Int64(line.split(separator: " ").last ?? "0") ?? 0
    }
    return 0
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func makeFolder(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
    do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch { fail("cannot make \(path): \(error)") }
}

func openFile(_ path: String) -> Int32? {
    let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    return descriptor >= 0 ? descriptor : nil
}

/// Runs checkpoints' syncfs off the round thread: one at a time, each for the log position that was
/// committed when it was asked for.
///
/// Sendability (`@unchecked Sendable`): every field is read and written under `condition`.
final class Checkpointer: @unchecked Sendable {
    private let condition = NSCondition()
    private var requested: LogPosition?
    private var running = false
    private var completed: LogPosition?
    private var stopping = false
    private(set) var durations: [Double] = []
    private let folderDescriptor: Int32

    init(folderDescriptor: Int32) {
        self.folderDescriptor = folderDescriptor
        Thread.detachNewThread { [self] in run() }
    }

    /// Asks for a checkpoint through `position` unless one is under way.
    func request(_ position: LogPosition) {
        condition.withLock {
            guard !running, requested == nil else { return }
            requested = position
            condition.broadcast()
        }
    }

    /// The position the last finished checkpoint made durable, once.
    func takeCompleted() -> LogPosition? {
        condition.withLock {
            defer { completed = nil }
            return completed
        }
    }

    func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
            while running { condition.wait() }
        }
    }

    private func run() {
        condition.lock()
        while true {
            while requested == nil && !stopping { condition.wait() }
            guard let position = requested, !stopping else { break }
            requested = nil
            running = true
            condition.unlock()
            let started = ContinuousClock.now
            _ = syncfs(folderDescriptor)
            let took = milliseconds(ContinuousClock.now - started)
            condition.lock()
            durations.append(took)
            completed = position
            running = false
            condition.broadcast()
        }
        condition.unlock()
    }
}

struct Measured {
    var checkpointMilliseconds: [Double] = []
    var roundMilliseconds: [Double] = []
    var cpu: Duration = .zero
    var storageBytes: Int64 = 0
    var descriptors = 0
}

let audio = (0..<audioBytes).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
let journalRecord = [UInt8](repeating: 0x11, count: 40)
let positionRecord = [UInt8](repeating: 0x22, count: 32)
let pace = Duration.milliseconds(200)

/// Sleeps until `next` (the next round's start); a round that overran it starts the next at once.
func waitUntil(_ next: inout ContinuousClock.Instant) {
    let now = ContinuousClock.now
    guard now < next else {
        next = now
        return
    }
    usleep(UInt32(milliseconds(next - now) * 1000))
}

/// Today's round over `count` streams; nil when their files do not fit in the descriptor limit.
func filesAndSyncfs(_ count: Int, in path: String) -> Measured? {
    makeFolder(path)
    var streams: [(data: Int32, journal: Int32, position: Int32)] = []
    defer { for stream in streams { close(stream.data); close(stream.journal); close(stream.position) } }
    for index in 0..<count {
        let base = path + "/s\(index).caf"
        guard let data = openFile(base), let journal = openFile(base + ".pakt-journal"), let position = openFile(base + ".position") else { return nil }
        streams.append((data, journal, position))
    }
    let folderDescriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(folderDescriptor) }
    _ = syncfs(folderDescriptor)
    var measured = Measured(descriptors: 3 * count)
    var cpuStart = cpuTime(), bytesStart = storageBytesWritten()
    var next = ContinuousClock.now
    for round in 0..<(warmUp + rounds) {
        if round == warmUp { (cpuStart, bytesStart) = (cpuTime(), storageBytesWritten()) }
        let started = ContinuousClock.now
        for stream in streams {
            _ = audio.withUnsafeBytes { pwrite(stream.data, $0.baseAddress, $0.count, off_t(round * audioBytes)) }
            _ = journalRecord.withUnsafeBytes { pwrite(stream.journal, $0.baseAddress, $0.count, off_t(round * 40)) }
        }
        _ = syncfs(folderDescriptor)
        for stream in streams {
            _ = positionRecord.withUnsafeBytes { pwrite(stream.position, $0.baseAddress, $0.count, off_t(round * 32)) }
        }
        _ = syncfs(folderDescriptor)
        if round >= warmUp { measured.roundMilliseconds.append(milliseconds(ContinuousClock.now - started)) }
        next += pace
        waitUntil(&next)
    }
    measured.cpu = cpuTime() - cpuStart
    measured.storageBytes = storageBytesWritten() - bytesStart
    return measured
}

/// The commit log's round over `count` streams.
func commitLogRounds(_ count: Int, in path: String) -> Measured? {
    makeFolder(path)
    makeFolder(path + "/log")
    var data: [Int32] = []
    defer { for descriptor in data { close(descriptor) } }
    for index in 0..<count {
        guard let descriptor = openFile(path + "/s\(index).caf") else { return nil }
        data.append(descriptor)
    }
    let log: CommitLog
    do { log = try CommitLogReader(directory: path + "/log").startWriting() } catch { fail("\(error)") }
    defer { log.close() }
    let folderDescriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(folderDescriptor) }
    _ = syncfs(folderDescriptor)
    var measured = Measured(descriptors: count + 2)
    let checkpointer = Checkpointer(folderDescriptor: folderDescriptor)
    var cpuStart = cpuTime(), bytesStart = storageBytesWritten()
    var next = ContinuousClock.now
    var body = [UInt8](repeating: 0, count: 4 + 24 + audioBytes)
    body.replaceSubrange(28..<(28 + audioBytes), with: audio)
    for round in 0..<(warmUp + rounds) {
        if round == warmUp { (cpuStart, bytesStart) = (cpuTime(), storageBytesWritten()) }
        let started = ContinuousClock.now
        do {
            if let done = checkpointer.takeCompleted() { try log.checkpoint(through: done) }
            for (index, descriptor) in data.enumerated() {
                _ = audio.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(round * audioBytes)) }
                try log.append(CommitLogRecord(kind: 1, subject: UInt64(index), body: body))
            }
            let end = try log.commit()
            if round % checkpointEvery == checkpointEvery - 1 { checkpointer.request(end) }
        } catch {
            fail("\(error)")
        }
        if round >= warmUp { measured.roundMilliseconds.append(milliseconds(ContinuousClock.now - started)) }
        next += pace
        waitUntil(&next)
    }
    checkpointer.stop()
    measured.cpu = cpuTime() - cpuStart
    measured.storageBytes = storageBytesWritten() - bytesStart
    measured.checkpointMilliseconds = checkpointer.durations
    return measured
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
}

print("| streams | way | round ms p50 | round ms p99 | round ms max | checkpoint ms (off the round) | CPU ms per round | storage bytes per audio byte | descriptors | p99 ratio (log / files) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for count in counts {
    let audioTotal = Double(count * rounds * audioBytes)
    var reference: Double?
    for (name, run) in [("files + syncfs", filesAndSyncfs), ("commit log", commitLogRounds)] {
        let path = folder + "/\(count)"
        guard let measured = run(count, path) else {
            print("| \(count) | \(name) | — | — | — | — | — | — | \(name == "commit log" ? count + 2 : 3 * count) | does not fit in \(limit.rlim_max) descriptors |")
            continue
        }
        let p99 = percentile(measured.roundMilliseconds, 0.99)
        let ratio = reference.map { String(format: "%.2f", p99 / $0) } ?? "1.00"
        if name == "files + syncfs" { reference = p99 }
        let checkpoints = measured.checkpointMilliseconds.isEmpty
            ? "—" : String(format: "%.0f to %.0f", measured.checkpointMilliseconds.min() ?? 0, measured.checkpointMilliseconds.max() ?? 0)
        print(String(format: "| %d | %@ | %.1f | %.1f | %.1f | %@ | %.1f | %.2f | %d | %@ |",
            count, name, percentile(measured.roundMilliseconds, 0.5), p99, measured.roundMilliseconds.max() ?? 0, checkpoints,
            milliseconds(measured.cpu) / Double(rounds), Double(measured.storageBytes) / audioTotal, measured.descriptors,
            reference == nil && name == "commit log" ? "no reference" : ratio))
        try? FileManager.default.removeItem(atPath: path)
    }
}
