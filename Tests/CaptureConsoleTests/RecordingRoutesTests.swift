import CAF
@testable import CaptureConsole
import CaptureCore
@testable import CaptureReceiver
import CaptureSecurity
import CaptureWire
import Foundation
import TestSupport
import XCTest

/// The recordings view's API over real CAF files written by the project's CAF writer the way the
/// receiver writes them (its `info` entries, gap markers, stream index records): the listing's
/// fields and filters, downloads with byte ranges, path escapes, exports, and the token.
final class RecordingRoutesTests: XCTestCase {
    private static let token = "desk-crew-2b8e41"
    private static let micID = UUID(uuidString: "0A1B2C3D-0000-4000-8000-000000000001") ?? UUID()
    private static let deskID = UUID(uuidString: "0A1B2C3D-0000-4000-8000-000000000002") ?? UUID()
    private static let segmentedID = UUID(uuidString: "0A1B2C3D-0000-4000-8000-000000000003") ?? UUID()
    private static let liveID = UUID(uuidString: "0A1B2C3D-0000-4000-8000-000000000004") ?? UUID()

    static let complete = "mic_20261127T100000Z.caf"
    static let incomplete = "desk/2026-11-28/desk_0900.caf"
    static let firstSegment = "mic/2026-11-28/mic_0800.caf"
    static let lastSegment = "mic/2026-11-28/mic_0800-10.caf"
    static let live = "live_20261128T100000Z.caf"

