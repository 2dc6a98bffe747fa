import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Receivers on real shared storage: two receivers behind Debian's HAProxy record into one folder of
/// a GlusterFS volume, each through a mount of its own (as on two machines). A receiver killed
/// mid-stream hands the stream to the other through the balancer: the other takes the stream's claim
/// (an OFD lock on its index entry, seen through the other mount), replays the dead receiver's commit
/// log (flock'ed while its receiver ran, free once it died) and continues the same file, which ends
/// up holding the sender's tone sample for sample.
///
/// Needs root, /dev/fuse, GlusterFS and HAProxy (scripts/install-deps.sh installs both); without them
/// the test skips, saying which.
final class GlusterFSTests: XCTestCase {
    private var work: URL?
    private var volume: GlusterVolume?

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") else {
            throw XCTSkip("haproxy is not installed (scripts/install-deps.sh installs it)")
        }
        try GlusterVolume.skipUnlessAvailable()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("glusterfs-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
        self.work = work
        volume = try GlusterVolume(folder: work.appendingPathComponent("volume"))
    }

    override func tearDownWithError() throws {
        // The receivers, the sender and HAProxy were the test's locals: they are gone by now, so
        // nothing holds a file on the volume any more.
        if let volume {
            self.volume = nil
            try volume.down()
        }
        // Only once nothing is mounted in it: removing the folder must not reach into the volume.
        if let work, !GlusterVolume.hasMounts(under: work) { try? FileManager.default.removeItem(at: work) }
    }

    func testAReceiverKilledMidStreamOnGlusterFSHandsItsStreamToTheOtherMountBitExact() throws {
        let work = try XCTUnwrap(self.work)
        let volume = try XCTUnwrap(self.volume)
        // One folder on the volume, seen through both mounts.
        let outA = volume.mountA.appendingPathComponent("out")
        let outB = volume.mountB.appendingPathComponent("out")
        try Unprivileged.makeDirectory(outA)
        Resilience.waitUntil("the output folder made through mount A shows through mount B", seconds: 10) {
            FileManager.default.fileExists(atPath: outB.path)
        }
        XCTAssertEqual(try GlusterVolume.fileSystemType(of: outB), GlusterVolume.fuseMagic, "the receivers see FUSE and make each file durable by itself")

        let ports = try (0..<2).map { _ in try LoopbackPort.free() }
        // Both stay alive to the end: a ReceiverUnderTest removes its output folder when it goes,
        // and here both share one.
        let receivers = [
            try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: outA, port: ports[0]),
            try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, outputDirectory: outB, port: ports[1]),
        ]
        let balancer = try HAProxyUnderTest(backends: ports, folder: work)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(balancer.port)", "--source", "tone", "--duration", "4", "--stream-name", "gluster-tone",
            "--status-interval", "0.05",
        ] + Resilience.senderOptions(spool: work.appendingPathComponent("spool")))
        defer { if sender.process.isRunning { sender.signal(SIGKILL) } }

        Resilience.waitUntil("one receiver records the stream", seconds: 30) {
            receivers.contains { $0.child.standardError.contains("stream opened") }
        }
        let holderIndex = try XCTUnwrap(receivers.firstIndex { $0.child.standardError.contains("stream opened") }, "no receiver opened the stream")
        let holder = receivers[holderIndex]
        let survivor = receivers[1 - holderIndex]
        XCTAssertFalse(survivor.child.standardError.contains("stream opened"), "one receiver, one stream: \(survivor.child.standardError)")
        Resilience.waitUntil("the holding receiver acknowledged a second of audio", seconds: 30) {
            Resilience.acknowledgedSeconds(sender.standardError) >= 1
        }
        XCTAssertFalse(holder.child.standardError.contains("refused"), "HAProxy's health checks are not refused handshakes: \(holder.child.standardError)")
        holder.child.signal(SIGKILL)
        holder.child.wait()
        let acknowledged = Resilience.acknowledgedSeconds(sender.standardError)

        XCTAssertEqual(Resilience.finish(sender), 0, sender.standardError)
        XCTAssertTrue(sender.standardError.contains("stream delivered"), sender.standardError)
        XCTAssertFalse(sender.standardError.contains("lost seconds"), sender.standardError)
        XCTAssertEqual(survivor.stop(), 0, survivor.child.standardError)
        let survivorLog = survivor.child.standardError
        XCTAssertTrue(survivorLog.contains("stream resumed"), "the other receiver continues the stream through its own mount: \(survivorLog)")
        // Its flock released when its receiver died, the dead receiver's commit log (checkpointed
        // every 30 s by default, so still holding the rounds it acknowledged) is replayed through
        // the other mount.
        XCTAssertTrue(survivorLog.contains("replayed the commit log"), "the takeover replays the dead receiver's log: \(survivorLog)")
        XCTAssertFalse(survivorLog.contains("refused"), survivorLog)

        // The recording, read through the surviving receiver's mount: one file, the whole tone.
        let files = survivor.files()
        XCTAssertEqual(files.count, 1, "one file for the stream, continued across the handover: \(files)")
        let path = try XCTUnwrap(files.first).path
        let file = try CAFFile.read(path: path)
        XCTAssertTrue(file.isFinalized)
        XCTAssertEqual(file.totalFrames, 4 * 48_000)
        let audio = try file.readAudioData()
        let tone = try Resilience.toneBytes(frames: 4 * 48_000)
        XCTAssertTrue(audio == tone, "every sample, none twice (\(audio.count) bytes, \(tone.count) expected; \(acknowledged) s acknowledged before the kill)")
        let probe = try ffprobeStream(path)
        XCTAssertEqual(probe["duration_ts"] as? Int, 4 * 48_000, "ffprobe reads the whole stream: \(probe)")

        balancer.stop()
        withExtendedLifetime(receivers) {}
    }
}

