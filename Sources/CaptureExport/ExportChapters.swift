import CAF
import Foundation

/// The markers the person recording dropped (protocol `Marker`, named `marker` or `marker: <label>`
/// in the CAF) as chapters in Vorbis comments, the de facto chapter convention of FLAC and Ogg
/// (`CHAPTER001=00:01:02.500`, `CHAPTER001NAME=interview starts`), which ffmpeg and players read
/// as chapters. Gaps are not chapters: they stay cue points in Broadcast Wave only.
enum ExportChapters {
    /// Chapters a Vorbis comment header holds at most (three digits).
    static let maximum = 999

    /// The comments for the user markers in `markers` on the export's timeline (stored frames less
    /// `leadingFrames`, inside `0...validFrames`), in order, at `sampleRate`. An unlabelled marker is
    /// named `marker N`.
    static func comments(_ markers: [CAFMarker], leadingFrames: Int64, validFrames: Int64, sampleRate: Int) -> [String] {
        let points = markers.compactMap { marker -> (position: Int64, label: String)? in
            guard let label = marker.userLabel else { return nil }
            // The reader keeps positions in 0..<2^62 and priming is an Int32: no overflow.
            let position = marker.framePosition - leadingFrames
            guard position >= 0, position <= validFrames else { return nil }
            return (position, label)
        }.sorted { $0.position < $1.position }.prefix(maximum)
        var comments: [String] = []
        for (index, point) in points.enumerated() {
            let number = String(index + 1)
            let key = "CHAPTER" + String(repeating: "0", count: max(0, 3 - number.count)) + number
            comments.append("\(key)=\(time(frames: point.position, sampleRate: sampleRate))")
            comments.append("\(key)NAME=\(point.label.isEmpty ? "marker \(index + 1)" : point.label)")
        }
        return comments
    }

    /// `frames` at `sampleRate` as HH:MM:SS.mmm (hours grow past 99 when they must), rounded down
    /// to the millisecond.
    static func time(frames: Int64, sampleRate: Int) -> String {
        let milliseconds = frames * 1_000 / Int64(max(sampleRate, 1))
        let hours = milliseconds / 3_600_000
        let minutes = milliseconds / 60_000 % 60
        let seconds = milliseconds / 1_000 % 60
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = milliseconds % 1_000
        let millis = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(two(hours)):\(two(minutes)):\(two(seconds)).\(millis)"
    }
}

/// Adds Vorbis comments to a FLAC file that libsndfile wrote and closed (libsndfile sets only its
/// fixed strings: title, date, comment...): the `VORBIS_COMMENT` metadata block is rewritten with
/// the comments added (one is made when there is none), and the file is rewritten behind it.
enum FLACComments {
    static let vorbisCommentType: UInt8 = 4
    static let maximumBlock = (1 << 24) - 1

    /// Adds `comments` to the FLAC file at `path` (naming `destination` in errors).
    static func add(_ comments: [String], to path: String, destination: String) throws(ExportError) {
        guard !comments.isEmpty else { return }
        func failed(_ reason: String) -> ExportError { .writeFailed("cannot write \(destination): adding its chapters failed (\(reason))") }
        guard let input = FileHandle(forReadingAtPath: path) else { throw failed("it cannot be reopened") }
        defer { try? input.close() }
        let rewritten = path + ".chapters"
        do {
            guard try input.read(upToCount: 4) == Data("fLaC".utf8) else { throw failed("libsndfile did not write a FLAC stream") }
            var blocks: [(type: UInt8, body: Data)] = []
            var last = false
            while !last {
                guard let header = try input.read(upToCount: 4), header.count == 4 else { throw failed("its metadata is cut off") }
                last = header[header.startIndex] & 0x80 != 0
                let length = header.dropFirst().reduce(0) { $0 << 8 | Int($1) }
                let body = try input.read(upToCount: length) ?? Data()
                guard body.count == length else { throw failed("a metadata block is cut off") }
                blocks.append((header[header.startIndex] & 0x7F, body))
            }
            if let index = blocks.firstIndex(where: { $0.type == vorbisCommentType }) {
                blocks[index].body = try adding(comments, to: blocks[index].body)
            } else {
                blocks.append((vorbisCommentType, try adding(comments, to: nil)))
            }
            guard FileManager.default.createFile(atPath: rewritten, contents: nil), let output = FileHandle(forWritingAtPath: rewritten) else {
                throw failed("\(rewritten) cannot be created")
            }
            defer { try? output.close() }
            var head = Data("fLaC".utf8)
            for (index, block) in blocks.enumerated() {
                guard block.body.count <= maximumBlock else { throw failed("a metadata block would exceed 16 MiB") }
                let isLast = index == blocks.count - 1
                head.append(block.type | (isLast ? 0x80 : 0))
                head.append(contentsOf: [UInt8(block.body.count >> 16 & 0xFF), UInt8(block.body.count >> 8 & 0xFF), UInt8(block.body.count & 0xFF)])
                head.append(block.body)
            }
            try output.write(contentsOf: head)
            while let piece = try input.read(upToCount: 1 << 20), !piece.isEmpty {
                try output.write(contentsOf: piece)
            }
        } catch let error as ExportError {
            try? FileManager.default.removeItem(atPath: rewritten)
            throw error
        } catch {
            try? FileManager.default.removeItem(atPath: rewritten)
            throw failed(error.localizedDescription)
        }
        guard rename(rewritten, path) == 0 else {
            try? FileManager.default.removeItem(atPath: rewritten)
            throw failed("the rewritten file cannot replace the first")
        }
    }

    /// A `VORBIS_COMMENT` body (vendor, count, comments; little-endian lengths) with `comments`
    /// added after those of `body` (a new one, vendor "capture-recv", when nil).
    static func adding(_ comments: [String], to body: Data?) throws(ExportError) -> Data {
        var vendor = Data("capture-recv".utf8)
        var existing: [Data] = []
        if let body {
            var offset = body.startIndex
            func le32() throws(ExportError) -> Int {
                guard offset + 4 <= body.endIndex else { throw .writeFailed("libsndfile wrote a Vorbis comment block that is cut off") }
                defer { offset += 4 }
                return (0..<4).reduce(0) { $0 | Int(body[offset + $1]) << (8 * $1) }
            }
            let vendorLength = try le32()
            guard offset + vendorLength <= body.endIndex else { throw .writeFailed("libsndfile wrote a Vorbis comment block that is cut off") }
            vendor = body[offset..<(offset + vendorLength)]
            offset += vendorLength
            let count = try le32()
            for _ in 0..<count {
                let length = try le32()
                guard offset + length <= body.endIndex else { throw .writeFailed("libsndfile wrote a Vorbis comment block that is cut off") }
                existing.append(body[offset..<(offset + length)])
                offset += length
            }
        }
        let all = existing + comments.map { Data($0.utf8) }
        var result = Data(RIFFLabels.le32(UInt32(vendor.count))) + vendor + Data(RIFFLabels.le32(UInt32(all.count)))
        for comment in all { result += Data(RIFFLabels.le32(UInt32(comment.count))) + comment }
        return result
    }
}
