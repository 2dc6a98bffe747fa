import CAF
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 27, items 4 and 9: a damaged spool is never discarded in silence. A flipped bit costs the
/// seconds of the record it hit, which reach the receiver as a `spool-damaged` gap at their exact
/// place; the records after it are delivered; the damaged bytes are kept beside the spool; `spool
/// list`, `spool deliver` and a run that delivers earlier streams say which seconds were lost and
/// where the bytes are. A damaged `meta.json` is named with its field, listed as damaged and never
/// deleted or crashed on. Real executables, a real receiver, the spool's bytes read and flipped
/// here independently of the sender's code.
final class SpoolDamageTests: XCTestCase {
    private var work: URL!
    private var spool: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("spool-damage-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
        spool = try Unprivileged.makeDirectory(work.appendingPathComponent("spool"))
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    // MARK: - Helpers

    /// One record of a spool segment, read from its bytes (docs/DURABILITY.md).
    private struct Record {
        var offset: Int
        var size: Int
        var type: UInt8
        var sequence: UInt64
        var firstSample: Int64
        var frames: Int64
    }

    /// The records of a segment file, read as the documented layout says.
    private static func records(_ bytes: [UInt8]) -> [Record] {
        func integer(_ at: Int, _ count: Int) -> UInt64 { bytes[at..<(at + count)].reduce(0) { $0 << 8 | UInt64($1) } }
        var result: [Record] = []
        var offset = 0
        while offset + 12 <= bytes.count {
            let length = Int(integer(offset, 4))
            let body = offset + 12
            guard length >= 9, body + length <= bytes.count else { break }
            let type = bytes[body]
            let sequence = integer(body + 1, 8)
            var first: Int64 = 0
            var frames: Int64 = 0
            if type == 0x41 {
                first = Int64(bitPattern: integer(body + 9, 8))
                frames = Int64(integer(body + 17, 4))
            } else if type == 0x47 {
                first = Int64(bitPattern: integer(body + 9, 8))
                frames = Int64(bitPattern: integer(body + 17, 8))
            }
            result.append(Record(offset: offset, size: 12 + length, type: type, sequence: sequence, firstSample: first, frames: frames))
            if type == 0x45 { break }
            offset = body + length
        }
        return result
    }

    /// The stream folder and its one segment's path.
    private func segment(of id: String) throws -> URL {
        let folder = spool.appendingPathComponent(id)
        guard let name = try FileManager.default.contentsOfDirectory(atPath: folder.path).first(where: { $0.hasPrefix("seg-") }) else {
            throw TestFailure("no segment in \(folder.path)")
        }
        return folder.appendingPathComponent(name)
    }

    /// Sends `source` (a WAV) to `address`, where nobody listens, in records of 0.1 s, until the
    /// spool holds the whole stream and its end; then kills the sender. Returns the stream's id.
    private func spoolWholeStream(_ source: String, to address: String, name: String) throws -> String {
        let sender = try ChildProcess(Products.send, [
            address, "--source", "file", "--file", source, "--no-pace", "--buffer-seconds", "0.1", "--stream-name", name,
        ] + Resilience.senderOptions(spool: spool))
        var id: String?
        Resilience.waitUntil("the spool holds the whole stream \(name) and its end") {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: spool.path)) ?? []
            guard let folder = names.first(where: { UUID(uuidString: $0) != nil }), let path = try? segment(of: folder),
                  let bytes = try? [UInt8](Data(contentsOf: path)) else { return false }
            id = folder
            return Self.records(bytes).last?.type == 0x45
        }
        sender.signal(SIGKILL)
        _ = sender.wait(seconds: 10)
        return try XCTUnwrap(id)
    }

    /// Flips one bit of the audio payload of record `index` (byte 1,000 of its payload, or the
    /// middle of its body when `middle`: an Opus record may be shorter); returns that record.
    @discardableResult
    private func flipBit(inRecord index: Int, of id: String, middle: Bool = false) throws -> Record {
        let path = try segment(of: id)
        var bytes = [UInt8](try Data(contentsOf: path))
        let record = Self.records(bytes)[index]
        XCTAssertEqual(record.type, 0x41, "an audio record")
        let offset = record.offset + 12 + (middle ? (record.size - 12) / 2 : 29 + 1_000)
        XCTAssertLessThan(offset, record.offset + record.size, "the flipped bit lies in the record")
        bytes[offset] ^= 0x10
        let handle = try FileHandle(forWritingTo: path)
        try handle.write(contentsOf: bytes)
        try handle.close()
        return record
    }

    private func spoolCommand(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, errors: String) {
        let child = try ChildProcess(Products.send, ["spool"] + arguments + ["--spool", spool.path], environment: environment)
        let status = child.wait(seconds: 120)
        return (status, child.standardOutput, child.standardError)
    }

    /// `spool list`'s rows as column maps (header names as keys).
    private func listed() throws -> [[String: String]] {
        let result = try spoolCommand(["list"])
        XCTAssertEqual(result.status, 0, result.errors)
        let lines = result.output.split(separator: "\n").map(String.init)
        guard let header = lines.first, header.hasPrefix("STREAM") else { return [] }
        func columns(_ line: String) -> [String] {
            line.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let names = columns(header)
        return lines.dropFirst().map { Dictionary(uniqueKeysWithValues: zip(names, columns($0))) }
    }

    private func spoolEntries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: spool.path)) ?? []).sorted()
    }

    /// Checks the recording of a stream whose record `damaged` was lost: every frame before and
    /// after it bit-exact, its frames silence, one marker at its first frame naming the reason.
    private func checkRecording(_ file: URL, source: [UInt8], damaged: Record, keptIn: String) throws {
        let caf = try CAFFile.read(path: file.path)
        XCTAssertTrue(caf.isFinalized)
        let audio = try caf.readAudioData()
        guard audio.count == source.count else {
            return XCTFail("the stream keeps its length (the damaged record's frames are there as silence): \(audio.count) bytes, not \(source.count)")
        }
        let start = Int(damaged.firstSample) * 4
        let end = Int(damaged.firstSample + damaged.frames) * 4
        XCTAssertEqual(Array(audio[..<start]), Array(source[..<start]), "every frame before the damage, bit-exact")
        XCTAssertEqual(Array(audio[start..<end]), [UInt8](repeating: 0, count: end - start), "the damaged frames are silence")
        XCTAssertEqual(Array(audio[end...]), Array(source[end...]), "every frame after the damage, bit-exact and in its place")
        XCTAssertEqual(caf.markers, [CAFMarker(
            framePosition: damaged.firstSample,
            name: "gap: \(damaged.frames) frames not captured (spool-damaged: the sender's spool could not read these frames back; the damaged bytes are kept in \(keptIn))")])
    }

    /// The damaged bytes kept beside the spool: one file, the whole damaged record as it is on disk.
    private func checkKept(_ folder: String, segment: [UInt8], damaged: Record) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        XCTAssertEqual(names, ["seg-00000000000000000001-at-\(damaged.offset).bytes"])
        let kept = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder).appendingPathComponent(names.first ?? "")))
        XCTAssertEqual(kept, Array(segment[damaged.offset..<(damaged.offset + damaged.size)]))
    }

    private func seconds(_ frames: Int64) -> String { String(format: "%.3f", Double(frames) / 48_000) }

    // MARK: - Damaged records

    func testABitFlippedInTheFirstRecordCostsItsSecondsAndTheRestIsDeliveredInPlace() throws {
        let port = try LoopbackPort.free()
        let address = "127.0.0.1:\(port)"
        let source = try Resilience.randomWAV(in: work, seconds: 3.5, seed: 4_001)
        let id = try spoolWholeStream(source.path, to: address, name: "first-flip")
        let damaged = try flipBit(inRecord: 0, of: id)
        XCTAssertEqual(damaged.sequence, 1)
        let segmentBytes = [UInt8](try Data(contentsOf: try segment(of: id)))

        let rows = try listed()
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?["STATE"], "damaged: seconds 0.000-0.100 lost", "\(rows)")
        XCTAssertEqual(rows.first?["CAPTURED"]?.hasSuffix("+3.500s"), true, "\(rows)")

        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: port)
        let delivered = try spoolCommand(["deliver", "--timeout", "60"])
        let kept = spool.path + "/" + id + ".damaged"
        XCTAssertEqual(delivered.status, 1, delivered.output + delivered.errors)
        XCTAssertEqual(
            delivered.output,
            "damaged \(id): seconds 0.000-0.100 of stream first-flip were lost to spool damage; the rest was delivered to \(address); the damaged bytes are kept in \(kept)\n")
        let file = try XCTUnwrap(receiver.files().first)
        XCTAssertEqual(receiver.files().count, 1)
        try checkRecording(file, source: source.bytes, damaged: damaged, keptIn: kept)
        try checkKept(kept, segment: segmentBytes, damaged: damaged)
        XCTAssertEqual(spoolEntries(), [id + ".damaged"], "the delivered stream left the spool; its damaged bytes stay, as the line says")
        XCTAssertEqual(try listed().count, 0)
    }

    func testABitFlippedInTheMiddleCostsOnlyItsRecordAndTheRecordsAfterItAreDelivered() throws {
        let port = try LoopbackPort.free()
        let address = "127.0.0.1:\(port)"
        let source = try Resilience.randomWAV(in: work, seconds: 3.5, seed: 4_002)
        let id = try spoolWholeStream(source.path, to: address, name: "middle-flip")
        let damaged = try flipBit(inRecord: 15, of: id)
        XCTAssertEqual(damaged.firstSample, 72_000)
        let segmentBytes = [UInt8](try Data(contentsOf: try segment(of: id)))
        let span = "\(seconds(damaged.firstSample))-\(seconds(damaged.firstSample + damaged.frames))"
        XCTAssertEqual(span, "1.500-1.600")

        XCTAssertEqual(try listed().first?["STATE"], "damaged: seconds \(span) lost")
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: port)
        let delivered = try spoolCommand(["deliver", String(id.prefix(8)), "--timeout", "60"])
        let kept = spool.path + "/" + id + ".damaged"
        XCTAssertEqual(delivered.status, 1, delivered.output + delivered.errors)
        XCTAssertEqual(
            delivered.output,
            "damaged \(id): seconds \(span) of stream middle-flip were lost to spool damage; the rest was delivered to \(address); the damaged bytes are kept in \(kept)\n")
        let file = try XCTUnwrap(receiver.files().first)
        try checkRecording(file, source: source.bytes, damaged: damaged, keptIn: kept)
        try checkKept(kept, segment: segmentBytes, damaged: damaged)
        XCTAssertEqual(spoolEntries(), [id + ".damaged"])
        XCTAssertTrue(receiver.child.standardError.contains("spool-damaged"), "the receiver logs the gap: \(receiver.child.standardError)")
    }

    func testARunThatDeliversADamagedEarlierStreamSaysTheSame() throws {
        let port = try LoopbackPort.free()
        let address = "127.0.0.1:\(port)"
        let source = try Resilience.randomWAV(in: work, seconds: 3.5, seed: 4_003)
        let id = try spoolWholeStream(source.path, to: address, name: "earlier")
        let damaged = try flipBit(inRecord: 15, of: id)
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: port)

        let run = try ChildProcess(Products.send, [address, "--source", "tone", "--duration", "1", "--no-pace", "--stream-name", "new"]
            + Resilience.senderOptions(spool: spool))
        // The new stream is delivered, but the run does not end as if all had gone well: exit 1,
        // its last line naming the seconds lost.
        XCTAssertEqual(Resilience.finish(run), 1, run.standardError)
        let kept = spool.path + "/" + id + ".damaged"
        let line = "seconds 1.500-1.600 of stream earlier were lost to spool damage; the rest was delivered to \(address); the damaged bytes are kept in \(kept)"
        XCTAssertTrue(run.standardError.contains(line), run.standardError)
        let lastLine = run.standardError.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(lastLine.hasSuffix("Error: 1 earlier stream(s) lost audio to spool damage: \(line)"), lastLine)
        XCTAssertTrue(run.standardError.contains("stream delivered"), "the new stream itself was delivered: " + run.standardError)
        let file = try XCTUnwrap(receiver.files().first { $0.lastPathComponent.hasPrefix("earlier_") })
        try checkRecording(file, source: source.bytes, damaged: damaged, keptIn: kept)
        XCTAssertEqual(spoolEntries(), [id + ".damaged"])
    }

    /// Opus: the damaged record's packets become encoded silence at their place (the timeline and
    /// the packet count stay those of the stream); every other packet is byte for byte the packet a
    /// clean run of the same file made; the loss is said in the same words as for PCM.
    func testAnOpusStreamKeepsEveryOtherPacketAndGetsSilenceInTheDamagedRecordsPlace() throws {
        let source = try Resilience.randomWAV(in: work, seconds: 3.5, seed: 4_005)
        let opus = ["--codec", "opus", "--bitrate", "64k"]
        // The clean reference: the same file, encoded the same way, straight to a receiver.
        let clean = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions)
        let direct = try ChildProcess(Products.send, [clean.address, "--source", "file", "--file", source.path, "--no-pace", "--stream-name", "clean"]
            + opus + Resilience.senderOptions(spool: work.appendingPathComponent("clean-spool")))
        XCTAssertEqual(Resilience.finish(direct), 0, direct.standardError)
        let reference = try CAFFile.read(path: try XCTUnwrap(clean.files().first).path)

        let port = try LoopbackPort.free()
        let address = "127.0.0.1:\(port)"
        let sender = try ChildProcess(Products.send, [
            address, "--source", "file", "--file", source.path, "--no-pace", "--buffer-seconds", "0.1", "--stream-name", "opus-flip",
        ] + opus + Resilience.senderOptions(spool: spool))
        var id = ""
        Resilience.waitUntil("the spool holds the whole Opus stream and its end") {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: spool.path)) ?? []
            guard let folder = names.first(where: { UUID(uuidString: $0) != nil }), let path = try? segment(of: folder),
                  let bytes = try? [UInt8](Data(contentsOf: path)) else { return false }
            id = folder
            return Self.records(bytes).last?.type == 0x45
        }
        sender.signal(SIGKILL)
        _ = sender.wait(seconds: 10)
        let damaged = try flipBit(inRecord: 15, of: id, middle: true)
        XCTAssertEqual(damaged.frames % 960, 0, "an Opus record holds whole 20 ms packets")
        let span = "\(seconds(damaged.firstSample))-\(seconds(damaged.firstSample + damaged.frames))"

        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: port)
        let delivered = try spoolCommand(["deliver", "--timeout", "60"])
        let kept = spool.path + "/" + id + ".damaged"
        XCTAssertEqual(delivered.status, 1, delivered.output + delivered.errors)
        XCTAssertEqual(
            delivered.output,
            "damaged \(id): seconds \(span) of stream opus-flip were lost to spool damage; the rest was delivered to \(address); the damaged bytes are kept in \(kept)\n")
        let recording = try CAFFile.read(path: try XCTUnwrap(receiver.files().first).path)
        XCTAssertTrue(recording.isFinalized)
        XCTAssertEqual(recording.packetCount, reference.packetCount, "the stream keeps its packets")
        XCTAssertEqual(recording.totalFrames, reference.totalFrames, "and its timeline")
        XCTAssertEqual(recording.magicCookie, reference.magicCookie)
        let damagedPackets = Int64(damaged.firstSample / 960)..<Int64((damaged.firstSample + damaged.frames) / 960)
        XCTAssertEqual(damagedPackets.count, Int(damaged.frames / 960))
        for index in 0..<(reference.packetCount ?? 0) {
            let packet = try recording.readPacket(index)
            if damagedPackets.contains(index) {
                XCTAssertNotEqual(packet, try reference.readPacket(index), "packet \(index) was lost and replaced")
            } else {
                XCTAssertEqual(packet, try reference.readPacket(index), "packet \(index) is the clean run's")
            }
        }
        // The silence decodes: an independent decoder reads the whole file.
        let decoded = try ToolRunner.run("ffmpeg", ["-v", "error", "-nostdin", "-i", recording.path, "-f", "s16le", "-"])
        XCTAssertTrue(decoded.succeeded, decoded.errorText)
        XCTAssertEqual(decoded.errorText, "", "ffmpeg decodes every packet without complaint")
        XCTAssertEqual(spoolEntries(), [id + ".damaged"])
    }

    // MARK: - Damaged meta.json

    func testADamagedMetaIsNamedListedAsDamagedAndNeverDeleted() throws {
        let port = try LoopbackPort.free()
        let address = "127.0.0.1:\(port)"
        let source = try Resilience.randomWAV(in: work, seconds: 0.5, seed: 4_004)
        let id = try spoolWholeStream(source.path, to: address, name: "bad-meta")
        let metaURL = spool.appendingPathComponent(id).appendingPathComponent("meta.json")
        let original = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: metaURL)) as? [String: Any])
        let receiver = try ReceiverUnderTest(extraArguments: Resilience.receiverOptions, port: port)

        let cases: [(field: String, value: Any, reason: String)] = [
            ("sampleRate", 0, "sampleRate 0 is not a sample rate capture-send records (8000 to 192000 Hz)"),
            ("startTime", 1e300, "startTime 1e+300 is not a time from 1970 to 2100 (seconds since 1970)"),
            ("startTime", -1e300, "startTime -1e+300 is not a time from 1970 to 2100 (seconds since 1970)"),
        ]
        for damage in cases {
            var meta = original
            meta[damage.field] = damage.value
            try JSONSerialization.data(withJSONObject: meta).write(to: metaURL)
            Unprivileged.handOver(metaURL.path)
            let problem = "spool: \(metaURL.path): \(damage.reason); the stream is left in the spool as it is"

            let rows = try listed()
            XCTAssertEqual(rows.count, 1, "\(damage.field) \(damage.value): \(rows)")
            XCTAssertEqual(rows.first?["STREAM"], id)
            XCTAssertEqual(rows.first?["STATE"], "damaged: meta.json: \(damage.reason)")

            let everything = try spoolCommand(["deliver", "--timeout", "30"])
            XCTAssertEqual(everything.status, 1, "\(damage.field) \(damage.value): " + everything.output + everything.errors)
            XCTAssertEqual(everything.output, "not delivered \(id): \(problem)\n")
            let named = try spoolCommand(["deliver", id, "--timeout", "30"])
            XCTAssertEqual(named.status, 1, named.output + named.errors)
            XCTAssertEqual(named.output, "not delivered \(id): \(problem)\n")
            XCTAssertEqual(receiver.files(), [], "nothing of a stream whose description is damaged is sent")
            XCTAssertTrue(FileManager.default.fileExists(atPath: metaURL.path), "the stream stays in the spool")
            XCTAssertEqual(spoolEntries(), [id])

            let run = try ChildProcess(Products.send, [address, "--source", "tone", "--duration", "0.5", "--no-pace", "--stream-name", "new"]
                + Resilience.senderOptions(spool: spool))
            XCTAssertEqual(Resilience.finish(run), 1, run.standardError)
            XCTAssertTrue(run.standardError.contains("an earlier stream's spool is damaged; it is left in the spool as it is"), run.standardError)
            XCTAssertTrue(run.standardError.contains(problem), run.standardError)
            let lastLine = run.standardError.split(separator: "\n").last.map(String.init) ?? ""
            XCTAssertTrue(lastLine.hasSuffix("Error: 1 earlier stream(s) could not be delivered and stay in the spool: \(problem)"), lastLine)
            XCTAssertEqual(spoolEntries(), [id])
            for file in receiver.files() { try FileManager.default.removeItem(at: file) }
        }
        // Only the user removes it, by its id.
        let discarded = try spoolCommand(["discard", id, "--yes"])
        XCTAssertEqual(discarded.status, 0, discarded.output + discarded.errors)
        XCTAssertEqual(discarded.output, "discarded \(id) (0 bytes)\n")
        XCTAssertEqual(spoolEntries(), [])
    }
}
