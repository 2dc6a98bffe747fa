import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `--on-finalize` never runs twice at once for one file (issue 27, item 7), with the real
/// executables: not across two receivers on one `--out`, not beside a hook a killed receiver left
/// running, not beside one a stopped receiver left; a hung hook is stopped at its time limit and
/// does not hold back other files; its output never lands in a file others can read.
final class HandOffConcurrencyTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-once-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        // Release every hook a test left waiting (and end any still running), then remove the folder.
        _ = FileManager.default.createFile(atPath: release.path, contents: nil)
        for line in lines(hookLog) {
            guard let pid = line.split(separator: " ").last.flatMap({ pid_t($0) }), pid > 1 else { continue }
            if isAlive(pid) { _ = kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: work)
    }

    private var hookLog: URL { work.appendingPathComponent("hook.log") }
    private var release: URL { work.appendingPathComponent("release") }

    private func lines(_ url: URL) -> [String] {
        ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// A hook that notes its start (with its process id, which is its process group's), waits until
    /// the test creates `release`, and notes its end.
    private var waitingHook: String {
        """
        echo "start $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path); \
        while [ ! -e \(release.path) ]; do sleep 0.1; done; \
        echo "end $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path)
        """
    }

    private func journalEntries(_ output: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: output.appendingPathComponent(".handoff").path)) ?? []).filter { $0.hasSuffix(".json") }
    }

    private func starts() -> [String] { lines(hookLog).filter { $0.hasPrefix("start ") } }

    /// The process id in a hook log line (its last word).
    private func processID(_ line: String) throws -> pid_t {
        try XCTUnwrap(line.split(separator: " ").last.flatMap { pid_t($0) }, line)
    }

    /// Processes of process group `group` that are alive (not zombies).
    private func livingMembers(ofGroup group: pid_t) -> [pid_t] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap { pid_t($0) }.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.range(of: ") ", options: .backwards) else { return false }
            let fields = stat[close.upperBound...].split(separator: " ")
            // state, ppid, pgrp
            return fields.count > 2 && fields[0] != "Z" && pid_t(fields[2]) == group
        }
    }

    private func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.range(of: ") ", options: .backwards) else { return false }
        return !stat[close.upperBound...].hasPrefix("Z")
    }

    private func record(_ receiver: ReceiverUnderTest, name: String) throws {
        let (status, stderr) = try runSender([receiver.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", name])
        XCTAssertEqual(status, 0, stderr)
    }

    // MARK: - (a) two receivers on one --out

    /// A receiver that starts on a folder another receiver records into replays that folder's
    /// hand-off journal: it must not start a hook the other one is running, and must not run it
    /// again once the other completed it.
    func testASecondReceiverOnTheSameFolderDoesNotStartTheHookTheFirstIsRunning() throws {
        let output = work.appendingPathComponent("shared")
        let first = try ReceiverUnderTest(extraArguments: ["--on-finalize", waitingHook], outputDirectory: output)
        try record(first, name: "shared")
        Resilience.waitUntil("the first receiver's hook started") { starts().count == 1 }
        let second = try ReceiverUnderTest(extraArguments: ["--on-finalize", waitingHook], outputDirectory: output)
        Resilience.waitUntil("the second receiver looked at the journal") {
            second.child.standardError.contains("hand-off is running elsewhere") || starts().count > 1
        }
        XCTAssertEqual(starts().count, 1, "the hook ran twice at once: \(lines(hookLog))\n\(second.child.standardError)")
        _ = FileManager.default.createFile(atPath: release.path, contents: nil)
        Resilience.waitUntil("the first receiver completed the hand-off") { first.child.standardError.contains("hand-off of a finished file done") }
        Resilience.waitUntil("the second receiver saw it done") { second.child.standardError.contains("hand-off already done") }
        XCTAssertEqual(lines(hookLog).count, 2, "one run, started and ended once: \(lines(hookLog))")
        XCTAssertEqual(journalEntries(output), [])
        XCTAssertFalse(second.child.standardError.contains("hand-off of a finished file done"), second.child.standardError)
        XCTAssertEqual(second.stop(), 0, second.child.standardError)
        XCTAssertEqual(first.stop(), 0, first.child.standardError)
    }

    /// A receiver killed (SIGKILL) while its hook runs leaves the hook running. The restarted
    /// receiver waits for it instead of starting the same hook beside it, then runs it once more
    /// (its journal entry is still there: at least once).
    func testAHookLeftRunningByAKilledReceiverIsNotStartedAgainBesideIt() throws {
        let output = work.appendingPathComponent("out")
        let killed = try ReceiverUnderTest(extraArguments: ["--on-finalize", waitingHook], outputDirectory: output)
        try record(killed, name: "orphan")
        Resilience.waitUntil("the hook started") { starts().count == 1 }
        killed.child.signal(SIGKILL)
        _ = killed.child.wait(seconds: 10)
        let orphan = try processID(try XCTUnwrap(starts().first))
        XCTAssertTrue(isAlive(orphan), "the hook outlives the killed receiver")
        let restarted = try ReceiverUnderTest(extraArguments: ["--on-finalize", waitingHook], outputDirectory: output)
        Resilience.waitUntil("the restarted receiver looked at the journal") {
            restarted.child.standardError.contains("hand-off is running elsewhere") || starts().count > 1
        }
        XCTAssertEqual(starts().count, 1, "the hook ran twice at once: \(lines(hookLog))")
        _ = FileManager.default.createFile(atPath: release.path, contents: nil)
        Resilience.waitUntil("the hand-off ran again after the orphan ended") { restarted.child.standardError.contains("hand-off of a finished file done") }
        let log = lines(hookLog)
        XCTAssertEqual(log.count, 4, "\(log)")
        XCTAssertEqual(log.map { String($0.prefix(5)) }, ["start", "end o", "start", "end o"], "one after the other, never at once: \(log)")
        XCTAssertEqual(journalEntries(output), [])
        XCTAssertEqual(restarted.stop(), 0, restarted.child.standardError)
    }

    // MARK: - (b) SIGTERM stops hooks

    /// SIGTERM stops the running hook's whole process group (here one that ignores SIGTERM, so it
    /// takes SIGKILL after the grace); the receiver exits 0 with nothing of the hook left, and the
    /// restarted receiver runs the hand-off again.
    func testSIGTERMStopsARunningHookAndTheRestartRunsItAgain() throws {
        let output = work.appendingPathComponent("out")
        let marker = work.appendingPathComponent("first-run")
        let hook = """
            if [ ! -e \(marker.path) ]; then touch \(marker.path); trap '' TERM; \
            echo "start $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path); while true; do sleep 0.1; done; fi; \
            echo "again $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path)
            """
        let first = try ReceiverUnderTest(extraArguments: ["--on-finalize", hook], outputDirectory: output)
        try record(first, name: "stopped")
        Resilience.waitUntil("the hook started") { starts().count == 1 }
        let hookProcess = try processID(try XCTUnwrap(starts().first))
        XCTAssertEqual(first.stop(), 0, first.child.standardError)
        XCTAssertFalse(isAlive(hookProcess), "the hook still runs after the receiver stopped")
        XCTAssertEqual(livingMembers(ofGroup: hookProcess), [], "a process of the hook's group still runs")
        XCTAssertTrue(first.child.standardError.contains("did not stop after SIGTERM"), first.child.standardError)
        XCTAssertEqual(journalEntries(output).count, 1, "its journal entry stays for the next start")
        let second = try ReceiverUnderTest(extraArguments: ["--on-finalize", hook], outputDirectory: output)
        Resilience.waitUntil("the hand-off ran again after the restart") { second.child.standardError.contains("hand-off of a finished file done") }
        XCTAssertEqual(lines(hookLog).filter { $0.hasPrefix("again ") }.count, 1, "\(lines(hookLog))")
        XCTAssertEqual(journalEntries(output), [])
        XCTAssertEqual(second.stop(), 0, second.child.standardError)
    }

    // MARK: - (c) time limit, and hung hooks do not hold back others

    /// A hook that runs past `--on-finalize-timeout` is stopped (its process group: SIGTERM, then
    /// SIGKILL), logged as timed out and retried with the backoff.
    func testAHookPastItsTimeLimitIsStoppedLoggedAndRetried() throws {
        let marker = work.appendingPathComponent("first-run")
        let hook = """
            if [ ! -e \(marker.path) ]; then touch \(marker.path); trap '' TERM; \
            echo "start $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path); while true; do sleep 0.1; done; fi; \
            echo "again $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path)
            """
        let receiver = try ReceiverUnderTest(extraArguments: ["--on-finalize", hook, "--on-finalize-timeout", "2s"])
        try record(receiver, name: "slow")
        Resilience.waitUntil("the hook started") { starts().count == 1 }
        let hung = try processID(try XCTUnwrap(starts().first))
        Resilience.waitUntil("the retry succeeded") { receiver.child.standardError.contains("hand-off of a finished file done") }
        let log = receiver.child.standardError
        XCTAssertTrue(log.contains("hand-off timed out"), log)
        XCTAssertTrue(log.contains("--on-finalize-timeout 2 s"), log)
        XCTAssertTrue(log.contains("did not stop after SIGTERM"), log)
        XCTAssertTrue(log.contains("hand-off will be retried"), log)
        XCTAssertFalse(isAlive(hung))
        XCTAssertEqual(livingMembers(ofGroup: hung), [])
        XCTAssertEqual(lines(hookLog).filter { $0.hasPrefix("again ") }.count, 1, "\(lines(hookLog))")
        XCTAssertEqual(journalEntries(receiver.directory), [])
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testTheTimeLimitIsRangeChecked() throws {
        let noDuration = "is no duration: write it like 1h, 15m, 10s or 1h30m (1 second to 24 hours)"
        for (value, problem) in [
            ("0", "is too short: use 1 second to 24 hours"), ("0s", "is too short: use 1 second to 24 hours"),
            ("25h", "is too long: use 1 second to 24 hours"), ("-5", noDuration), ("soon", noDuration), ("99999999999999999999", noDuration),
        ] {
            let run = try ToolRunner.run(Products.recv, ["--out", work.appendingPathComponent("never").path, "--on-finalize", "true", "--on-finalize-timeout=\(value)"])
            XCTAssertEqual(run.exitStatus, 64, "\(value): \(run.errorText)")
            XCTAssertTrue(run.errorText.contains("--on-finalize-timeout \(value) \(problem)"), "\(value): \(run.errorText)")
        }
        let help = try ToolRunner.run(Products.recv, ["--help"])
        let text = help.outputText.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(text.contains("--on-finalize-timeout <DURATION>") && text.contains("(default: 10m)"), help.outputText)
    }

    /// Two hooks that hang (with the default time limit of 10 minutes) do not hold back the
    /// hand-off of a file finished after them.
    func testHungHooksDoNotHoldBackOtherFiles() throws {
        let hook = """
            case "$CAPTURE_STREAM_NAME" in hang*) echo "start $CAPTURE_STREAM_NAME $$" >> \(hookLog.path); exec sleep 100000;; esac; \
            echo "quick $CAPTURE_STREAM_NAME $$" >> \(hookLog.path)
            """
        let receiver = try ReceiverUnderTest(extraArguments: ["--on-finalize", hook])
        try record(receiver, name: "hang-1")
        try record(receiver, name: "hang-2")
        Resilience.waitUntil("both hooks hang") { starts().count == 2 }
        try record(receiver, name: "quick")
        Resilience.waitUntil("the third file's hook ran", seconds: 90) { lines(hookLog).contains { $0.hasPrefix("quick quick ") } }
        XCTAssertEqual(starts().count, 2, "the hung hooks were not started again: \(lines(hookLog))")
        let hung = try starts().map(processID)
        XCTAssertTrue(hung.allSatisfy(isAlive), "they still run: the time limit is 10 minutes")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        XCTAssertTrue(hung.allSatisfy { !isAlive($0) }, "stopped with the receiver")
        XCTAssertEqual(journalEntries(receiver.directory).count, 2, "the hung files' hand-offs run again at the next start")
    }

    // MARK: - (d) the hook's output

    /// The hook's standard output and error are pipes to the receiver, which logs their end when
    /// the hook fails; no file is made for them, in the temporary folder or anywhere, also when
    /// the receiver is killed while the hook runs.
    func testTheHooksOutputGoesThroughPipesAndNoFileIsLeft() throws {
        let temporary = try Unprivileged.makeDirectory(work.appendingPathComponent("tmp"))
        let descriptors = work.appendingPathComponent("descriptors")
        let started = work.appendingPathComponent("started")
        let hook = """
            echo "start $CAPTURE_RELATIVE_PATH $$" >> \(hookLog.path); \
            fds=$(readlink /proc/$$/fd/1 /proc/$$/fd/2); echo "$fds" > \(descriptors.path); echo "private output of the hook"; touch \(started.path); \
            while [ ! -e \(release.path) ]; do sleep 0.1; done; echo "hook failed on purpose" >&2; exit 1
            """
        let receiver = try ReceiverUnderTest(extraArguments: ["--on-finalize", hook], environment: ["TMPDIR": temporary.path])
        try record(receiver, name: "quiet")
        Resilience.waitUntil("the hook runs") { FileManager.default.fileExists(atPath: started.path) }
        let whileRunning = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        XCTAssertEqual(whileRunning, [], "the hook's output went to a file: \(whileRunning.map { name in "\(name) mode \(String(Self.mode(of: temporary.appendingPathComponent(name)), radix: 8))" })")
        let fds = lines(descriptors)
        XCTAssertEqual(fds.count, 2, "\(fds)")
        XCTAssertTrue(fds.allSatisfy { $0.hasPrefix("pipe:[") }, "standard output and error are pipes: \(fds)")
        try FileManager.default.removeItem(at: started)
        _ = FileManager.default.createFile(atPath: release.path, contents: nil)
        Resilience.waitUntil("the failure was logged") { receiver.child.standardError.contains("hook failed on purpose") }
        XCTAssertTrue(receiver.child.standardError.contains("private output of the hook"), receiver.child.standardError)
        // Killed while a retry runs: nothing is left behind.
        try FileManager.default.removeItem(at: release)
        Resilience.waitUntil("a retry runs") { FileManager.default.fileExists(atPath: started.path) }
        receiver.child.signal(SIGKILL)
        _ = receiver.child.wait(seconds: 10)
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [], [])
        let leftInOutput = FileManager.default.enumerator(atPath: receiver.directory.path)?.allObjects.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".log") || $0.contains("hook") } ?? []
        XCTAssertEqual(leftInOutput, [])
    }

    private static func mode(of url: URL) -> mode_t {
        var info = stat()
        return stat(url.path, &info) == 0 ? info.st_mode & 0o777 : 0
    }
}
