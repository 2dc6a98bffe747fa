import CaptureCore
@testable import CaptureReceiver
import CaptureWire
import Foundation
import XCTest

/// The pure parts of `--segment` and `--name-template`: where boundaries fall on a stream's
/// timeline, how a message is split at one (PCM and Opus), pre-roll, and file names.
final class SegmentTimelineTests: XCTestCase {
    private let second: Int64 = 1_000_000_000
    /// 2026-11-24T10:00:00Z.
    private let tenOClock: Int64 = 1_795_514_400 * 1_000_000_000

    func testBoundariesFallOnUTCMultiplesOfTheLengthOfTheStreamsOwnTimeline() {
        struct Row { let length: Duration; let start: Int64; let origin: Int64; let rate: Double; let after: Int64; let boundary: Int64; let line: UInt }
        let rows: [Row] = [
            // Starts 2.5 s after ten o'clock: the first 10 s boundary is 7.5 s in.
            Row(length: .seconds(10), start: tenOClock + 2_500_000_000, origin: 0, rate: 48_000, after: 0, boundary: 360_000, line: #line),
            // On a boundary: the next one is a whole length later.
            Row(length: .seconds(10), start: tenOClock, origin: 0, rate: 48_000, after: 0, boundary: 480_000, line: #line),
            Row(length: .seconds(10), start: tenOClock, origin: 0, rate: 48_000, after: 480_000, boundary: 960_000, line: #line),
            // Opus: positions count from the first packet; the first valid sample is 312 in.
            Row(length: .seconds(10), start: tenOClock + 2_500_000_000, origin: 312, rate: 48_000, after: 312, boundary: 360_312, line: #line),
            // 44.1 kHz: the first sample at or after the boundary (7.5 s = 330,750 frames exactly).
            Row(length: .seconds(10), start: tenOClock + 2_500_000_000, origin: 0, rate: 44_100, after: 5, boundary: 330_750, line: #line),
            // A start between samples: the boundary sample is the first one at or after it (ceil).
            Row(length: .seconds(10), start: tenOClock + 30_000, origin: 0, rate: 48_000, after: 0, boundary: 479_999, line: #line),
            // 1 h from 10:00:02.5: ends at 11:00.
            Row(length: .seconds(3_600), start: tenOClock + 2_500_000_000, origin: 0, rate: 48_000, after: 0, boundary: 3_597_500 * 48, line: #line),
            // 7 min does not divide a day: the last segment before midnight is shorter (23:55 + 7 min > 24:00).
            Row(length: .seconds(420), start: tenOClock + 14 * 3_600 * 1_000_000_000 - 5 * 60 * 1_000_000_000, origin: 0, rate: 48_000, after: 0, boundary: 300 * 48_000, line: #line),
            // Continuing stream: origin is where its timeline's first valid sample lies.
            Row(length: .seconds(10), start: tenOClock, origin: 1_000_000, rate: 48_000, after: 1_000_000, boundary: 1_480_000, line: #line),
        ]
        for row in rows {
            let clock = SegmentClock(length: row.length, startTime: row.start, origin: row.origin, sampleRate: row.rate)
            XCTAssertEqual(clock.nextBoundary(after: row.after), row.boundary, line: row.line)
            XCTAssertGreaterThan(clock.nextBoundary(after: row.after), row.after, line: row.line)
            // The boundary sample's time is at or just after a segment start, by less than a sample.
            let time = clock.time(ofPosition: row.boundary)
            XCTAssertEqual(clock.segmentStart(containing: time), clock.segmentStart(containing: time + 1), line: row.line)
            XCTAssertLessThan(time - clock.segmentStart(containing: time), Int64(1e9 / row.rate) + 1, line: row.line)
        }
    }

    func testSuccessiveBoundariesAreExactlyALengthApart() {
        let clock = SegmentClock(length: .seconds(10), startTime: tenOClock + 123_456_789, origin: 0, sampleRate: 48_000)
        var boundary = clock.nextBoundary(after: 0)
        for _ in 0..<100 {
            let next = clock.nextBoundary(after: boundary)
            XCTAssertEqual(next - boundary, 480_000)
            boundary = next
        }
    }

    private let pcm = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
    private let opus = StreamFormat.opus(channels: 2, framesPerPacket: 960)

    func testPCMSplitsAtTheBoundaryFrame() {
        let payload = Data((0..<40).map { UInt8($0) })  // 10 frames of 4 bytes
        let audio = TimedAudio(first: 100, payload: payload, packetSizes: [], frameCount: 10)
        let parts = audio.split(at: 103, format: pcm)
        XCTAssertEqual(parts.before, TimedAudio(first: 100, payload: Data((0..<12).map { UInt8($0) }), packetSizes: [], frameCount: 3))
        XCTAssertEqual(parts.after, TimedAudio(first: 103, payload: Data((12..<40).map { UInt8($0) }), packetSizes: [], frameCount: 7))
        XCTAssertEqual(parts.remainder, 0)
        // What a file already holds is dropped from a resend.
        XCTAssertEqual(audio.dropping(before: 103, format: pcm), parts.after)
        XCTAssertEqual(audio.dropping(before: 90, format: pcm), audio)
        XCTAssertNil(audio.dropping(before: 110, format: pcm))
    }

    func testOpusSplitsSoThatThePacketHoldingTheBoundaryEndsOneFileAndBeginsTheNext() {
        // Three packets of 960 frames at 0, 960, 1920, of 3, 4 and 5 bytes.
        let audio = TimedAudio(first: 0, payload: Data([1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3]), packetSizes: [3, 4, 5], frameCount: 2_880)
        let inside = audio.split(at: 1_000, format: opus)
        XCTAssertEqual(inside.before.packetSizes, [3, 4])
        XCTAssertEqual(inside.remainder, 920, "the second packet's frames past the boundary")
        XCTAssertEqual(inside.after.first, 960)
        XCTAssertEqual(inside.after.packetSizes, [4, 5])
        XCTAssertEqual(inside.after.payload, Data([2, 2, 2, 2, 3, 3, 3, 3, 3]))
        let onEdge = audio.split(at: 960, format: opus)
        XCTAssertEqual(onEdge.before.packetSizes, [3])
        XCTAssertEqual(onEdge.remainder, 0)
        XCTAssertEqual(onEdge.after.packetSizes, [4, 5])
        // A resend after a cut drops the packets the new file's pre-roll already holds.
        XCTAssertEqual(audio.dropping(before: 960, format: opus)?.packetSizes, [4, 5])
        XCTAssertEqual(audio.dropping(before: 961, format: opus)?.packetSizes, [5])
    }

    func testPrerollIsTheContiguousPacketsBeforeTheNewFilesFirstPacket() {
        var ring = PrerollPackets(framesPerPacket: 960)
        XCTAssertEqual(ring.capacity, 4, "80 ms of 20 ms packets")
        for index in 0..<10 {
            ring.remember(TimedAudio(first: Int64(index) * 960, payload: Data([UInt8(index)]), packetSizes: [1], frameCount: 960))
        }
        // The boundary lies in packet 9 (which is no pre-roll): packets 5...8.
        let preroll = ring.preroll(endingAt: 9 * 960)
        XCTAssertEqual(preroll?.first, 5 * 960)
        XCTAssertEqual(preroll?.payload, Data([5, 6, 7, 8]))
        // After a jump in the timeline (a gap) nothing contiguous is left.
        XCTAssertNil(ring.preroll(endingAt: 20 * 960))
        ring.forget()
        XCTAssertNil(ring.preroll(endingAt: 10 * 960))
        // Read back from a file a stream resumes in: placed so that the last ends where the file does.
        ring.remember(readBack: [[1], [2], [3], [4], [5]], endingAt: 30 * 960)
        XCTAssertEqual(ring.preroll(endingAt: 30 * 960)?.payload, Data([2, 3, 4, 5]))
        XCTAssertEqual(ring.preroll(endingAt: 30 * 960)?.first, 26 * 960)
    }

    /// Issue 27, item 1: the segment clock, strftime and the ISO times of the `info` chunk work on
    /// any Int64 without trapping (they overflowed at the ends: `SegmentClock.position` with
    /// `start_sample_time` 2^63-1, `strftime` at -2^63). Validation keeps streams far from these
    /// ends (PROTOCOL.md §6.1.4); at the ends of the validated ranges nothing is clamped.
    func testTimesAndPositionsAtTheEndsOfInt64DoNotTrap() throws {
        let extremes: [Int64] = [.min, .min + 1, -1, 0, 1, .max - 1, .max]
        for start in extremes {
            for origin in extremes {
                let clock = SegmentClock(length: .seconds(10), startTime: start, origin: origin, sampleRate: 48_000)
                for position in extremes {
                    _ = clock.nextBoundary(after: position)
                    _ = clock.time(ofPosition: position)
                    _ = clock.position(atOrAfter: position)
                    _ = clock.nextBoundaryTime(after: position)
                }
            }
        }
        let far = SegmentClock(length: .seconds(10), startTime: .max, origin: .max, sampleRate: 48_000)
        XCTAssertEqual(far.nextBoundary(after: .max), .max, "beyond Int64: clamped")
        XCTAssertEqual(SegmentClock(length: .seconds(10), startTime: 0, origin: 0, sampleRate: .nan).sampleRate, 1)
        XCTAssertEqual(SegmentClock(length: .seconds(Int64.max), startTime: 0, origin: 0, sampleRate: 48_000).length, 86_400 * second)

        // The latest start a Hello may give, at the end of its 100-year timeline: exact, not clamped.
        let latest = WireProtocol.latestStartTimeUnixNanoseconds
        let origin = WireProtocol.maximumStartSampleTime
        let clock = SegmentClock(length: .seconds(3_600), startTime: latest, origin: origin, sampleRate: 192_000)
        let end = origin + WireProtocol.maximumTimelineSeconds * 192_000
        XCTAssertEqual(clock.time(ofPosition: end), latest + WireProtocol.maximumTimelineSeconds * second)
        XCTAssertEqual(clock.nextBoundary(after: end), end + 3_600 * 192_000, "2200-01-02T00:00:00Z is on an hour: the next boundary is an hour on")
        XCTAssertEqual(FileNameTemplate.strftime("%Y-%m-%dT%H:%M:%S", at: clock.time(ofPosition: end)), "2200-01-02T00:00:00")

        XCTAssertEqual(FileNameTemplate.strftime("%Y", at: .min), "1677")
        XCTAssertEqual(FileNameTemplate.strftime("%Y%m%dT%H%M%S", at: .max), "22620411T234716")
        XCTAssertEqual(FileNameTemplate.strftime("%H%M%S", at: -1), "235959", "a time before 1970 rounds down")
        XCTAssertEqual(RecordingFileMaker.isoTime(.max), "2262-04-11T23:47:16.854Z")
        XCTAssertEqual(RecordingFileMaker.isoTime(.min), "1677-09-21T00:12:43.145Z")
        XCTAssertEqual(RecordingFileMaker.isoTime(latest + 1_500_000), "2100-01-01T00:00:00.001Z")
        XCTAssertEqual(RecordingFileMaker.isoTime(Date(timeIntervalSince1970: 9.3e18)), "1970-01-01T00:00:00.000Z", "a date no Int64 holds")
        XCTAssertEqual(RecordingFileMaker.isoTime(Date(timeIntervalSince1970: 1_795_514_400.25)), "2026-11-24T10:00:00.250Z")
    }

    func testNamesFromATemplateStayInsideTheOutputFolder() throws {
        let id = try XCTUnwrap(UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B"))
        let fields = FileNameTemplate.Fields(stream: "studio A", streamID: id, host: "field-1", start: tenOClock + 2_500_000_000)
        XCTAssertEqual(FileNameTemplate.standard.relativePath(fields), "studio_A_20261124T100002Z.caf", "today's names")
        XCTAssertEqual(FileNameTemplate.standard.relativePath(fields, variant: .numbered(2)), "studio_A_20261124T100002Z-2.caf")
        XCTAssertEqual(FileNameTemplate.standard.relativePath(fields, variant: .streamID), "studio_A_20261124T100002Z+6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b.caf")
        XCTAssertEqual(
            FileNameTemplate.standard.relativePath(fields, variant: .streamIDAndFirstSample(480_000, attempt: 1)),
            "studio_A_20261124T100002Z+6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b+480000.caf")
        XCTAssertEqual(
            FileNameTemplate.standard.relativePath(fields, variant: .streamIDAndFirstSample(480_000, attempt: 3)),
            "studio_A_20261124T100002Z+6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b+480000-3.caf")
        // No stream name or template makes a `+`: a name carrying a stream id is never another's.
        XCTAssertEqual(try FileNameTemplate("{stream}+x").relativePath(FileNameTemplate.Fields(stream: "a+\(id)", streamID: id, host: "", start: 0)), "a_6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B_x.caf")
        let folders = try FileNameTemplate("{stream}/%Y/%m/%d/{host}_{stream_id}_%H%M%S")
        XCTAssertEqual(folders.relativePath(fields), "studio_A/2026/11/24/field-1_6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b_100002.caf")
        // A hostile stream name or template cannot climb out: every component is sanitized.
        let hostile = FileNameTemplate.Fields(stream: "../../etc/passwd", streamID: id, host: "../x", start: tenOClock)
        for text in ["{stream}/{host}", "../{stream}", "a/../../b", "./.hidden/%Y"] {
            let path = try FileNameTemplate(text).relativePath(hostile)
            XCTAssertFalse(path.split(separator: "/").contains { $0 == ".." || $0 == "." || $0.hasPrefix(".") }, "\(text) → \(path)")
            XCTAssertFalse(path.hasPrefix("/"), path)
        }
        XCTAssertThrowsError(try FileNameTemplate("")) { XCTAssertEqual($0 as? FileNameTemplate.TemplateError, .empty) }
        XCTAssertThrowsError(try FileNameTemplate("/srv/{stream}")) { XCTAssertEqual($0 as? FileNameTemplate.TemplateError, .absolute("/srv/{stream}")) }
        XCTAssertThrowsError(try FileNameTemplate("{name}_%H")) { XCTAssertEqual($0 as? FileNameTemplate.TemplateError, .unknownPlaceholder("name")) }
    }
}
