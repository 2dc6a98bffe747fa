import CAF
import Foundation
import TestSupport
import XCTest

/// capture-load against a real capture-recv: paced Opus-shaped and PCM streams with random link
/// drops all complete, and `--verify` / `verify` check every file packet by packet, failing with the
/// stream's name and the difference when a file was altered afterwards.
final class LoadGeneratorTests: XCTestCase {
    private func runLoad(_ arguments: [String], timeout: Double = 120) throws -> (status: Int32, stdout: String, stderr: String) {
        // capture-load only connects and reads; it runs as the test user (it reads the receiver's files).
        let child = try ChildProcess(Products.load, arguments, unprivileged: false)
        let status = child.wait(seconds: timeout)
        return (status, child.standardOutput, child.standardError)
    }

    private func report(_ output: String) throws -> [String: Any] {
        let line = try XCTUnwrap(output.split(separator: "\n").last, "no report in: \(output)")
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
    }

    func testOpusAndPCMStreamsWithRandomLinkDropsAllCompleteAndVerify() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--sync-ms", "100"])
        let directory = receiver.directory.path

        let opus = try runLoad([
            receiver.address, "--streams", "20", "--codec", "opus", "--duration", "3", "--ramp-seconds", "1",
            "--disconnect-probability", "0.15", "--reconnect-delay", "0.1", "--name-prefix", "opus",
            "--verify", directory, "--json",
        ])
        XCTAssertEqual(opus.status, 0, opus.stderr)
        let opusReport = try report(opus.stdout)
        XCTAssertEqual(opusReport["streams"] as? Int, 20)
        XCTAssertEqual(opusReport["completed"] as? Int, 20, opus.stderr)
        XCTAssertEqual(opusReport["failed"] as? Int, 0)
        XCTAssertEqual(opusReport["verified"] as? Int, 20, opus.stderr)
        XCTAssertGreaterThan(opusReport["injectedDisconnects"] as? Int ?? 0, 0, "the run dropped links on purpose")
        XCTAssertGreaterThanOrEqual(opusReport["reconnects"] as? Int ?? 0, opusReport["injectedDisconnects"] as? Int ?? 0)
        XCTAssertNotNil(opusReport["ackLatencyP99Ms"] as? Double)
        XCTAssertGreaterThan(opusReport["generatorCPUSeconds"] as? Double ?? -1, 0)

        let pcm = try runLoad([
            receiver.address, "--streams", "5", "--codec", "pcm", "--duration", "3", "--ramp-seconds", "0.5",
            "--disconnect-probability", "0.2", "--reconnect-delay", "0.1", "--name-prefix", "pcm",
            "--verify", directory, "--json",
        ])
        XCTAssertEqual(pcm.status, 0, pcm.stderr)
        let pcmReport = try report(pcm.stdout)
        XCTAssertEqual(pcmReport["completed"] as? Int, 5, pcm.stderr)
        XCTAssertEqual(pcmReport["verified"] as? Int, 5, pcm.stderr)

        // Every file is finished and has the stream's exact length, by our reader.
        let files = receiver.files()
        XCTAssertEqual(files.count, 25, "one file per stream: \(files.map(\.lastPathComponent))")
        let opusFile = try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("opus-000007_") })
        let caf = try CAFFile.read(path: opusFile.path)
        XCTAssertTrue(caf.isFinalized)
        // 3 s = 144,000 frames; with 312 priming frames that is 151 packets of 960 frames.
        XCTAssertEqual(caf.packetTable?.numberPackets, 151)
        XCTAssertEqual(caf.packetTable?.validFrames, 144_000)
        let pcmFile = try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("pcm-000003_") })
        XCTAssertEqual(try CAFFile.read(path: pcmFile.path).totalFrames, 144_000)

        // ffprobe, an independent reader: packet count and duration (ffmpeg counts whole packets).
        let stream = try ffprobeStream(opusFile.path)
        XCTAssertEqual(stream["codec_name"] as? String, "opus")
        XCTAssertEqual(stream["nb_read_packets"] as? String, "151")
        XCTAssertEqual(Double(stream["duration"] as? String ?? ""), 3.02, "151 packets of 20 ms")
        receiver.stop()

        // The verify subcommand, run again on the untouched folder, agrees.
        let clean = try runLoad(["verify", directory, "--streams", "5", "--codec", "pcm", "--duration", "3", "--name-prefix", "pcm"])
        XCTAssertEqual(clean.status, 0, clean.stderr)
        XCTAssertTrue(clean.stdout.contains("5 of 5 files verified"), clean.stdout)
    }

    func testVerifyNamesTheStreamAndTheDifferenceOfAnAlteredOrTruncatedFile() throws {
        let receiver = try ReceiverUnderTest()
        let directory = receiver.directory.path
        let shape = ["--streams", "3", "--codec", "opus", "--duration", "2", "--name-prefix", "alter"]
        let run = try runLoad([receiver.address, "--ramp-seconds", "0.2"] + shape)
        XCTAssertEqual(run.status, 0, run.stderr)
        receiver.stop()
        let files = receiver.files()
        XCTAssertEqual(files.count, 3)

        // One byte of packet 10 of stream 1 changed.
        let altered = try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("alter-000001_") })
        let caf = try CAFFile.read(path: altered.path)
        let sizes = try XCTUnwrap(caf.packetTable?.packetSizes)
        let packetStart = caf.dataOffset + Int64(sizes[0..<10].reduce(0) { $0 + Int($1) })
        let handle = try FileHandle(forUpdating: altered)
        try handle.seek(toOffset: UInt64(packetStart + 3))
        let original = try XCTUnwrap(handle.readData(ofLength: 1).first)
        try handle.seek(toOffset: UInt64(packetStart + 3))
        handle.write(Data([original ^ 0x55]))
        try handle.close()

        let changed = try runLoad(["verify", directory] + shape)
        XCTAssertEqual(changed.status, 1, changed.stderr)
        XCTAssertTrue(changed.stderr.contains("stream alter-000001: \(altered.lastPathComponent): bytes differ from what was sent: packet 10, byte 3"), changed.stderr)
        XCTAssertTrue(changed.stderr.contains("verification failed: 1 of 3 files are missing or differ"), changed.stderr)
        XCTAssertTrue(changed.stdout.contains("2 of 3 files verified"), changed.stdout)

        // Stream 2's file cut short: its packet table runs past the end.
        let truncated = try XCTUnwrap(files.first { $0.lastPathComponent.hasPrefix("alter-000002_") })
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: truncated.path)[.size] as? Int)
        XCTAssertEqual(truncate(truncated.path, off_t(size - 100)), 0)
        let cut = try runLoad(["verify", directory] + shape)
        XCTAssertEqual(cut.status, 1)
        XCTAssertTrue(cut.stderr.contains("stream alter-000002: \(truncated.lastPathComponent) cannot be read:"), cut.stderr)
        XCTAssertTrue(cut.stderr.contains("verification failed: 2 of 3 files are missing or differ"), cut.stderr)

        // A missing file.
        try FileManager.default.removeItem(at: files[0])
        let missing = try runLoad(["verify", directory] + shape)
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("stream alter-000000: no file in \(directory)"), missing.stderr)
    }
}
