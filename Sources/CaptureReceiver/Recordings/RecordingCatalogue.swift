#if canImport(Glibc)
import Glibc
#endif
import CAF
import CaptureCore
import Foundation
import Synchronization

/// One finished recording in the output folder, as the console's recordings view lists it
/// (`GET /api/recordings`, docs/HTTP-API.md "Recordings").
public struct RecordingListing: Sendable, Equatable, Encodable {
    /// The file's path relative to the output folder (`/`-separated; a `--name-template` makes folders).
    public var path: String
    /// The stream's name (the `info` chunk's `title`).
    public var stream: String
    /// The stream's id (the `info` chunk's `stream id`), empty when the file has none.
    public var streamID: String
    /// UTC time of the file's first valid sample, ISO 8601 with milliseconds (`first sample time`,
    /// else `recorded date`); nil when the file says neither.
    public var start: String?
    /// Seconds of audio: `frames` over the sample rate.
    public var durationSeconds: Double
    /// Valid frames: for Opus the packet table's valid frames (priming and remainder left out).
    public var frames: Int64
    public var sampleRate: Double
    public var channels: Int
    /// The format in a few words (`s16 48000 Hz 2 ch`, `opus 48000 Hz 2 ch, 960 frames/packet`).
    public var format: String
    /// Gap markers in the file (the receiver's `gap: N frames not captured (REASON)`, pauses included).
    public var gapCount: Int
    /// The gaps' lengths in seconds, as their markers say (a gap that runs on into the next segment
    /// counts whole in the file where it begins).
    public var gapSeconds: Double
    /// Every other marker of the `mark` chunk (markers from the field, whatever their names).
    public var markerCount: Int
    /// The file's size in bytes.
    public var bytes: Int64
    /// The file's last modification, ISO 8601 UTC.
    public var modified: String
    /// True: the file ended with its stream's end, or where a segment was cut; false: finalized
    /// without its end (its sender did not come back within the resume window); nil: no longer known
    /// (the stream's index record leaves `OUT/.streams` one resume window after the stream finished).
    public var complete: Bool?

    /// The time `start` names, for sorting and the day filter.
    var startDate: Date?
    /// The stream this file's stream continues (its `info` `continues stream id`), lowercased.
    var continues: String?

    enum CodingKeys: String, CodingKey {
        case path, stream, streamID = "stream_id", start, durationSeconds = "duration_seconds", frames, sampleRate = "sample_rate"
        case channels, format, gapCount = "gap_count", gapSeconds = "gap_seconds", markerCount = "marker_count", bytes, modified, complete
    }

    /// Every key always present: `start` and `complete` as `null` when unknown.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(stream, forKey: .stream)
        try container.encode(streamID, forKey: .streamID)
        try container.encode(start, forKey: .start)
        try container.encode(durationSeconds, forKey: .durationSeconds)
        try container.encode(frames, forKey: .frames)
        try container.encode(sampleRate, forKey: .sampleRate)
        try container.encode(channels, forKey: .channels)
        try container.encode(format, forKey: .format)
        try container.encode(gapCount, forKey: .gapCount)
        try container.encode(gapSeconds, forKey: .gapSeconds)
        try container.encode(markerCount, forKey: .markerCount)
        try container.encode(bytes, forKey: .bytes)
        try container.encode(modified, forKey: .modified)
        try container.encode(complete, forKey: .complete)
    }

    /// The UTC day (`YYYY-MM-DD`) the recording starts on.
    public var day: String? { start.map { String($0.prefix(10)) } }
}

/// A finished recording found for serving: where it is and what identifies its bytes.
public struct FinishedRecordingFile: Sendable, Equatable {
    /// Its absolute path.
    public var path: String
    /// Its file name (the last component of its relative path).
    public var name: String
    public var size: Int64
    public var modified: Date
    /// A strong entity tag of this version of the file (inode, size, modification time), quoted.
    public var entityTag: String
}

/// Which recordings to list: both filters optional.
public struct RecordingQuery: Sendable, Equatable {
    /// Only the recordings of streams of this name (exact).
    public var stream: String?
    /// Only the recordings that start on this UTC day, `YYYY-MM-DD`.
    public var day: String?

    /// A query; `day` must be a calendar date written `YYYY-MM-DD`.
    public init(stream: String?, day: String?) throws(RecordingQueryError) {
        if let day {
            guard Self.isDay(day) else { throw .badDay(day) }
        }
        self.init(checkedStream: stream, day: day)
    }

