import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `capture-recv export` on damaged recordings (issue 27, item 8): real recordings the receiver
/// wrote, patched the way the adversarial trial patched them, exported by the real executable as
/// the unprivileged user. A damaged file is refused with one line naming it and what is wrong, never
/// a crash or a huge allocation; a batch goes on past it, exports the rest, and ends with one line per
/// failed file and exit status 1.
final class DamagedExportTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-export-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// One second of tone recorded by the real receiver (`--codec opus` when `opus`), copied into the
    /// work folder as `name.caf`.
    private func record(_ name: String, opus: Bool = false) throws -> URL {
        let receiver = try ReceiverUnderTest()
        let (status, stderr) = try runSender(
            [receiver.address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", name] + (opus ? ["--codec", "opus"] : []))
        XCTAssertEqual(status, 0, stderr)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
        let recorded = try XCTUnwrap(receiver.files().first, "the receiver wrote a file")
        let copy = work.appendingPathComponent("\(name).caf")
        try FileManager.default.copyItem(at: recorded, to: copy)
        Unprivileged.handOver(copy.path)
        return copy
    }

    /// A copy of `original` named `name.caf` with the big-endian UInt32 at `offset` of its `desc`
    /// body replaced (8: format id, 12: flags, 16: bytes per packet, 20: frames per packet,
    /// 24: channels, 28: bits).
    private func patchedDescription(_ original: URL, _ name: String, field offset: Int, value: UInt32) throws -> URL {
        var bytes = try Data(contentsOf: original)
        XCTAssertEqual(Array(bytes[8..<12]), Array("desc".utf8), "the writer puts desc first")
        let position = 20 + offset
        for index in 0..<4 { bytes[position + index] = UInt8(truncatingIfNeeded: value >> (8 * (3 - index))) }
        let copy = work.appendingPathComponent("\(name).caf")
        try bytes.write(to: copy)
        Unprivileged.handOver(copy.path)
        return copy
    }

    /// A copy of `original` named `name.caf` with every `old` replaced by `new` (same length) in its bytes.
    private func patched(_ original: URL, _ name: String, replacing old: String, with new: String) throws -> URL {
        var bytes = try Data(contentsOf: original)
        XCTAssertNotNil(bytes.range(of: Data(old.utf8)), "\(old) is in \(original.lastPathComponent)")
        while let range = bytes.range(of: Data(old.utf8)) { bytes.replaceSubrange(range, with: Data(new.utf8)) }
        let copy = work.appendingPathComponent("\(name).caf")
        try bytes.write(to: copy)
        Unprivileged.handOver(copy.path)
        return copy
    }

    /// `capture-recv export ARGUMENTS` as the unprivileged user: exit status (the signal number if
    /// a signal ended it), standard output and standard error.
    private func export(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        let child = try ChildProcess(Products.recv, ["export"] + arguments)
        let status = child.wait(seconds: 120)
        return (status, child.standardOutput, child.standardError)
    }

    func testAFloatFlaggedIntegerDescriptionIsRefusedNotACrash() throws {
        let good = try record("pcm")
        // CAF flags 2 (little-endian integer) become 3: float samples, but only 16 bits of them.
        let bad = try patchedDescription(good, "float-flagged", field: 12, value: 3)
        let result = try export([bad.path, "--to", "wav"])
        XCTAssertEqual(result.status, 1, "exit status 1, not a signal: \(result.errors)")
        XCTAssertEqual(
            result.errors,
            "capture-recv: cannot read \(bad.path) as a CAF recording: \(bad.path) has an audio description ('desc') that cannot be read: float samples are 32 or 64 bits, not 16\n")
        XCTAssertEqual(result.output, "")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path).filter { !$0.hasSuffix(".caf") }, [], "nothing written, nothing left behind")
    }

    func testAnOpusDescriptionWithFourBillionChannelsIsRefusedWithoutAllocating() throws {
        let good = try record("opus", opus: true)
        let bad = try patchedDescription(good, "channels", field: 24, value: 0xFFFF_FFFF)
        let result = try export([bad.path, "--to", "wav"])
        XCTAssertEqual(result.status, 1, "exit status 1, not an abort: \(result.errors)")
        XCTAssertEqual(
            result.errors,
            "capture-recv: cannot read \(bad.path) as a CAF recording: \(bad.path) has an audio description ('desc') that cannot be read: 4294967295 channels is more than the 1024 a recording can have\n")
        let ogg = try export([bad.path, "--to", "ogg"])
        XCTAssertEqual(ogg.status, 1, ogg.errors)
        XCTAssertTrue(ogg.errors.contains("4294967295 channels"), ogg.errors)
    }

    func testAFirstSampleTimeBeyondWhatNanosecondsHoldIsRefusedNotACrash() throws {
        let good = try record("pcm")
        let info = try CAFFile.read(path: good.path).info
        let time = try XCTUnwrap(info.first { $0.key == "first sample time" }?.value)
        let year = String(time.prefix(4))
        let bad = try patched(good, "far-future", replacing: time, with: "9999" + time.dropFirst(4))
        let result = try export([bad.path, "--to", "flac"])
        XCTAssertEqual(result.status, 1, "exit status 1, not a signal: \(result.errors)")
        XCTAssertEqual(
            result.errors,
            "capture-recv: cannot export \(bad.path): its first sample time 9999\(time.dropFirst(4)) lies outside 1677 to 2262, the years an export's times can carry; the file's info chunk is damaged\n")
        XCTAssertNotEqual(year, "9999")
    }

    /// Good and bad files in one call: the good ones are exported (and hold their recordings' audio,
    /// read back by libsndfile and ffprobe), each bad one is named on one line at the end, exit 1.
    func testABatchExportsEveryGoodFileAndEndsWithOneLinePerFailedFile() throws {
        let pcm = try record("pcm")
        let opus = try record("opus", opus: true)
        let floatFlagged = try patchedDescription(pcm, "float-flagged", field: 12, value: 3)
        let channels = try patchedDescription(opus, "channels", field: 24, value: 0xFFFF_FFFF)
        let notCAF = work.appendingPathComponent("notes.caf")
        try Data("not audio".utf8).write(to: notCAF)
        Unprivileged.handOver(notCAF.path)
        let out = try Unprivileged.makeDirectory(work.appendingPathComponent("exports"))
        let files = [floatFlagged, pcm, channels, notCAF, opus]
        let result = try export(files.map(\.path) + ["--to", "wav", "--out", out.path])
        XCTAssertEqual(result.status, 1, result.errors)
        let pcmWAV = out.appendingPathComponent("pcm.wav").path
        let opusWAV = out.appendingPathComponent("opus.wav").path
        XCTAssertEqual(result.output, "\(pcmWAV)\n\(opusWAV)\n", "each good file exported, in order")
        let lines = result.errors.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        XCTAssertEqual(lines.count, 3, "one line per failed file: \(result.errors)")
        for (line, file) in zip(lines, [floatFlagged, channels, notCAF]) {
            XCTAssertTrue(line.hasPrefix("capture-recv: cannot read \(file.path) "), "\(line) names \(file.lastPathComponent)")
        }
        XCTAssertTrue(lines[0].hasSuffix("float samples are 32 or 64 bits, not 16"), lines[0])
        XCTAssertTrue(lines[1].hasSuffix("4294967295 channels is more than the 1024 a recording can have"), lines[1])
        XCTAssertTrue(lines[2].contains("is not a CAF file"), lines[2])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: out.path).sorted(), ["opus.wav", "pcm.wav"], "no export of a bad file, no temporary left")

        // The PCM export holds the recording's samples, exactly (libsndfile).
        let recording = try CAFFile.read(path: pcm.path)
        let stored = try recording.readAudioData()
        let samples = stride(from: 0, to: stored.count, by: 2).map { Int32(Int16(bitPattern: UInt16(stored[$0]) | UInt16(stored[$0 + 1]) << 8)) }
        let wav = try SndFileReader.read(path: pcmWAV)
        XCTAssertEqual(wav.sampleRate, Int(recording.format.sampleRate))
        XCTAssertEqual(wav.channels, recording.format.channelCount)
        XCTAssertEqual(Int64(wav.frames), recording.totalFrames)
        XCTAssertEqual(wav.nativeIntegerSamples, samples, "the recording's samples, bit-exact")
        // The Opus export holds exactly the valid frames, decoded to 24-bit 48 kHz (ffprobe).
        let opusRecording = try CAFFile.read(path: opus.path)
        let probe = try ffprobeStream(opusWAV)
        XCTAssertEqual(probe["codec_name"] as? String, "pcm_s24le")
        XCTAssertEqual(probe["sample_rate"] as? String, "48000")
        XCTAssertEqual(probe["channels"] as? Int, opusRecording.format.channelCount)
        XCTAssertEqual(probe["duration_ts"] as? Int, (opusRecording.packetTable?.validFrames).map(Int.init), "every valid frame and no more")
        XCTAssertGreaterThan(opusRecording.packetTable?.validFrames ?? 0, 40_000)
    }

    // MARK: The output folder (issue 31)

    /// `--out` into a folder that does not exist makes it (and its parents), as the receiver's
    /// `--out` does, and the export is complete there.
    func testExportMakesAMissingOutputFolder() throws {
        let pcm = try record("pcm")
        let folder = work.appendingPathComponent("exports/2026/november")
        let result = try export([pcm.path, "--to", "wav", "--out", folder.path])
        XCTAssertEqual(result.status, 0, result.errors)
        XCTAssertEqual(result.errors, "")
        let exported = folder.appendingPathComponent("pcm.wav")
        XCTAssertEqual(result.output, exported.path + "\n")
        let probe = try ffprobeStream(exported.path)
        XCTAssertEqual(probe["duration_ts"] as? Int, 48_000, "the whole second")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), ["pcm.wav"], "no temporary file left")
    }

    /// An output folder that cannot be made or written is named, with the system's reason; no
    /// message shows the export's temporary name or libsndfile's own wording.
    func testAnOutputFolderThatCannotBeUsedIsNamedWithTheSystemsReason() throws {
        let pcm = try record("pcm")
        let file = work.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        var cases: [(out: String, format: String, expected: String)] = [
            (file.path, "wav", "cannot export into \(file.path): it is a file, not a folder"),
            (file.appendingPathComponent("below").path, "flac", "cannot make the folder \(file.appendingPathComponent("below").path) for the export: not a directory"),
        ]
        if Unprivileged.isActive {
            // A folder root owns: the export (run as the unprivileged user) cannot create its file.
            let locked = work.appendingPathComponent("locked")
            try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: true)
            chown(locked.path, 0, 0)
            chmod(locked.path, 0o755)
            cases.append((locked.path, "wav", "cannot write \(locked.appendingPathComponent("pcm.wav").path): permission denied"))
            cases.append((locked.path, "flac", "cannot write \(locked.appendingPathComponent("pcm.flac").path): permission denied"))
        }
        for (out, format, expected) in cases {
            let result = try export([pcm.path, "--to", format, "--out", out])
            XCTAssertEqual(result.status, 1, "\(out): \(result.errors)")
            XCTAssertTrue(result.errors.contains(expected), "\(out) as \(format): \(result.errors)")
            for leak in [".partial", "System error", "sf_", "Error Domain", "The operation could not be completed"] {
                XCTAssertFalse(result.errors.contains(leak), "\(out) as \(format) shows \(leak): \(result.errors)")
            }
        }
        if !Unprivileged.isActive { throw XCTSkip("the unwritable-folder case needs root to run the export as another user") }
    }

    // MARK: Durable when done, and a full disk (issue 31)

    /// Each format's export is durable before it is reported done: under strace, the temporary
    /// file is fsynced before it is renamed into place, and the folder after, so a power cut after
    /// "exported" never leaves an empty or missing file.
    func testAnExportIsSyncedBeforeItsRenameAndItsFolderAfter() throws {
        guard let strace = ToolRunner.find("strace") else {
            throw TestFailure("strace is not installed: scripts/install-deps.sh installs it")
        }
        let pcm = try record("pcm")
        let opus = try record("opus", opus: true)
        for (source, format, fileExtension) in [(pcm, "wav", "wav"), (pcm, "flac", "flac"), (opus, "ogg", "opus")] {
            let folder = work.appendingPathComponent("durable-\(format)")
            let trace = work.appendingPathComponent("\(format).trace").path
            let command = Unprivileged.command(Products.recv, ["export", source.path, "--to", format, "--out", folder.path])
            let child = try ChildProcess(
                strace, ["-f", "-qq", "-y", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o", trace, command.executable] + command.arguments,
                unprivileged: false)
            XCTAssertEqual(child.wait(seconds: 120), 0, "\(format): \(child.standardError)")
            let destination = folder.appendingPathComponent("\(source.deletingPathExtension().lastPathComponent).\(fileExtension)").path
            let calls = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").map(String.init)
            let rename = try XCTUnwrap(
                calls.firstIndex { $0.contains("rename") && $0.contains(".partial") && $0.contains("\"\(destination)\"") && $0.hasSuffix("= 0") },
                "\(format): the export is renamed into place: \(calls)")
            let fileSynced = calls[..<rename].contains { ($0.contains("fsync(") || $0.contains("fdatasync(")) && $0.contains(".partial>") && $0.hasSuffix("= 0") }
            XCTAssertTrue(fileSynced, "\(format): its bytes are synced before the rename: \(calls)")
            let folderSynced = calls[(rename + 1)...].contains { $0.contains("fsync(") && $0.contains("<\(folder.path)>") && $0.hasSuffix("= 0") }
            XCTAssertTrue(folderSynced, "\(format): its folder is synced after the rename: \(calls)")
        }
    }

    /// A disk that fills during the export: exit 1, one line naming the export and the system's
    /// reason, no temporary file left behind and nothing under the export's name.
    func testAFullDiskFailsTheExportWithTheSystemsReasonAndLeavesNothing() throws {
        let pcm = try record("pcm")
        let opus = try record("opus", opus: true)
        let disk = work.appendingPathComponent("small-disk")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        // One page: the header of each format fits, a second of its audio does not.
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=4k", "tmpfs", disk.path])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a small tmpfs here (needs root): \(mounted.errorText)") }
        defer { _ = try? ToolRunner.run("umount", [disk.path]) }
        Unprivileged.handOver(disk.path)
        for (source, format, fileExtension) in [(pcm, "wav", "wav"), (pcm, "rf64", "rf64.wav"), (pcm, "flac", "flac"), (opus, "ogg", "opus")] {
            let result = try export([source.path, "--to", format, "--out", disk.path])
            let destination = disk.appendingPathComponent("\(source.deletingPathExtension().lastPathComponent).\(fileExtension)").path
            XCTAssertEqual(result.status, 1, "\(format): \(result.errors)")
            XCTAssertEqual(result.output, "", format)
            let lines = result.errors.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, "\(format): one line: \(result.errors)")
            XCTAssertTrue(result.errors.contains("cannot write \(destination): no space left on device"), "\(format): \(result.errors)")
            for leak in [".partial", "System error", "sf_", "Error Domain", "The operation could not be completed", "libsndfile"] {
                XCTAssertFalse(result.errors.contains(leak), "\(format) shows \(leak): \(result.errors)")
            }
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: disk.path), [], "\(format): nothing left on the full disk")
        }
    }

    /// Every file good: exit 0, nothing on standard error.
    func testABatchOfGoodFilesExitsZero() throws {
        let pcm = try record("pcm")
        let result = try export([pcm.path, "--to", "flac"])
        XCTAssertEqual(result.status, 0, result.errors)
        XCTAssertEqual(result.errors, "")
        XCTAssertEqual(result.output, work.appendingPathComponent("pcm.flac").path + "\n")
    }
}