/// A real GlusterFS volume for the shared-storage tests (GlusterFS/gluster-fixture.sh): a replica-2
/// volume on two brick folders of this machine, mounted twice through GlusterFS's FUSE client, at
/// `mountA` and `mountB`, as two receivers' machines would mount one volume. A file written through
/// one mount reads back through the other, and a lock (flock, or an OFD lock) taken through one
/// excludes the same lock through the other. `down()` (or deinit) unmounts both and deletes the
/// volume and its bricks; glusterd, shared by the runs on this machine, stops with the last volume
/// if the fixture started it.
///
/// Needs root (glusterd, and mounts other users reach), /dev/fuse and Debian's glusterfs-server and
/// glusterfs-client (scripts/install-deps.sh installs them); without them the tests that use it skip,
/// saying which.
final class GlusterVolume {
    /// The folder holding the bricks and the two mountpoints.
    let folder: URL
    /// The volume as the first machine mounts it.
    let mountA: URL
    /// The same volume as the second machine mounts it.
    let mountB: URL
    private var isUp = true

    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("GlusterFS/gluster-fixture.sh").path

    /// FUSE's `statfs` magic number (linux/magic.h `FUSE_SUPER_MAGIC`), as `stat -f -c %t` prints it.
    static let fuseMagic = "65735546"

    /// Throws XCTSkip, saying why, when this machine cannot run a GlusterFS volume.
    static func skipUnlessAvailable() throws {
        guard geteuid() == 0 else { throw XCTSkip("a GlusterFS volume is served by glusterd and mounted for other users: needs root") }
        let installed = FileManager.default.isExecutableFile(atPath: "/usr/sbin/glusterd")
            && ["/sbin/mount.glusterfs", "/usr/sbin/mount.glusterfs"].contains { FileManager.default.isExecutableFile(atPath: $0) }
        guard installed else {
            throw XCTSkip("GlusterFS is not installed (glusterfs-server and glusterfs-client: scripts/install-deps.sh installs them)")
        }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { throw XCTSkip("no /dev/fuse here: GlusterFS's client mounts through FUSE") }
    }

    /// Makes the volume on bricks in `folder` (made if missing) and returns once a file written
    /// through either mount reads back through the other.
    init(folder: URL) throws {
        try Self.skipUnlessAvailable()
        self.folder = folder
        let result = try ToolRunner.run("/bin/bash", [Self.script, "up", folder.path])
        let mountpoints = result.outputText.split(separator: "\n").map { URL(fileURLWithPath: String($0)) }
        guard result.succeeded, mountpoints.count == 2 else {
            // The script takes down what it made when it fails; this catches what it could not.
            _ = try? ToolRunner.run("/bin/bash", [Self.script, "down", folder.path])
            throw TestFailure("the GlusterFS volume in \(folder.path) did not come up (exit \(result.exitStatus)): \(result.errorText)")
        }
        mountA = mountpoints[0]
        mountB = mountpoints[1]
    }

    deinit {
        if isUp { try? down() }
    }

    /// Unmounts both mounts (lazily when something still holds a file there), stops and deletes the
    /// volume and removes its bricks. Once: later calls do nothing.
    func down() throws {
        guard isUp else { return }
        isUp = false
        let result = try ToolRunner.run("/bin/bash", [Self.script, "down", folder.path])
        guard result.succeeded else {
            throw TestFailure("the GlusterFS volume in \(folder.path) did not come down (exit \(result.exitStatus)): \(result.errorText)")
        }
    }

    /// Whether the kernel lists a mount at `folder` or below it (a volume that did not come down).
    static func hasMounts(under folder: URL) -> Bool {
        let table = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && (fields[4] == folder.path || fields[4].hasPrefix(folder.path + "/"))
        }
    }

    /// The `statfs` type of the file system holding `url`, in hexadecimal (`stat -f -c %t`): what
    /// the receiver looks at to choose how it makes files durable.
    static func fileSystemType(of url: URL) throws -> String {
        let result = try ToolRunner.run("stat", ["-f", "-c", "%t", url.path])
        guard result.succeeded else { throw TestFailure("stat -f \(url.path) failed: \(result.errorText)") }
        return result.outputText.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
