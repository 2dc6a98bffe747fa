import CAF
import CaptureCore
import CaptureLocalCopy
import Foundation
import TestSupport
import XCTest

/// The safety copy on the unit (`LocalCopy`): the capture as it was taken, on the capture's own
/// timeline (silence and a gap marker for lost and paused frames), cut at UTC boundaries, in CAF,
/// WAV or FLAC, read back with the project's CAF reader and with libsndfile; a full disk stops the
/// copy and says so once, and keeps what was written.
final class LocalCopyTests: XCTestCase {
    private var folder: URL!
    private let format = StreamFormat.linearPCM(sampleRate: 8_000, channels: 1, sample: .s16)

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("local-copy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    /// Sample `index` of the capture: a ramp, never 0 (so silence is told apart).
    private static func sample(_ index: Int64) -> Int16 { Int16(truncatingIfNeeded: index % 30_000 + 1) }

    /// What the capture delivered: audio from `start` (`frames` of the ramp), with frames lost or
    /// paused before it; `frames` 0 is a paused queue's report (`start`: where the pause so far ends).
    private struct Delivery {
        var start: Int64
        var frames: Int
        var lost = 0
        var paused = 0
    }

    private func feed(_ copy: LocalCopy, _ deliveries: [Delivery]) {
        for delivery in deliveries {
            var bytes = [UInt8]()
            for index in 0..<Int64(delivery.frames) {
                let value = Self.sample(delivery.start + index)
                bytes += [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
            }
            bytes.withUnsafeBytes { raw in
                copy.take(CapturedBuffer(
                    bytes: raw, startTime: CaptureTimestamp(sampleTime: delivery.start, hostTime: 0), packetCount: delivery.frames,
                    framesLostBefore: delivery.lost, framesPausedBefore: delivery.paused))
            }
        }
    }

    /// The timeline the deliveries make: the ramp where audio was taken, 0 elsewhere.
    private func expectedSamples(_ deliveries: [Delivery]) -> [Int16] {
        var samples: [Int16] = []
        for delivery in deliveries {
            samples += [Int16](repeating: 0, count: Int(delivery.start) - samples.count)
            samples += (0..<Int64(delivery.frames)).map { Self.sample(delivery.start + $0) }
        }
        return samples
    }

    private static func int16s(_ bytes: [UInt8]) -> [Int16] {
        stride(from: 0, to: bytes.count - 1, by: 2).map { Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8) }
    }

    // 0..<800 audio; an overrun of 100; 900..<1700 audio; a pause reported as it went (300 + 300,
    // then 200 with the buffer after it) from 1700 to 2500; 2500..<3300 audio.
    private let script = [
        Delivery(start: 0, frames: 800),
        Delivery(start: 900, frames: 800, lost: 100),
        Delivery(start: 2_000, frames: 0, paused: 300),
        Delivery(start: 2_300, frames: 0, paused: 300),
        Delivery(start: 2_500, frames: 800, paused: 200),
    ]

    func testACAFCopyHoldsTheCaptureOnItsTimelineWithTheGapsMarked() throws {
        let path = folder.appendingPathComponent("take.caf").path
        let copy = try LocalCopy(settings: try LocalCopySettings(path: path), format: format, startTime: Date()) { reason in
            XCTFail("the copy stopped: \(reason)")
        }
        feed(copy, script)
        let outcome = copy.finish()
        XCTAssertEqual(outcome, LocalCopy.Outcome(files: [path], seconds: 3_300.0 / 8_000, stoppedBecause: nil))
        let caf = try CAFFile.read(path: path)
        XCTAssertTrue(caf.isFinalized)
        XCTAssertEqual(Self.int16s(try caf.readAudioData()), expectedSamples(script))
        XCTAssertEqual(caf.markers, [
            CAFMarker(framePosition: 800, name: "gap: 100 frames not captured (overrun)"),
            CAFMarker(framePosition: 1_700, name: "gap: 800 frames not captured (paused)"),
        ])
        // libsndfile reads the same samples.
        let read = try SndFileReader.read(path: path)
        XCTAssertEqual(read.int32Samples.map { Int16(truncatingIfNeeded: $0 >> 16) }, expectedSamples(script))
    }

    func testWAVAndFLACCopiesHoldTheSameSamples() throws {
        for name in ["take.wav", "take.flac"] {
            let path = folder.appendingPathComponent(name).path
            let copy = try LocalCopy(settings: try LocalCopySettings(path: path), format: format, startTime: Date()) { reason in
                XCTFail("\(name): the copy stopped: \(reason)")
            }
            feed(copy, script)
            XCTAssertTrue(copy.finish().isComplete)
            let read = try SndFileReader.read(path: path)
            XCTAssertEqual(read.sampleRate, 8_000, name)
            XCTAssertEqual(read.int32Samples.map { Int16(truncatingIfNeeded: $0 >> 16) }, expectedSamples(script), name)
        }
    }

    func testSettingsRefuseWhatTheyCannotWrite() throws {
        XCTAssertThrowsError(try LocalCopySettings(path: "/tmp/take.mp3")) { error in
            XCTAssertEqual((error as? LocalCopyError)?.description, "the local copy (LocalCopySettings.path) /tmp/take.mp3: the file must end in .caf, .wav or .flac")
        }
        XCTAssertThrowsError(try LocalCopySettings(path: "take.flac").check(.linearPCM(sampleRate: 48_000, channels: 2, sample: .f32))) { error in
            XCTAssertEqual(
                (error as? LocalCopyError)?.description,
                "the local copy (LocalCopySettings.path): FLAC holds 16- or 24-bit integers and the capture is f32: record to .caf or .wav, or capture s16 or s24")
        }
        let existing = folder.appendingPathComponent("there.caf").path
        XCTAssertTrue(FileManager.default.createFile(atPath: existing, contents: Data([1])))
        XCTAssertThrowsError(try LocalCopy(settings: try LocalCopySettings(path: existing), format: format, startTime: Date()) { _ in }) { error in
            XCTAssertTrue((error as? LocalCopyError)?.description.hasPrefix("the local copy (LocalCopySettings.path): cannot create \(existing): ") ?? false, "\(error)")
        }
    }

    /// Segments: boundaries at UTC multiples of the length from midnight; each file named by its
    /// first sample's UTC time; the files, one after the other, are the whole copy.
    func testASegmentedCopyIsCutAtUTCBoundariesAndTheFilesJoinToTheWhole() throws {
        // The capture starts 0.5 s past a whole second: with 1 s segments, the first file holds
        // 4000 frames, then one per second.
        let start = Date(timeIntervalSince1970: 1_795_838_400.5)  // 2026-11-28T04:00:00.5Z
        let base = folder.appendingPathComponent("take.caf").path
        let copy = try LocalCopy(settings: try LocalCopySettings(path: base, segmentLength: .seconds(1)), format: format, startTime: start) { reason in
            XCTFail("the copy stopped: \(reason)")
        }
        let deliveries = [Delivery(start: 0, frames: 7_000), Delivery(start: 16_000, frames: 0, paused: 9_000), Delivery(start: 16_000, frames: 4_000, paused: 0)]
        feed(copy, deliveries)
        let outcome = copy.finish()
        XCTAssertEqual(outcome.files.map { ($0 as NSString).lastPathComponent }, [
            "take_20261128T040000Z.caf", "take_20261128T040001Z.caf", "take_20261128T040002Z.caf",
        ])
        var joined: [Int16] = []
        var lengths: [Int] = []
        for file in outcome.files {
            let samples = Self.int16s(try CAFFile.read(path: file).readAudioData())
            lengths.append(samples.count)
            joined += samples
        }
        XCTAssertEqual(lengths, [4_000, 8_000, 8_000], "cut at 04:00:01 and 04:00:02")
        XCTAssertEqual(joined, expectedSamples(deliveries))
        // The pause (7000..<16000) is marked in the file where it begins: the second, at 7000 - 4000.
        let second = try CAFFile.read(path: outcome.files[1])
        XCTAssertEqual(second.markers, [CAFMarker(framePosition: 3_000, name: "gap: 9000 frames not captured (paused)")])
    }

    func testSegmentBoundariesFollowUTCFromMidnight() {
        // 7-hour segments from 20:30 UTC: 21:00, then midnight (not 28:00), then 07:00.
        let start = Date(timeIntervalSince1970: 1_795_811_400)  // 2026-11-27T20:30:00Z
        let segments = LocalCopySegments(startTime: start, sampleRate: 48_000, length: .seconds(7 * 3_600))
        let first = segments.boundary(after: 0)
        XCTAssertEqual(first, 1_800 * 48_000, "21:00")
        let second = segments.boundary(after: first)
        XCTAssertEqual(second, (1_800 + 3 * 3_600) * 48_000, "midnight")
        XCTAssertEqual(segments.boundary(after: second), (1_800 + 10 * 3_600) * 48_000, "07:00")
        XCTAssertEqual((segments.path(base: "/data/take.caf", firstFrame: second) as NSString).lastPathComponent, "take_20261128T000000Z.caf")
        // A rate whose boundary falls between frames: the first frame at or after it.
        let odd = LocalCopySegments(startTime: Date(timeIntervalSince1970: 1_795_838_400.25), sampleRate: 44_100, length: .seconds(1))
        XCTAssertEqual(odd.boundary(after: 0), 33_075)
    }

    /// The segment lengths a copy takes: whole seconds from 1 s to 24 h; anything else is refused
    /// with the length it was given.
    func testSegmentLengthsAreWholeSecondsFromOneSecondToADay() throws {
        let rows: [(Duration, accepted: Bool)] = [
            (.zero, false), (.milliseconds(500), false), (.seconds(1), true), (.milliseconds(1_500), false),
            (.seconds(900), true), (.seconds(86_400), true), (.seconds(86_401), false), (.seconds(-1), false),
        ]
        for (length, accepted) in rows {
            do {
                let settings = try LocalCopySettings(path: "/tmp/take.caf", segmentLength: length)
                XCTAssertTrue(accepted, "\(length) was accepted")
                XCTAssertEqual(settings.segmentLength, length)
            } catch {
                XCTAssertFalse(accepted, "\(length) was refused: \(error)")
                XCTAssertEqual(error, .invalidSegment(length))
            }
        }
    }

    /// A full disk (a small tmpfs) stops the copy once, with the reason, and keeps what it wrote.
    func testAFullDiskStopsTheCopyOnceAndKeepsWhatWasWritten() throws {
        let small = folder.appendingPathComponent("small").path
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        let mounted = try ToolRunner.run("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", small])
        guard mounted.succeeded else { throw XCTSkip("cannot mount a small tmpfs here (needs root): \(mounted.errorText)") }
        defer { _ = try? ToolRunner.run("umount", [small]) }
        let stops = LockedList()
        let path = small + "/take.caf"
        let copy = try LocalCopy(settings: try LocalCopySettings(path: path), format: format, startTime: Date()) { reason in stops.append(reason) }
        // 10 s of 8 kHz s16 is 160 KB: more than the 64 KiB there is.
        feed(copy, (0..<10).map { Delivery(start: Int64($0) * 8_000, frames: 8_000) })
        let outcome = copy.finish()
        XCTAssertEqual(stops.all.count, 1, "said once: \(stops.all)")
        XCTAssertEqual(outcome.stoppedBecause, stops.all.first)
        XCTAssertTrue(outcome.stoppedBecause?.contains("the disk is full") ?? false, "\(outcome)")
        XCTAssertGreaterThan(outcome.seconds, 0)
        XCTAssertLessThan(outcome.seconds, 10)
        // What was written is there, in order: readable as the CAF it is (data to the end of the file).
        let caf = try CAFFile.read(path: path)
        let samples = Self.int16s(try caf.readAudioData())
        XCTAssertGreaterThanOrEqual(samples.count, Int(outcome.seconds * 8_000))
        XCTAssertEqual(Array(samples.prefix(Int(outcome.seconds * 8_000))), (0..<Int64(outcome.seconds * 8_000)).map(Self.sample))
    }
}

/// Strings collected from another thread.
private final class LockedList: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func append(_ item: String) { lock.withLock { items.append(item) } }
    var all: [String] { lock.withLock { items } }
}
