@testable import CaptureReceiver
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The hand-off journal's lock (one run per file at a time, across processes) and the command's
/// process (its own process group, pipes for its output, the lock and nothing else of the receiver's).
final class HandOffRunTests: XCTestCase {
    private var folder: String!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-run-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: folder)
    }

    private let recording = FinishedRecording(
        relativePath: "a/b_100000.caf", streamName: "b", streamID: "x", sourceHost: "h", firstSampleTime: "2026-11-24T10:00:00.000Z", frames: 480_000, complete: true)

    private func files() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder + "/.handoff")) ?? []).sorted()
    }

    private func locked(_ result: HandOffJournal.LockResult, file: StaticString = #filePath, line: UInt = #line) -> HandOffLock? {
        guard case .locked(let lock, _) = result else {
            XCTFail("not locked: \(result)", file: file, line: line)
            return nil
        }
        return lock
    }

    func testTheJournalKeepsEntriesUntilRemovedAndAFreshReaderFindsThem() throws {
        let journal = HandOffJournal(outputDirectory: folder)
        let first = FinishedRecording(relativePath: "a/b_100000.caf", streamName: "b", streamID: "x", sourceHost: "h", firstSampleTime: "2026-11-24T10:00:00.000Z", frames: 480_000, complete: true)
        let second = FinishedRecording(relativePath: "a/b_100010.caf", streamName: "b", streamID: "x", sourceHost: "h", firstSampleTime: "2026-11-24T10:00:10.000Z", frames: 480_000, complete: false)
        try journal.record(first)
        try journal.record(second)
        try journal.record(first)  // the same file again: one entry
        XCTAssertEqual(Set(HandOffJournal(outputDirectory: folder).entries().entries.map(\.relativePath)), ["a/b_100000.caf", "a/b_100010.caf"])
        try XCTUnwrap(locked(journal.lock(first.relativePath))).complete()
        XCTAssertEqual(HandOffJournal(outputDirectory: folder).entries().entries, [second])
        try Data("not json".utf8).write(to: URL(fileURLWithPath: journal.folder).appendingPathComponent("broken.json"))
        XCTAssertEqual(HandOffJournal(outputDirectory: folder).entries().damaged.count, 1)
    }

    func testAnEntryIsHeldByOneRunAtATimeAndCompletingItRemovesIt() throws {
        let journal = HandOffJournal(outputDirectory: folder)
        try journal.record(recording)
        guard case .locked(let lock, let entry) = journal.lock(recording.relativePath) else { return XCTFail("not locked") }
        XCTAssertEqual(entry, recording)
        guard case .busy = journal.lock(recording.relativePath) else { return XCTFail("a second run got the entry") }
        lock.release()
        let again = try XCTUnwrap(locked(journal.lock(recording.relativePath)))
        XCTAssertEqual(files().count, 2, "the entry and its lock file: \(files())")
        again.complete()
        XCTAssertEqual(files(), [], "both gone")
        guard case .gone = journal.lock(recording.relativePath) else { return XCTFail("a completed hand-off is gone") }
        XCTAssertEqual(files(), [], "looking leaves no lock file behind")
    }

    func testAnEntryRecordedAgainWhileItsHandOffRanStaysForAnotherRun() throws {
        let journal = HandOffJournal(outputDirectory: folder)
        try journal.record(recording)
        let lock = try XCTUnwrap(locked(journal.lock(recording.relativePath)))
        var longer = recording
        longer.frames = 960_000
        try journal.record(longer)
        lock.complete()
        XCTAssertEqual(journal.entries().entries, [longer])
        guard case .locked(_, let entry) = journal.lock(recording.relativePath) else { return XCTFail("not locked") }
        XCTAssertEqual(entry, longer, "the run reads the entry as it is now")
    }

    /// The command inherits the lock: it stays taken after the receiver's own descriptor is closed
    /// (as when the receiver is killed) until the command ends.
    func testTheLockLastsAsLongAsTheCommandRuns() throws {
        let journal = HandOffJournal(outputDirectory: folder)
        try journal.record(recording)
        let lock = try XCTUnwrap(locked(journal.lock(recording.relativePath)))
        let release = folder + "/release"
        let started = folder + "/started"
        let command = HandOffCommand()
        let ended = expectation(description: "the command ended")
        let descriptor = lock.descriptor
        let directory: String = folder
        Thread.detachNewThread {
            let (ending, _) = command.run(
                command: "touch \(started); while [ ! -e \(release) ]; do sleep 0.05; done", name: "capture-recv-hook", arguments: ["x"], environment: [:], directory: directory, lockDescriptor: descriptor)
            XCTAssertEqual(ending, .exited(0))
            ended.fulfill()
        }
        try waitForFile(started)
        lock.release()
        guard case .busy = journal.lock(recording.relativePath) else { return XCTFail("the command's copy of the lock was not held") }
        _ = FileManager.default.createFile(atPath: release, contents: nil)
        wait(for: [ended], timeout: 30)
        XCTAssertNotNil(locked(journal.lock(recording.relativePath)), "free once the command ended")
    }

    private func run(_ text: String, lock: Int32? = nil, command: HandOffCommand = HandOffCommand()) -> (HandOffCommand.Ending, String) {
        Self.run(text, in: folder, lock: lock, command: command)
    }

    private static func run(_ text: String, in folder: String, lock: Int32? = nil, command: HandOffCommand = HandOffCommand()) -> (HandOffCommand.Ending, String) {
        command.run(command: text, name: "capture-recv-hook", arguments: ["/the/file.caf"], environment: ["PATH": "/usr/bin:/bin", "CAPTURE_X": "1"], directory: folder, lockDescriptor: lock)
    }

    func testTheCommandRunsInItsOwnGroupWithPipesTheLockAndDefaultSignals() throws {
        let journal = HandOffJournal(outputDirectory: folder)
        try journal.record(recording)
        let lock = try XCTUnwrap(locked(journal.lock(recording.relativePath)))
        // The receiver ignores SIGPIPE: its command must not.
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        // The shell's own descriptors, found with its builtins only (which open none).
        let (ending, output) = run("""
            i=0; while [ $i -lt 1024 ]; do [ -e /proc/$$/fd/$i ] && echo $i >> \(folder!)/fds; i=$((i+1)); done; \
            echo "args $0 $1 $CAPTURE_X $(pwd)"; readlink /proc/$$/fd/1 /proc/$$/fd/2 | cut -c1-6; \
            echo "group $(cut -d' ' -f5 /proc/$$/stat) $$"; echo to-error >&2
            """, lock: lock.descriptor)
        XCTAssertEqual(ending, .exited(0))
        var lines = output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.removeFirst(), "args capture-recv-hook /the/file.caf 1 \(folder!)")
        let descriptors = try String(contentsOfFile: folder + "/fds", encoding: .utf8).split(separator: "\n").compactMap { Int($0) }.sorted()
        XCTAssertEqual(descriptors, [0, 1, 2, 10], "standard input, output, error and the lock: no descriptor of the receiver's")
        XCTAssertEqual(lines.removeFirst(), "pipe:[")
        XCTAssertEqual(lines.removeFirst(), "pipe:[")
        let group = lines.removeFirst().split(separator: " ")
        XCTAssertEqual(group.count, 3)
        XCTAssertEqual(group[1], group[2], "its own process group")
        XCTAssertEqual(lines, ["to-error"])
        // What the command was started with (`exec`: the shell changes nothing before): no signal
        // ignored or blocked among the standard ones, 1-31 (glibc's posix_spawn leaves its own
        // internal ones, 32 and 33, ignored in the new program).
        let (status, signals) = run("exec grep -E '^Sig(Ign|Blk)' /proc/self/status")
        XCTAssertEqual(status, .exited(0))
        let masks = signals.split(separator: "\n").map { line in line.split(separator: "\t").last.flatMap { UInt64($0, radix: 16) }.map { $0 & 0x7FFF_FFFF } }
        XCTAssertEqual(masks, [0, 0], signals)
        let (failing, text) = run("echo first; echo second >&2; exit 7")
        XCTAssertEqual(failing, .exited(7))
        XCTAssertEqual(text, "first\nsecond\n")
    }

    func testOnlyTheEndOfALongOutputIsKept() {
        let (ending, output) = run("i=0; while [ $i -lt 2000 ]; do echo \"line $i\"; i=$((i+1)); done")
        XCTAssertEqual(ending, .exited(0))
        XCTAssertEqual(output.utf8.count, HandOffCommand.outputTail)
        XCTAssertTrue(output.hasSuffix("line 1999\n"), String(output.suffix(40)))
    }

    /// SIGTERM reaches every process of the command's group; one that ignores it gets SIGKILL; a
    /// command stopped before it starts never starts; a process it left in its group is gone too.
    func testTerminateAndKillReachTheWholeGroup() throws {
        let pidFile = folder + "/background"
        let started = folder + "/started"
        let command = HandOffCommand()
        let result = expectation(description: "ended")
        let directory: String = folder
        Thread.detachNewThread {
            let (ending, _) = Self.run("sleep 1000 & echo $! > \(pidFile); touch \(started); wait", in: directory, command: command)
            XCTAssertEqual(ending, .signalled(SIGTERM))
            result.fulfill()
        }
        try waitForFile(started)
        command.terminate()
        wait(for: [result], timeout: 30)
        let background = try XCTUnwrap(pid_t((try String(contentsOfFile: pidFile, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)))
        // The signal reached it with the shell, but under load it may not have run (and died) yet
        // when the shell's end is seen: it must end on its own within seconds, not be killed later.
        let deadline = Date().addingTimeInterval(10)
        while Self.isAlive(background), Date() < deadline { usleep(5_000) }
        XCTAssertFalse(Self.isAlive(background), "the background process of its group ended too")

        try FileManager.default.removeItem(atPath: started)
        let stubborn = HandOffCommand()
        let killed = expectation(description: "killed")
        Thread.detachNewThread {
            let (ending, _) = Self.run("trap '' TERM; touch \(started); while true; do sleep 0.05; done", in: directory, command: stubborn)
            XCTAssertEqual(ending, .signalled(SIGKILL))
            killed.fulfill()
        }
        try waitForFile(started)
        stubborn.terminate()
        stubborn.kill()
        wait(for: [killed], timeout: 30)

        let early = HandOffCommand()
        early.terminate()
        XCTAssertEqual(run("touch \(folder!)/never", command: early).0, .notStarted)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder + "/never"))
    }

    /// Waits until the command made `path` (at most 30 s).
    private func waitForFile(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: path) {
            guard Date() < deadline else {
                XCTFail("the command did not make \(path) within 30 s", file: file, line: line)
                throw CancellationError()
            }
            usleep(10_000)
        }
    }

    private static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.range(of: ") ", options: .backwards) else { return false }
        return !stat[close.upperBound...].hasPrefix("Z")
    }
}