    private init(checkedStream stream: String?, day: String?) {
        self.stream = stream
        self.day = day
    }

    /// Every recording.
    public static var all: RecordingQuery { RecordingQuery(checkedStream: nil, day: nil) }

    /// `YYYY-MM-DD`, a real date (2026-02-30 is not).
    static func isDay(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]), (1...12).contains(month), day >= 1
        else { return false }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        return day <= lengths[month - 1]
    }

    func matches(_ listing: RecordingListing) -> Bool {
        if let stream, listing.stream != stream { return false }
        if let day, listing.day != day { return false }
        return true
    }
}

/// Why a recordings query was refused.
public enum RecordingQueryError: Error, Equatable, Sendable, CustomStringConvertible {
    case badDay(String)

    public var description: String {
        switch self {
        case .badDay(let text):
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            return "day \(shown.debugDescription) is not a date: write it YYYY-MM-DD (a UTC day, e.g. 2026-11-28)"
        }
    }
}

/// Why a recording path cannot be served.
public enum RecordingPathError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A path that is no relative path inside the output folder (`..`, absolute, a NUL): 400.
    case invalid(String)
    /// No finished recording there (missing, not a `.caf`, in a hidden folder, a symbolic link
    /// leaving the output folder): 404.
    case notFound(String)
    /// The file is still being recorded (or can still be resumed): 409.
    case inProgress(String)

    public var description: String {
        switch self {
        case .invalid(let path): return "\(path.debugDescription) is not a recording's path: give the path relative to the output folder, as /api/recordings lists it"
        case .notFound(let path): return "no finished recording \(path.debugDescription) in the output folder"
        case .inProgress(let path): return "\(path.debugDescription) is still being recorded (or waits for its stream to resume): it is listed once it is finished"
        }
    }
}

/// The finished recordings of a receiver's output folder (`--out`), for the console's recordings
/// view: every `.caf` in it and its folders, hidden folders (`.streams`, `.handoff`, `.commit-log`,
/// `.alarm-hook`...) and hidden files left out, symbolic links not followed.
///
/// A file that is still recorded, or can still be resumed (a packet journal or a position log
/// beside it, as `ResumableFiles.isUnfinished` says), is not listed: the live streams are in
/// `/api/streams`. Each file's header is read once and kept, keyed by its size, modification time
/// and inode: a listing reads the folders and only the headers of new or changed files. Whether a
/// file is complete comes from the stream index (`OUT/.streams`, `FinishedStreamRecord`) while it
/// keeps the stream's record (one resume window), then from the files themselves: a segment its
/// stream went on from is complete, the last file of a stream another continues (`continues stream
/// id`) is not, and anything else is no longer known (nil).
///
/// Every method blocks on the file system: call them off the event loops (the console runs them on
/// NIO's thread pool). Safe from any thread.
public final class RecordingCatalogue: Sendable {
    /// The output folder.
    public let outputDirectory: String

    /// What a file's header says, kept while the file is unchanged.
    struct Header: Sendable {
        var stat: FileStamp
        var stream: String
        var streamID: String
        var start: String?
        var startDate: Date?
        var frames: Int64
        var sampleRate: Double
        var channels: Int
        var format: String
        var gapCount: Int
        var gapFrames: Int64
        var markerCount: Int
        /// The stream this file's stream continues (`continues stream id`): that one was finalized
        /// without its end.
        var continues: String?
    }

    /// A file's identity and state: a header read for the same stamp is still right.
    struct FileStamp: Sendable, Equatable {
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int
        var inode: UInt64

        var modified: Date { Date(timeIntervalSince1970: Double(modifiedSeconds) + Double(modifiedNanoseconds) / 1e9) }
    }

    /// A file's header as read for its stamp; nil when the reader refused the file.
    struct Cached: Sendable {
        var stamp: FileStamp
        var header: Header?
    }

    private let headers = Mutex<[String: Cached]>([:])
    /// Headers read from disk so far (the tests check the cache with it).
    private let reads = Atomic<Int>(0)

    public init(outputDirectory: String) {
        self.outputDirectory = outputDirectory
    }

    /// Headers read from disk since the catalogue was made.
    public var headerReads: Int { reads.load(ordering: .relaxed) }

