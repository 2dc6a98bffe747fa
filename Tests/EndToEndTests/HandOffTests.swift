import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `--on-finalize` (issue 17, item 5) with the real executables: every finished file is handed to
/// the command with its path and facts; at least once, across a receiver killed while the hook ran;
/// a failing hook is retried and its exit status and output logged.
final class HandOffTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
        try Unprivileged.makeDirectory(work.appendingPathComponent("archive"))
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    private var archive: URL { work.appendingPathComponent("archive") }

    private func lines(_ url: URL) -> [String] {
        ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func testEachFinishedSegmentIsCopiedWithItsFactsInTheEnvironment() throws {
        // The hook copies the file and notes its environment.
        let hook = "cp \"$1\" \(archive.path)/ && env | grep ^CAPTURE_ | sort > \(archive.path)/\"$(basename \"$1\")\".env"
        let receiver = try ReceiverUnderTest(extraArguments: ["--segment", "2s", "--on-finalize", hook, "--log-level", "info"])
        let (status, stderr) = try runSender([receiver.address, "--source", "tone", "--duration", "5", "--no-pace", "--stream-name", "handed"])
        XCTAssertEqual(status, 0, stderr)
        let files = receiver.files()
        XCTAssertGreaterThanOrEqual(files.count, 3, "5 s in 2 s segments")
        XCTAssertTrue(waitFor(20) { files.allSatisfy { FileManager.default.fileExists(atPath: self.archive.appendingPathComponent($0.lastPathComponent + ".env").path) } },
                      receiver.child.standardError)
        for file in files {
            let copy = archive.appendingPathComponent(file.lastPathComponent)
            XCTAssertEqual(try Data(contentsOf: copy), try Data(contentsOf: file), "a byte-identical copy of \(file.lastPathComponent)")
            let environment = lines(archive.appendingPathComponent(file.lastPathComponent + ".env"))
            let caf = try CAFFile.read(path: file.path)
            XCTAssertTrue(environment.contains("CAPTURE_FILE=\(file.path)"), "\(environment)")
            XCTAssertTrue(environment.contains("CAPTURE_RELATIVE_PATH=\(file.lastPathComponent)"), "\(environment)")
            XCTAssertTrue(environment.contains("CAPTURE_STREAM_NAME=handed"), "\(environment)")
            XCTAssertTrue(environment.contains("CAPTURE_COMPLETE=1"), "\(environment)")
            XCTAssertTrue(environment.contains("CAPTURE_FRAMES=\(try XCTUnwrap(caf.totalFrames))"), "\(environment)")
            let first = try XCTUnwrap(caf.info.first(where: { $0.key == "first sample time" })?.value)
            XCTAssertTrue(environment.contains("CAPTURE_FIRST_SAMPLE_TIME=\(first)"), "\(environment)")
            XCTAssertTrue(environment.contains { $0.hasPrefix("CAPTURE_STREAM_ID=") && $0.count == "CAPTURE_STREAM_ID=".count + 36 }, "\(environment)")
        }
        XCTAssertTrue(waitFor(10) { (try? FileManager.default.contentsOfDirectory(atPath: receiver.directory.appendingPathComponent(".handoff").path))?.isEmpty ?? true },
                      "the journal empties once every hand-off succeeded")
        XCTAssertEqual(receiver.stop(), 0)
    }

    /// The receiver is SIGKILLed by the hook itself on its first run, before the copy: after the
    /// restart the journal runs the hand-off again, and it completes exactly once.
    func testAHandOffInterruptedByAReceiverCrashRunsAgainAfterTheRestartExactlyOnce() throws {
        let output = work.appendingPathComponent("out")
        let marker = work.appendingPathComponent("killed-once")
        let done = archive.appendingPathComponent("done.log")
        let hook = """
            if [ ! -e \(marker.path) ]; then touch \(marker.path); kill -9 $PPID; sleep 5; exit 1; fi; \
            cp "$1" \(archive.path)/ && echo "$CAPTURE_RELATIVE_PATH" >> \(done.path)
            """
        let options = ["--on-finalize", hook, "--log-level", "info"] + Resilience.receiverOptions
        let first = try ReceiverUnderTest(extraArguments: options, outputDirectory: output)
        let sender = try ChildProcess(Products.send, [
            first.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "crashy",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))
        Resilience.waitUntil("the hook killed the receiver") { !first.child.process.isRunning }
        XCTAssertTrue(FileManager.default.fileExists(atPath: marker.path))
        XCTAssertEqual(lines(done), [], "the first run never completed")
        let second = try ReceiverUnderTest(extraArguments: options, outputDirectory: output, port: first.port)
        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        Resilience.waitUntil("the hand-off ran after the restart") { !self.lines(done).isEmpty }
        Thread.sleep(forTimeInterval: 1)
        let files = second.files()
        XCTAssertEqual(files.count, 1, "\(files)")
        let file = try XCTUnwrap(files.first)
        XCTAssertEqual(lines(done), [file.lastPathComponent], "exactly once")
        XCTAssertEqual(try Data(contentsOf: archive.appendingPathComponent(file.lastPathComponent)), try Data(contentsOf: file))
        XCTAssertTrue(second.child.standardError.contains("hand-offs not completed before the last stop run again")
                      || second.child.standardError.contains("hand-off of a finished file done"), second.child.standardError)
        XCTAssertEqual(try CAFFile.read(path: file.path).totalFrames, 48_000, "the recording itself is whole")
        XCTAssertEqual(second.stop(), 0)
        _ = first
    }

    func testAFailingHookIsRetriedWithItsExitStatusAndOutputLogged() throws {
        let counter = work.appendingPathComponent("attempts")
        let hook = """
            n=$(cat \(counter.path) 2>/dev/null || echo 0); n=$((n+1)); echo $n > \(counter.path); \
            if [ $n -le 2 ]; then echo "remote unreachable (try $n)" >&2; exit 3; fi; cp "$1" \(archive.path)/
            """
        let receiver = try ReceiverUnderTest(extraArguments: ["--on-finalize", hook, "--log-level", "info"])
        let (status, stderr) = try runSender([receiver.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "retry"])
        XCTAssertEqual(status, 0, stderr)
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertTrue(waitFor(20) { receiver.child.standardError.contains("hand-off of a finished file done") }, receiver.child.standardError)
        XCTAssertTrue(FileManager.default.fileExists(atPath: archive.appendingPathComponent(file.lastPathComponent).path))
        XCTAssertEqual(lines(counter), ["3"], "two failures, then success")
        let log = receiver.child.standardError
        XCTAssertTrue(log.contains("hand-off of a finished file failed"), log)
        XCTAssertTrue(log.contains("exit 3"), log)
        XCTAssertTrue(log.contains("remote unreachable (try 1)") && log.contains("remote unreachable (try 2)"), log)
        XCTAssertTrue(log.contains("hand-off will be retried"), log)
        XCTAssertTrue(log.contains("hand-off of a finished file done"), log)
        XCTAssertEqual(receiver.stop(), 0)
    }
}