    private var work: URL!
    private var out: String { work.appendingPathComponent("out").path }

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("recording-routes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: work.appendingPathComponent("out").path, withIntermediateDirectories: true)
        try makeRecordings()
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    // MARK: - The recordings

    /// A recording as the receiver writes one: s16 PCM, its `info` entries, its markers; finalized
    /// unless `finished` is false (then it is left as a live stream's file is, its journal beside it).
    @discardableResult
    private func record(
        _ relative: String, stream: String, id: UUID, start: String, rate: Double = 48_000, channels: Int = 2, frames: Int,
        markers: [(Int64, String)] = [], extraInfo: [(key: String, value: String)] = [], finished: Bool = true
    ) throws -> String {
        let path = (out as NSString).appendingPathComponent(relative)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let writer = try CAFWriter(
            path: path, format: .linearPCM(sampleRate: rate, channels: channels, sample: .s16),
            info: [
                ("title", stream), ("recorded date", start), ("source", "unit (192.0.2.7:50000)"), ("source host", "unit"),
                ("clock synchronized", "yes"), ("encoding application", "capture-send, capture-recv"), ("stream id", id.uuidString.lowercased()),
                ("first sample time", start), ("first valid sample", "0"), ("first sample", "0"),
            ] + extraInfo)
        let samples = (0..<(frames * channels)).map { Int16(truncatingIfNeeded: $0 &* 31 &- 9_000) }
        try writer.append(samples.withUnsafeBytes { Array($0) }, frameCount: frames)
        for (position, name) in markers { try writer.addMarker(framePosition: position, name: name) }
        if finished { try writer.finalize() } else { writer.close() }
        return path
    }

    /// The stream index's record of a finished stream, as the receiver leaves it for the resume window.
    private func indexRecord(_ id: UUID, relative: String, frames: Int64, complete: Bool) throws {
        let folder = (out as NSString).appendingPathComponent(StreamIndex.folderName)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let record = FinishedStreamRecord(relativePath: relative, frames: frames, packets: frames, end: StreamPosition(lastSequence: 9, endSampleTime: frames), complete: complete)
        try StreamIndexEntry(stream: .finished(record), owner: nil).text.write(
            toFile: (folder as NSString).appendingPathComponent(id.uuidString.lowercased()), atomically: true, encoding: .utf8)
    }

    private func makeRecordings() throws {
        // Complete: ended with its stream's end; two gaps (one a pause) and a marker from the field.
        try record(
            Self.complete, stream: "mic", id: Self.micID, start: "2026-11-27T10:00:00.000Z", frames: 96_000,
            markers: [(24_000, "gap: 4800 frames not captured (overrun)"), (50_000, "interview starts"), (70_000, "gap: 2400 frames not captured (paused)")])
        try indexRecord(Self.micID, relative: Self.complete, frames: 96_000, complete: true)
        // Incomplete: finalized after the resume window, its sender gone; in a template's folders.
        try record(
            Self.incomplete, stream: "desk", id: Self.deskID, start: "2026-11-28T09:00:00.000Z", rate: 16_000, channels: 1, frames: 24_000,
            markers: [(8_000, "gap: 1600 frames not captured (link)")])
        try indexRecord(Self.deskID, relative: Self.incomplete, frames: 24_000, complete: false)
        // Two segments of one stream, its index record gone: the first was cut, so complete.
        try record(Self.firstSegment, stream: "mic", id: Self.segmentedID, start: "2026-11-28T08:00:00.000Z", frames: 480_000)
        try record(Self.lastSegment, stream: "mic", id: Self.segmentedID, start: "2026-11-28T08:00:10.000Z", frames: 12_000)
        // Not listed: a live stream's file, the receiver's own folders, a link out, a damaged file.
        try record(Self.live, stream: "live", id: Self.liveID, start: "2026-11-28T10:00:00.000Z", frames: 4_800, finished: false)
        try record(".handoff/hidden.caf", stream: "hidden", id: UUID(), start: "2026-11-28T11:00:00.000Z", frames: 480)
        let outside = work.appendingPathComponent("outside.caf").path
        try FileManager.default.copyItem(atPath: (out as NSString).appendingPathComponent(Self.complete), toPath: outside)
        try FileManager.default.createSymbolicLink(atPath: (out as NSString).appendingPathComponent("link.caf"), withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: (out as NSString).appendingPathComponent("linked-folder"), withDestinationPath: work.path)
        try Data("not a CAF file at all".utf8).write(to: URL(fileURLWithPath: (out as NSString).appendingPathComponent("damaged.caf")))
        try Data("notes".utf8).write(to: URL(fileURLWithPath: (out as NSString).appendingPathComponent("notes.txt")))
    }

    private func bytes(_ relative: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: (out as NSString).appendingPathComponent(relative))))
    }

    private func console(access: ConsoleAccess? = nil, host: String = "127.0.0.1", catalogue: RecordingCatalogue? = nil) async throws -> RunningConsole {
        let console = try await RunningConsole(host: host, access: access, recordings: catalogue ?? RecordingCatalogue(outputDirectory: out))
        addTeardownBlock { await console.stop() }
        return console
    }

    private func listing(port: Int, query: String = "", headers: [String: String] = [:]) async throws -> [[String: Any]] {
        let response = try await HTTP.get(port: port, path: "/api/recordings" + query, headers: headers)
        XCTAssertEqual(response.status, 200, response.body)
        XCTAssertEqual(response.headers["content-type"], "application/json; charset=utf-8")
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [[String: Any]], response.body)
    }

    // MARK: - Pure parts

    func testByteRangeTable() {
        let cases: [(String?, Int64, ByteRange, UInt)] = [
            (nil, 1_000, .whole, #line),
            ("bytes=0-99", 1_000, .partial(0...99), #line),
            ("bytes=100-199", 1_000, .partial(100...199), #line),
            ("bytes=999-999", 1_000, .partial(999...999), #line),
            ("bytes=900-5000", 1_000, .partial(900...999), #line),
            ("bytes=500-", 1_000, .partial(500...999), #line),
            ("bytes=0-", 1_000, .partial(0...999), #line),
            ("bytes=-100", 1_000, .partial(900...999), #line),
            ("bytes=-5000", 1_000, .partial(0...999), #line),
            ("bytes = 10 - 20", 1_000, .partial(10...20), #line),
            ("BYTES=1-2", 1_000, .partial(1...2), #line),
            ("bytes=99999999999999999999999-", 1_000, .unsatisfiable, #line),
            ("bytes=0-99999999999999999999999", 1_000, .partial(0...999), #line),
            ("bytes=1000-", 1_000, .unsatisfiable, #line),
            ("bytes=1000-1100", 1_000, .unsatisfiable, #line),
            ("bytes=-0", 1_000, .unsatisfiable, #line),
            ("bytes=0-0", 0, .unsatisfiable, #line),
            ("bytes=-10", 0, .unsatisfiable, #line),
            // Ignored: the whole file (RFC 9110 lets a server ignore what it does not do).
            ("bytes=20-10", 1_000, .whole, #line),
            ("bytes=0-9,20-29", 1_000, .whole, #line),
            ("items=0-9", 1_000, .whole, #line),
            ("bytes=a-b", 1_000, .whole, #line),
            ("bytes=-", 1_000, .whole, #line),
            ("bytes=5", 1_000, .whole, #line),
            ("bytes=+5-9", 1_000, .whole, #line),
        ]
        for (header, size, expected, line) in cases {
            XCTAssertEqual(ByteRange.resolve(header: header, size: size), expected, "\(header ?? "nil") of \(size)", line: line)
        }
    }

    func testDaysAndQueries() throws {
        for day in ["2026-11-28", "2024-02-29", "2000-02-29", "1999-12-31"] { XCTAssertTrue(RecordingQuery.isDay(day), day) }
        for day in ["2026-11-31", "2025-02-29", "1900-02-29", "2026-13-01", "2026-00-10", "2026-1-01", "26-11-28", "2026/11/28", "2026-11-28T00", "２０２６-11-28", ""] {
            XCTAssertFalse(RecordingQuery.isDay(day), day)
        }
        XCTAssertThrowsError(try RecordingQuery(stream: nil, day: "28.11.2026")) { error in
            XCTAssertEqual("\(error)", #"day "28.11.2026" is not a date: write it YYYY-MM-DD (a UTC day, e.g. 2026-11-28)"#)
        }
        XCTAssertEqual(RecordingCatalogue.gapLength("gap: 480 frames not captured (overrun)"), 480)
        XCTAssertEqual(RecordingCatalogue.gapLength("gap: ? frames"), 0)
        XCTAssertNil(RecordingCatalogue.gapLength("goal"))
        XCTAssertEqual(RecordingRoutes.contentDisposition("mic_0800.caf"), #"attachment; filename="mic_0800.caf""#)
        XCTAssertEqual(RecordingRoutes.contentDisposition("Bühne 1.caf"), #"attachment; filename="B_hne 1.caf"; filename*=UTF-8''B%C3%BChne%201.caf"#)
        XCTAssertEqual(RecordingRoutes.httpDate(Date(timeIntervalSince1970: 784_111_777)), "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    // MARK: - The listing

    func testListingHasEachFinishedFileWithItsFacts() async throws {
        let console = try await console()
        let rows = try await listing(port: console.port)
        XCTAssertEqual(rows.map { $0["path"] as? String }, [Self.incomplete, Self.lastSegment, Self.firstSegment, Self.complete], "newest first; no live, hidden, linked or damaged file")

        let complete = try XCTUnwrap(rows.first { $0["path"] as? String == Self.complete })
        XCTAssertEqual(Set(complete.keys), [
            "path", "stream", "stream_id", "start", "duration_seconds", "frames", "sample_rate", "channels", "format", "gap_count", "gap_seconds",
            "marker_count", "bytes", "modified", "complete",
        ])
        XCTAssertEqual(complete["stream"] as? String, "mic")
        XCTAssertEqual(complete["stream_id"] as? String, Self.micID.uuidString.lowercased())
        XCTAssertEqual(complete["start"] as? String, "2026-11-27T10:00:00.000Z")
        XCTAssertEqual(complete["frames"] as? Int, 96_000)
        XCTAssertEqual(complete["duration_seconds"] as? Double, 2.0)
        XCTAssertEqual(complete["sample_rate"] as? Double, 48_000)
        XCTAssertEqual(complete["channels"] as? Int, 2)
        XCTAssertEqual(complete["format"] as? String, "s16 48000 Hz 2 ch")
        XCTAssertEqual(complete["gap_count"] as? Int, 2)
        XCTAssertEqual(try XCTUnwrap(complete["gap_seconds"] as? Double), 0.15, accuracy: 1e-9)
        XCTAssertEqual(complete["marker_count"] as? Int, 1, "the marker from the field; gaps are counted apart")
        XCTAssertEqual(complete["bytes"] as? Int, try bytes(Self.complete).count)
        XCTAssertEqual(complete["complete"] as? Bool, true)
        XCTAssertNotNil(RecordingCatalogue.parseTime(try XCTUnwrap(complete["modified"] as? String)))

        let incomplete = try XCTUnwrap(rows.first { $0["path"] as? String == Self.incomplete })
        XCTAssertEqual(incomplete["stream"] as? String, "desk")
        XCTAssertEqual(incomplete["start"] as? String, "2026-11-28T09:00:00.000Z")
        XCTAssertEqual(incomplete["frames"] as? Int, 24_000)
        XCTAssertEqual(incomplete["duration_seconds"] as? Double, 1.5)
        XCTAssertEqual(incomplete["format"] as? String, "s16 16000 Hz 1 ch")
        XCTAssertEqual(incomplete["gap_count"] as? Int, 1)
        XCTAssertEqual(try XCTUnwrap(incomplete["gap_seconds"] as? Double), 0.1, accuracy: 1e-9)
        XCTAssertEqual(incomplete["marker_count"] as? Int, 0)
        XCTAssertEqual(incomplete["complete"] as? Bool, false, "finalized without its stream's end")

        let first = try XCTUnwrap(rows.first { $0["path"] as? String == Self.firstSegment })
        let last = try XCTUnwrap(rows.first { $0["path"] as? String == Self.lastSegment })
        XCTAssertEqual(first["complete"] as? Bool, true, "a segment its stream went on from")
        XCTAssertTrue(last["complete"] is NSNull, "no record of how the stream's last file ended: null")
        XCTAssertEqual(first["duration_seconds"] as? Double, 10.0)
    }

    func testFiltersByStreamAndDay() async throws {
        let console = try await console()
        func paths(_ query: String) async throws -> [String?] { try await listing(port: console.port, query: query).map { $0["path"] as? String } }
        let micPaths = try await paths("?stream=mic")
        XCTAssertEqual(micPaths, [Self.lastSegment, Self.firstSegment, Self.complete])
        let dayPaths = try await paths("?day=2026-11-28")
        XCTAssertEqual(dayPaths, [Self.incomplete, Self.lastSegment, Self.firstSegment])
        let both = try await paths("?stream=mic&day=2026-11-27")
        XCTAssertEqual(both, [Self.complete])
        let none = try await paths("?stream=desk&day=2026-11-27")
        XCTAssertEqual(none, [])
        try record("two words.caf", stream: "two words+more", id: UUID(), start: "2026-11-20T00:00:00.000Z", frames: 480)
        let encoded = try await paths("?stream=two+words%2Bmore")
        XCTAssertEqual(encoded, ["two words.caf"], "+ is a space, %2B a plus (URLSearchParams)")
        let percent = try await paths("?stream=two%20words%2Bmore&day=2026-11-20")
        XCTAssertEqual(percent, ["two words.caf"])
        try FileManager.default.removeItem(atPath: (out as NSString).appendingPathComponent("two words.caf"))
        let empty = try await paths("?stream=&day=")
        XCTAssertEqual(empty.count, 4, "empty filters filter nothing")

        for bad in ["2026-11-31", "yesterday", "2026-11-28T09:00:00Z"] {
            let refused = try await HTTP.get(port: console.port, path: "/api/recordings?day=\(bad)")
            XCTAssertEqual(refused.status, 400, bad)
            XCTAssertTrue(refused.body.contains("write it YYYY-MM-DD"), refused.body)
        }
    }

    func testHeadersAreReadOnceUntilAFileChanges() async throws {
        let catalogue = RecordingCatalogue(outputDirectory: out)
        XCTAssertEqual(catalogue.recordings().count, 4)
        // The four recordings and the damaged file (refused once, not again until it changes).
        XCTAssertEqual(catalogue.headerReads, 5)
        _ = catalogue.recordings()
        _ = catalogue.recordings(matching: try RecordingQuery(stream: "mic", day: nil))
        XCTAssertEqual(catalogue.headerReads, 5, "nothing read again")

        // A new file is read; a changed one is read again; a removed one leaves the cache.
        try record("late_20261128T120000Z.caf", stream: "late", id: UUID(), start: "2026-11-28T12:00:00.000Z", frames: 480)
        let late = catalogue.recordings()
        XCTAssertEqual(late.first?.path, "late_20261128T120000Z.caf")
        XCTAssertEqual(catalogue.headerReads, 6)
        let touched = (out as NSString).appendingPathComponent(Self.complete)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: touched)
        _ = catalogue.recordings()
        XCTAssertEqual(catalogue.headerReads, 7)
        try FileManager.default.removeItem(atPath: touched)
        XCTAssertEqual(catalogue.recordings().map(\.path).contains(Self.complete), false)
        XCTAssertEqual(catalogue.headerReads, 7)
    }

    func testTheLastFileOfAStreamAnotherContinuesIsIncomplete() throws {
        // Its index record gone (a resume window after it finished): the stream that continues it
        // says it was finalized without its end.
        let first = UUID()
        try record("van/van_1.caf", stream: "van", id: first, start: "2026-11-26T10:00:00.000Z", frames: 4_800)
        try record("van/van_0.caf", stream: "van", id: first, start: "2026-11-26T09:00:00.000Z", frames: 4_800)
        try record(
            "van/van_2.caf", stream: "van", id: UUID(), start: "2026-11-26T11:00:00.000Z", frames: 4_800,
            extraInfo: [("continues stream id", first.uuidString.lowercased())])
        let listed = RecordingCatalogue(outputDirectory: (out as NSString).appendingPathComponent("van")).recordings()
        XCTAssertEqual(listed.map(\.path), ["van_2.caf", "van_1.caf", "van_0.caf"])
        XCTAssertEqual(listed.map(\.complete), [nil, false, true], "the continuation: unknown; the continued stream's last file: incomplete; its segment before: cut, complete")
    }

    // MARK: - Downloads

    func testDownloadWholeAndRanges() async throws {
        let console = try await console()
        let expected = try bytes(Self.complete)
        let size = expected.count
        let path = "/api/recordings/file/\(Self.complete)"

        let whole = try await RawHTTP.get(port: console.port, path: path)
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.body, expected, "byte for byte")
        XCTAssertEqual(whole.headers["content-type"], "audio/x-caf")
        XCTAssertEqual(whole.headers["accept-ranges"], "bytes")
        XCTAssertEqual(whole.headers["content-length"], "\(size)")
        XCTAssertEqual(whole.headers["content-disposition"], #"attachment; filename="mic_20261127T100000Z.caf""#)
        let tag = try XCTUnwrap(whole.headers["etag"])

        let ranges: [(String, Range<Int>)] = [
            ("bytes=0-99", 0..<100),
            ("bytes=1000-1999", 1000..<2000),
            ("bytes=-500", (size - 500)..<size),
            ("bytes=\(size - 300)-", (size - 300)..<size),
            ("bytes=\(size - 10)-\(size + 5000)", (size - 10)..<size),
        ]
        for (header, range) in ranges {
            let part = try await RawHTTP.get(port: console.port, path: path, headers: ["Range": header])
            XCTAssertEqual(part.status, 206, header)
            XCTAssertEqual(part.headers["content-range"], "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)", header)
            XCTAssertEqual(part.headers["content-length"], "\(range.count)", header)
            XCTAssertEqual(part.body, Array(expected[range]), header)
        }

        let beyond = try await RawHTTP.get(port: console.port, path: path, headers: ["Range": "bytes=\(size)-"])
        XCTAssertEqual(beyond.status, 416)
        XCTAssertEqual(beyond.headers["content-range"], "bytes */\(size)")
        let several = try await RawHTTP.get(port: console.port, path: path, headers: ["Range": "bytes=0-9,20-29"])
        XCTAssertEqual(several.status, 200, "several ranges: the whole file")
        XCTAssertEqual(several.body, expected)
        let current = try await RawHTTP.get(port: console.port, path: path, headers: ["Range": "bytes=0-9", "If-Range": tag])
        XCTAssertEqual(current.status, 206, "If-Range with the file's tag")
        let stale = try await RawHTTP.get(port: console.port, path: path, headers: ["Range": "bytes=0-9", "If-Range": #""0-0-0""#])
        XCTAssertEqual(stale.status, 200, "If-Range of another version: the whole file")
        XCTAssertEqual(stale.body, expected)

        let head = try await HTTP.get(method: "HEAD", port: console.port, path: path)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.headers["content-length"], "\(size)")
        XCTAssertEqual(head.headers["accept-ranges"], "bytes")
        XCTAssertEqual(head.body, "")
        let headRange = try await HTTP.get(method: "HEAD", port: console.port, path: path, headers: ["Range": "bytes=-10"])
        XCTAssertEqual(headRange.status, 206)
        XCTAssertEqual(headRange.headers["content-range"], "bytes \(size - 10)-\(size - 1)/\(size)")

        let nested = try await RawHTTP.get(port: console.port, path: "/api/recordings/file/" + Self.incomplete)
        XCTAssertEqual(nested.status, 200)
        XCTAssertEqual(nested.body, try bytes(Self.incomplete), "a file in the template's folders")
        XCTAssertEqual(nested.headers["content-disposition"], #"attachment; filename="desk_0900.caf""#)
    }

    func testPathsThatLeaveTheRecordingsAreRefused() async throws {
        let console = try await console()
        let cases: [(String, Int, UInt)] = [
            ("../outside.caf", 400, #line),
            ("%2e%2e/outside.caf", 400, #line),
            ("desk/../../outside.caf", 400, #line),
            ("desk/%2E%2E/%2E%2E/outside.caf", 400, #line),
            ("/etc/passwd", 400, #line),
            ("%2Fetc%2Fpasswd", 400, #line),
            ("./\(Self.complete)", 400, #line),
            ("desk//2026-11-28/desk_0900.caf", 400, #line),
            ("%00.caf", 400, #line),
            (".handoff/hidden.caf", 404, #line),
            (".streams/\(Self.micID.uuidString.lowercased())", 404, #line),
            ("link.caf", 404, #line),
            ("linked-folder/outside.caf", 404, #line),
            ("notes.txt", 404, #line),
            ("missing.caf", 404, #line),
            ("desk", 404, #line),
            (Self.live, 409, #line),
        ]
        for (path, status, line) in cases {
            let response = try await HTTP.get(port: console.port, path: "/api/recordings/file/" + path)
            XCTAssertEqual(response.status, status, path, line: line)
            XCTAssertTrue(response.body.hasPrefix(#"{"error":"#), response.body, line: line)
            let export = try await HTTP.get(port: console.port, path: "/api/recordings/export/\(path)?format=wav")
            XCTAssertEqual(export.status, status, "export of \(path)", line: line)
        }
    }

    // MARK: - Exports

    func testExportAsWAVDecodesToTheSameFramesAndLeavesNothingBehind() async throws {
        let temporary = work.appendingPathComponent("tmp").path
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let previous = ProcessInfo.processInfo.environment["TMPDIR"]
        setenv("TMPDIR", temporary + "/", 1)
        defer { if let previous { setenv("TMPDIR", previous, 1) } else { unsetenv("TMPDIR") } }
        XCTAssertEqual(NSTemporaryDirectory(), temporary + "/", "exports go to TMPDIR, watched here")
        let console = try await console()

        let response = try await RawHTTP.get(port: console.port, path: "/api/recordings/export/\(Self.complete)?format=wav")
        XCTAssertEqual(response.status, 200, String(decoding: response.body, as: UTF8.self))
        XCTAssertEqual(response.headers["content-type"], "audio/wav")
        XCTAssertEqual(response.headers["content-disposition"], #"attachment; filename="mic_20261127T100000Z.wav""#)
        XCTAssertEqual(response.headers["content-length"], "\(response.body.count)")
        let wav = work.appendingPathComponent("export.wav").path
        try Data(response.body).write(to: URL(fileURLWithPath: wav))
        if let soxi = ToolRunner.find("soxi") {
            let frames = try ToolRunner.run(soxi, ["-s", wav])
            XCTAssertEqual(frames.outputText.trimmingCharacters(in: .whitespacesAndNewlines), "96000", frames.errorText)
        } else if let ffprobe = ToolRunner.find("ffprobe") {
            let probe = try ToolRunner.run(ffprobe, ["-v", "error", "-show_entries", "stream=duration_ts", "-of", "csv=p=0", wav])
            XCTAssertEqual(probe.outputText.trimmingCharacters(in: .whitespacesAndNewlines), "96000", probe.errorText)
        } else {
            throw XCTSkip("neither sox nor ffprobe is installed")
        }

        let flac = try await RawHTTP.get(port: console.port, path: "/api/recordings/export/\(Self.incomplete)?format=flac")
        XCTAssertEqual(flac.status, 200)
        XCTAssertEqual(flac.headers["content-type"], "audio/flac")
        XCTAssertEqual(Array(flac.body.prefix(4)), Array("fLaC".utf8))

        let unknown = try await HTTP.get(port: console.port, path: "/api/recordings/export/\(Self.complete)?format=mp3")
        XCTAssertEqual(unknown.status, 400)
        XCTAssertTrue(unknown.body.contains("wav, rf64, flac, ogg"), unknown.body)
        let missing = try await HTTP.get(port: console.port, path: "/api/recordings/export/\(Self.complete)")
        XCTAssertEqual(missing.status, 400)
        XCTAssertTrue(missing.body.contains("wav, rf64, flac, ogg"), missing.body)
        let opusOnly = try await HTTP.get(port: console.port, path: "/api/recordings/export/\(Self.complete)?format=ogg")
        XCTAssertEqual(opusOnly.status, 422, opusOnly.body)

        // A client that goes away mid-export: the export is removed all the same.
        try record("long_20261126T000000Z.caf", stream: "long", id: UUID(), start: "2026-11-26T00:00:00.000Z", frames: 48_000 * 60)
        let cut = try await Self.offPoolBytes {
            try OpsHTTPClient.stream(port: console.port, path: "/api/recordings/export/long_20261126T000000Z.caf?format=wav", seconds: 0.3)
        }
        XCTAssertLessThan(cut.count, 48_000 * 60 * 4, "the client left before the end")

        // The exports went to the temporary folder, not beside the recording, and are gone.
        var left: [String] = []
        for _ in 0..<250 {
            left = try FileManager.default.contentsOfDirectory(atPath: temporary)
            if left.isEmpty { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(left, [], "the temporary exports are removed")
        let outFiles = try FileManager.default.subpathsOfDirectory(atPath: out).filter { $0.hasSuffix(".wav") || $0.hasSuffix(".flac") || $0.hasSuffix(".partial") }
        XCTAssertEqual(outFiles, [], "nothing written into the output folder")
    }

    // MARK: - Access

    func testEveryRecordingRouteNeedsTheTokenOffLoopback() async throws {
        let access = try ConsoleAccess(host: "0.0.0.0", tokens: AuthTokens(tokens: [Self.token]))
        let console = try await console(access: access, host: "0.0.0.0")
        for path in ["/api/recordings", "/api/recordings?stream=mic", "/api/recordings/file/\(Self.complete)", "/api/recordings/export/\(Self.complete)?format=wav"] {
            let refused = try await HTTP.get(port: console.port, path: path)
            XCTAssertEqual(refused.status, 401, path)
            XCTAssertFalse(refused.body.contains("mic"), "nothing of the recordings leaks: \(refused.body)")
            let wrong = try await HTTP.get(port: console.port, path: path, headers: ["Authorization": "Bearer guess"])
            XCTAssertEqual(wrong.status, 401, path)
        }
        let rows = try await listing(port: console.port, headers: ["Authorization": "Bearer \(Self.token)"])
        XCTAssertEqual(rows.count, 4)
        let cookie = "\(ConsoleAccess.cookieName)=\(ConsoleAccess.sessionValue(for: Self.token))"
        let download = try await RawHTTP.get(port: console.port, path: "/api/recordings/file/\(Self.complete)", headers: ["Cookie": cookie, "Range": "bytes=0-3"])
        XCTAssertEqual(download.status, 206)
        XCTAssertEqual(download.body, Array("caff".utf8))
    }

    // MARK: - The document

    func testTheOpenAPIDocumentDescribesTheRecordingsRoutesAndFields() async throws {
        let console = try await console()
        let document = try await HTTP.get(port: console.port, path: "/api/openapi.yaml")
        for path in ["/api/recordings:", "/api/recordings/file/{path}:", "/api/recordings/export/{path}:"] {
            XCTAssertTrue(document.body.contains("  \(path)\n"), path)
        }
        let rows = try await listing(port: console.port)
        let api = try String(contentsOf: Self.repository.appendingPathComponent("docs/HTTP-API.md"), encoding: .utf8)
        for key in rows.first?.keys.sorted() ?? [] {
            XCTAssertTrue(document.body.contains("\n        \(key):"), "the document describes \(key)")
            XCTAssertTrue(api.contains("| `\(key)`"), "docs/HTTP-API.md describes \(key)")
        }
    }

    private static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    // MARK: - A real client

    func testCurlDownloadsWholeAndByRange() async throws {
        guard let curl = ToolRunner.find("curl") else { throw XCTSkip("curl is not installed") }
        let console = try await console()
        let expected = try bytes(Self.complete)
        let url = "http://127.0.0.1:\(console.port)/api/recordings/file/\(Self.complete)"
        let part = work.appendingPathComponent("part").path
        let head = work.appendingPathComponent("head").path
        let whole = work.appendingPathComponent("whole").path
        try await Self.offPool {
            let ranged = try ToolRunner.run(curl, ["-s", "-S", "-r", "100-1099", "-o", part, "-D", head, url])
            XCTAssertEqual(ranged.exitStatus, 0, ranged.errorText)
            let plain = try ToolRunner.run(curl, ["-s", "-S", "-f", "-o", whole, url])
            XCTAssertEqual(plain.exitStatus, 0, plain.errorText)
        }
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: part))), Array(expected[100..<1100]))
        XCTAssertEqual([UInt8](try Data(contentsOf: URL(fileURLWithPath: whole))), expected)
        let headers = try String(contentsOfFile: head, encoding: .utf8).lowercased()
        XCTAssertTrue(headers.hasPrefix("http/1.1 206"), headers)
        XCTAssertTrue(headers.contains("content-range: bytes 100-1099/\(expected.count)"), headers)
    }

    private static func offPoolBytes(_ work: @escaping @Sendable () throws -> [UInt8]) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Runs blocking work (a tool) on a thread of its own, not the cooperative pool the server needs.
    private static func offPool(_ work: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }
}

/// A response with its body as bytes (the audio), read over a raw socket.
struct RawResponse {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
}

enum RawHTTP {
    static func get(port: Int, path: String, headers: [String: String] = [:]) async throws -> RawResponse {
        let raw = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
            Thread.detachNewThread {
                continuation.resume(with: Result { try OpsHTTPClient.stream(port: port, path: path, headers: headers, seconds: 20) })
            }
        }
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0...(max(0, raw.count - 4))).first(where: { Array(raw[$0..<min(raw.count, $0 + 4)]) == separator }) else {
            throw RawHTTPError("no header end in \(raw.count) bytes")
        }
        let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let parts = lines.first?.split(separator: " ") ?? []
        guard parts.count >= 2, let status = Int(parts[1]) else { throw RawHTTPError("bad status line \(lines.first ?? "")") }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(raw[(end + 4)...])
        if fields["transfer-encoding"]?.lowercased() == "chunked" { body = try dechunk(body) }
        return RawResponse(status: status, headers: fields, body: body)
    }

    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var body: [UInt8] = []
        var position = 0
        while position < bytes.count {
            guard let lineEnd = (position..<(bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                  let size = Int(String(decoding: bytes[position..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16)
            else { throw RawHTTPError("bad chunk") }
            if size == 0 { break }
            body += bytes[(lineEnd + 2)..<(lineEnd + 2 + size)]
            position = lineEnd + 2 + size + 2
        }
        return body
    }
}

struct RawHTTPError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