    /// The finished recordings that match `query`, newest first (by start time, then path).
    public func recordings(matching query: RecordingQuery = .all) -> [RecordingListing] {
        let files = Self.finishedFiles(in: outputDirectory)
        var seen: [String: Cached] = [:]
        let known = headers.withLock { $0 }
        var listings: [RecordingListing] = []
        for file in files {
            let cached: Cached
            if let earlier = known[file.relative], earlier.stamp == file.stamp {
                cached = earlier
            } else {
                cached = Cached(stamp: file.stamp, header: readHeader(path: file.absolute, stamp: file.stamp))
            }
            seen[file.relative] = cached
            // A file the reader refuses (damaged, not a CAF, never finalized) is not listed, and
            // not read again until it changes.
            guard let header = cached.header else { continue }
            listings.append(Self.listing(file: file, header: header))
        }
        // Files gone or changed leave the cache with this listing.
        headers.withLock { $0 = seen }
        resolveCompleteness(&listings)
        return listings.filter(query.matches).sorted(by: Self.newestFirst)
    }

    /// The finished recording at `relativePath` (as listed), refusing any path that is not a
    /// finished `.caf` inside the output folder.
    public func resolve(relativePath: String) throws(RecordingPathError) -> FinishedRecordingFile {
        let components = relativePath.split(separator: "/", omittingEmptySubsequences: false)
        guard !relativePath.isEmpty, !relativePath.hasPrefix("/"), !relativePath.utf8.contains(0),
              !components.contains(where: { $0 == ".." || $0 == "." || $0.isEmpty })
        else { throw .invalid(relativePath) }
        guard relativePath.hasSuffix(".caf"), !components.contains(where: { $0.hasPrefix(".") }) else { throw .notFound(relativePath) }
        let path = (outputDirectory as NSString).appendingPathComponent(relativePath)
        var status = stat()
        // The file itself is no symbolic link; its folders may be, if they stay inside.
        guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { throw .notFound(relativePath) }
        guard let root = Self.realPath(outputDirectory), let real = Self.realPath(path), real.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
            throw .notFound(relativePath)
        }
        if FileManager.default.fileExists(atPath: CAFWriter.journalPath(for: path)) || FileManager.default.fileExists(atPath: StreamPositionLog.path(for: path)) {
            throw .inProgress(relativePath)
        }
        let modified = Date(timeIntervalSince1970: Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9)
        let tag = "\"\(String(UInt64(status.st_ino), radix: 16))-\(String(Int64(status.st_size), radix: 16))-\(String(Int(status.st_mtim.tv_sec), radix: 16))\(String(Int(status.st_mtim.tv_nsec), radix: 16))\""
        return FinishedRecordingFile(path: path, name: (relativePath as NSString).lastPathComponent, size: Int64(status.st_size), modified: modified, entityTag: tag)
    }

    // MARK: - Walking the folder

    /// A `.caf` found in the folder.
    struct FoundFile {
        var relative: String
        var absolute: String
        var stamp: FileStamp
    }

    /// The regular `.caf` files under `directory` that have neither a journal nor a position log
    /// beside them. Hidden names are skipped; links are not followed.
    static func finishedFiles(in directory: String) -> [FoundFile] {
        let journalSuffix = CAFWriter.journalPath(for: "")
        let positionSuffix = StreamPositionLog.path(for: "")
        var found: [FoundFile] = []
        var folders: [(absolute: String, relative: String)] = [(directory, "")]
        while let folder = folders.popLast() {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.absolute) else { continue }
            // The sidecars are in the same listing: no extra look-up per file.
            let all = Set(names)
            for name in names where !name.hasPrefix(".") {
                let absolute = (folder.absolute as NSString).appendingPathComponent(name)
                let relative = folder.relative.isEmpty ? name : folder.relative + "/" + name
                var status = stat()
                guard lstat(absolute, &status) == 0 else { continue }
                switch status.st_mode & S_IFMT {
                case S_IFDIR:
                    folders.append((absolute, relative))
                case S_IFREG where name.hasSuffix(".caf"):
                    if all.contains(name + journalSuffix) || all.contains(name + positionSuffix) { continue }
                    let stamp = FileStamp(
                        size: Int64(status.st_size), modifiedSeconds: Int(status.st_mtim.tv_sec), modifiedNanoseconds: Int(status.st_mtim.tv_nsec),
                        inode: UInt64(status.st_ino))
                    found.append(FoundFile(relative: relative, absolute: absolute, stamp: stamp))
                default:
                    continue
                }
            }
        }
        return found
    }

    /// The header of the file at `path`; nil for a file the CAF reader refuses (damaged, not a CAF)
    /// or that is not finalized.
    private func readHeader(path: String, stamp: FileStamp) -> Header? {
        reads.add(1, ordering: .relaxed)
        guard let file = try? CAFFile.read(path: path), file.isFinalized else { return nil }
        func value(_ key: String) -> String? { file.info.first(where: { $0.key == key })?.value }
        let start = value("first sample time") ?? value("recorded date")
        let frames = file.format.isVariableBitRate ? (file.packetTable?.validFrames ?? 0) : (file.totalFrames ?? 0)
        var gapCount = 0
        var gapFrames: Int64 = 0
        var markerCount = 0
        for marker in file.markers {
            if let length = Self.gapLength(marker.name) {
                gapCount += 1
                gapFrames += length
            } else {
                markerCount += 1
            }
        }
        return Header(
            stat: stamp, stream: value("title") ?? "", streamID: value("stream id") ?? "", start: start, startDate: start.flatMap(Self.parseTime),
            frames: frames, sampleRate: file.format.sampleRate, channels: file.format.channelCount, format: file.format.description,
            gapCount: gapCount, gapFrames: gapFrames, markerCount: markerCount, continues: value("continues stream id"))
    }

    /// The frames a gap marker's name says are missing (`gap: 480 frames not captured (overrun)`);
    /// nil for a marker that is no gap. A gap marker whose length cannot be read counts as 0 frames.
    static func gapLength(_ name: String) -> Int64? {
        guard name.hasPrefix("gap: ") else { return nil }
        let number = name.dropFirst("gap: ".count).prefix { $0.isASCII && $0.isNumber }
        return Int64(number).map { max(0, $0) } ?? 0
    }

    private static func listing(file: FoundFile, header: Header) -> RecordingListing {
        let rate = header.sampleRate > 0 ? header.sampleRate : 1
        return RecordingListing(
            path: file.relative, stream: header.stream, streamID: header.streamID, start: header.start,
            durationSeconds: Double(header.frames) / rate, frames: header.frames, sampleRate: header.sampleRate, channels: header.channels,
            format: header.format, gapCount: header.gapCount, gapSeconds: Double(header.gapFrames) / rate, markerCount: header.markerCount,
            bytes: file.stamp.size, modified: isoTime(file.stamp.modified), complete: nil, startDate: header.startDate,
            continues: header.continues?.lowercased())
    }

    // MARK: - Complete or not

    /// Sets `complete`: from the stream index's finished record of the file's stream while it is
    /// kept; else true for a file its stream has a later one of (a segment cut at a boundary), and
    /// false for the last file of a stream another stream continues (the receiver continues only a
    /// stream it finalized without its end, PROTOCOL.md §8.1).
    private func resolveCompleteness(_ listings: inout [RecordingListing]) {
        let index = StreamIndex(outputDirectory: outputDirectory)
        let indexed = Set(index.streams())
        var records: [String: FinishedStreamRecord] = [:]
        let continued = Set(listings.compactMap(\.continues))
        var latest: [String: Date] = [:]
        for listing in listings where !listing.streamID.isEmpty {
            if let date = listing.startDate { latest[listing.streamID] = max(latest[listing.streamID] ?? date, date) }
        }
        for stream in Set(listings.map(\.streamID)) {
            guard let id = UUID(uuidString: stream), indexed.contains(id),
                  let text = try? String(contentsOfFile: index.entryPath(id), encoding: .utf8),
                  case .finished(let record)? = StreamIndexEntry(text: text)?.stream
            else { continue }
            records[stream] = record
        }
        for position in listings.indices {
            let listing = listings[position]
            if let record = records[listing.streamID], record.relativePath == listing.path {
                listings[position].complete = record.complete
            } else if let date = listing.startDate, let last = latest[listing.streamID], date < last {
                listings[position].complete = true
            } else if continued.contains(listing.streamID.lowercased()) {
                listings[position].complete = false
            }
        }
    }

    // MARK: - Helpers

    static func newestFirst(_ a: RecordingListing, _ b: RecordingListing) -> Bool {
        switch (a.startDate, b.startDate) {
        case (let x?, let y?) where x != y: return x > y
        case (.some, nil): return true
        case (nil, .some): return false
        default: return a.path < b.path
        }
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The times of `info` (`2026-11-24T10:00:01.500Z`, or without the milliseconds).
    static func parseTime(_ text: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)) ?? (try? Date.ISO8601FormatStyle().parse(text))
    }

    static func isoTime(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }
}