/// `capture-recv export` and `--export-on-finalize` with the real executable (issue 17, item 4).
final class ExportCommandTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("export-cli-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// Segments and exports compose: each finished segment gets its FLAC beside it before the hook
    /// runs, and the hook is told where (CAPTURE_EXPORT); each FLAC holds its segment's samples.
    func testExportOnFinalizeWritesAFLACBesideEachSegmentBeforeTheHookRuns() throws {
        let log = work.appendingPathComponent("exports.log")
        let receiver = try ReceiverUnderTest(extraArguments: [
            "--segment", "2s", "--export-on-finalize", "flac", "--on-finalize", "echo \"$CAPTURE_EXPORT\" >> \(log.path)",
        ])
        let (status, stderr) = try runSender([receiver.address, "--source", "tone", "--duration", "5", "--no-pace", "--stream-name", "flacs"])
        XCTAssertEqual(status, 0, stderr)
        let files = receiver.files()
        XCTAssertGreaterThanOrEqual(files.count, 3)
        XCTAssertTrue(waitFor(20) { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").count == files.count }, receiver.child.standardError)
        let exported = Set(((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init))
        for file in files {
            let flac = file.deletingPathExtension().appendingPathExtension("flac").path
            XCTAssertTrue(exported.contains(flac), "\(flac) in \(exported)")
            let fromCAF = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", file.path, "-f", "s16le", "-"])
            let fromFLAC = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", flac, "-f", "s16le", "-"])
            XCTAssertTrue(fromFLAC.succeeded, fromFLAC.errorText)
            XCTAssertEqual(fromFLAC.standardOutput, fromCAF.standardOutput, "\(flac) holds its segment's samples")
        }
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testTheExportCommandSaysWhatIsWrongInOneLine() throws {
        let notAudio = work.appendingPathComponent("notes.caf")
        try Data("hello".utf8).write(to: notAudio)
        let missing = try ToolRunner.run(Products.recv, ["export", work.appendingPathComponent("missing.caf").path, notAudio.path, "--to", "wav"])
        XCTAssertEqual(missing.exitStatus, 1)
        let lines = missing.errorText.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, "one line per file that failed: \(missing.errorText)")
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("capture-recv: cannot read") }, missing.errorText)
        let badFormat = try ToolRunner.run(Products.recv, ["export", notAudio.path, "--to", "mp3"])
        XCTAssertNotEqual(badFormat.exitStatus, 0)
        XCTAssertTrue(badFormat.errorText.contains("wav") && badFormat.errorText.contains("flac"), badFormat.errorText)
        let help = try ToolRunner.run(Products.recv, ["export", "--help"])
        let text = help.outputText.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(text.contains("--to") && text.contains("--force") && text.contains("(default: beside each recording)"), help.outputText)
    }
}
