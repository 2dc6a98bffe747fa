import CaptureErrorText
import CaptureCore
import Foundation

/// Why the spool could not be used; each message says what to do.
public struct SpoolError: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }

    init(_ error: DurableFileError) { description = "spool: \(error.description)" }
}

/// What a stream's spool must remember to deliver the stream after a restart: its identity and
/// the handshake's description. Stored as `meta.json` in the stream's spool folder.
public struct SpoolMeta: Codable, Sendable, Equatable {
    public var version = 1
    public var streamID: UUID
    public var streamName: String
    public var sampleRate: Double
    public var formatID: UInt32
    public var formatFlags: UInt32
    public var bytesPerPacket: UInt32
    public var framesPerPacket: UInt32
    public var bytesPerFrame: UInt32
    public var channelsPerFrame: UInt32
    public var bitsPerChannel: UInt32
    public var magicCookie: [UInt8]
    public var primingFrames: Int
    /// UTC time of sample 0, seconds since 1970.
    public var startTime: Double

    public init(streamID: UUID, streamName: String, description: StreamDescription) {
        self.streamID = streamID
        self.streamName = streamName
        let format = description.format
        sampleRate = format.sampleRate
        formatID = format.formatID.rawValue
        formatFlags = format.formatFlags.rawValue
        bytesPerPacket = format.bytesPerPacket
        framesPerPacket = format.framesPerPacket
        bytesPerFrame = format.bytesPerFrame
        channelsPerFrame = format.channelsPerFrame
        bitsPerChannel = format.bitsPerChannel
        magicCookie = description.magicCookie
        primingFrames = description.primingFrames
        startTime = description.startTime.timeIntervalSince1970
    }

    /// The stream's description for the handshake.
    public var streamDescription: StreamDescription {
        StreamDescription(
            format: StreamFormat(
                sampleRate: sampleRate, formatID: AudioFormatID(rawValue: formatID), formatFlags: AudioFormatFlags(rawValue: formatFlags),
                bytesPerPacket: bytesPerPacket, framesPerPacket: framesPerPacket, bytesPerFrame: bytesPerFrame,
                channelsPerFrame: channelsPerFrame, bitsPerChannel: bitsPerChannel),
            magicCookie: magicCookie, primingFrames: primingFrames, startTime: Date(timeIntervalSince1970: startTime))
    }
}

/// Where a spooled entry is: its segment (named by its first sequence), offset and record length.
public struct SpoolLocation: Sendable, Equatable {
    public var segment: UInt64
    public var offset: Int64
    public var length: Int
}

/// What a stream's spool holds, read back after a restart.
public struct SpoolContents: Sendable {
    /// The kept entries (sequence, where it is, payload bytes), oldest first, contiguous.
    public var entries: [(sequence: UInt64, location: SpoolLocation, bytes: Int)]
    /// The end of the stream, if capture had ended.
    public var end: StreamEnd?
    /// The highest sequence the receiver acknowledged, as last recorded.
    public var acknowledged: UInt64
    /// The sample index just past the last entry in the spool (acknowledged or not); 0 when none.
    public var endOfLastEntry: Int64
}

/// One stream's disk spool: a folder `<root>/<stream-uuid>/` holding `meta.json`, a `lock` file
/// (flock'ed by the process that owns the stream), an `acked` file (the highest acknowledged
/// sequence, 8 bytes big-endian) and segment files `seg-<first sequence, 20 digits>.spool` of
/// records (see `SpoolRecord`: UInt32 body length, `RecordChecksum` of the body, body). Segments roll
/// over at `segmentBytes`; the whole folder is deleted once the receiver confirmed the end of the
/// stream.
///
/// A segment whose entries are all acknowledged is not deleted but renamed `spare.spool` (one at
/// most; further ones are deleted), and the next segment is that file renamed again and written over
/// from its start. Writing over pages the file already has costs the kernel a fraction of filling
/// new ones. A reused segment still holds older records behind the ones written since; they have
/// lower sequence numbers than the segment's name, so reading back stops at the first record whose
/// sequence is not the next one expected.
///
/// Thread-safe: appends come from the log's spool queue, reads from the network's event loop.
public final class StreamSpool: @unchecked Sendable {
    /// The stream's spool folder.
    public let directory: String
    /// The stream's identity and description.
    public let meta: SpoolMeta
    /// Segment size at which a new segment starts.
    public let segmentBytes: Int64

    private let lock = NSLock()
    private let lockFile: DurableFile
    private var segments: [(first: UInt64, file: DurableFile, length: Int64)] = []
    /// An acknowledged segment kept open for reuse as the next one.
    private var spare: DurableFile?
    private var ackedFile: DurableFile?
    private var diskBytes: Int64 = 0

    private init(directory: String, meta: SpoolMeta, lockFile: DurableFile, segmentBytes: Int64) {
        self.directory = directory
        self.meta = meta
        self.lockFile = lockFile
        self.segmentBytes = segmentBytes
    }

    /// The default spool root: `$XDG_STATE_HOME/capture-send/spool`, else
    /// `~/.local/state/capture-send/spool`.
    public static var defaultRoot: String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return (state as NSString).appendingPathComponent("capture-send/spool")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return (home as NSString).appendingPathComponent(".local/state/capture-send/spool")
    }

    /// Creates the spool folder of a new stream under `root`, locked by this process.
    public static func create(root: String, meta: SpoolMeta, segmentBytes: Int64 = 16 << 20) throws(SpoolError) -> StreamSpool {
        let directory = (root as NSString).appendingPathComponent(meta.streamID.uuidString.lowercased())
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw SpoolError("cannot create the spool folder \(directory): \(SystemErrorText.describe(error)); choose another with --spool DIR")
        }
        do throws(DurableFileError) {
            let lockFile = try DurableFile.open(path: (directory as NSString).appendingPathComponent("lock"), create: true)
            guard lockFile.tryLock() else { throw DurableFileError(operation: "locking", path: directory, code: EWOULDBLOCK) }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            guard let json = try? encoder.encode(meta) else { throw DurableFileError(operation: "encoding", path: directory, code: EINVAL) }
            try DurableFile.replaceAtomically(path: (directory as NSString).appendingPathComponent("meta.json"), with: Array(json))
            try DurableFile.synchronizeDirectory(root)
            return StreamSpool(directory: directory, meta: meta, lockFile: lockFile, segmentBytes: segmentBytes)
        } catch {
            throw SpoolError(error)
        }
    }

    /// Opens an earlier stream's spool folder for delivery. Returns nil when another running
    /// capture-send owns it (its lock is taken) or it holds no stream.
    public static func openEarlier(directory: String) throws(SpoolError) -> StreamSpool? {
        let metaPath = (directory as NSString).appendingPathComponent("meta.json")
        guard let data = FileManager.default.contents(atPath: metaPath) else { return nil }
        do throws(DurableFileError) {
            let lockFile = try DurableFile.open(path: (directory as NSString).appendingPathComponent("lock"), create: true)
            guard lockFile.tryLock() else { return nil }
            guard let meta = try? JSONDecoder().decode(SpoolMeta.self, from: data) else {
                throw DurableFileError(operation: "reading the stream description", path: metaPath, code: EINVAL)
            }
            return StreamSpool(directory: directory, meta: meta, lockFile: lockFile, segmentBytes: 16 << 20)
        } catch {
            throw SpoolError(error)
        }
    }

    /// The stream folders under `root` (each may hold an earlier stream).
    public static func streamDirectories(root: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.filter { UUID(uuidString: $0) != nil }.sorted().map { (root as NSString).appendingPathComponent($0) }
    }

    /// Bytes the spool's live segments take on disk.
    public var bytesOnDisk: Int64 { lock.withLock { diskBytes } }

    /// Appends an entry; returns where it is.
    public func append(_ entry: LoggedPacket) throws(SpoolError) -> SpoolLocation {
        try append(record: .entry(entry), sequence: entry.sequence)
    }

    /// Records the end of the stream after `lastSequence`.
    public func appendEnd(_ end: StreamEnd, lastSequence: UInt64) throws(SpoolError) {
        _ = try append(record: .end(end, lastSequence: lastSequence), sequence: lastSequence + 1)
    }

    private func append(record: SpoolRecord, sequence: UInt64) throws(SpoolError) -> SpoolLocation {
        let framed = record.framed()
        lock.lock()
        defer { lock.unlock() }
        do throws(DurableFileError) {
            if segments.isEmpty || segments[segments.count - 1].length >= segmentBytes {
                segments.append((sequence, try newSegment(first: sequence), 0))
            }
            let index = segments.count - 1
            let offset = segments[index].length
            try segments[index].file.write(framed.head, framed.payload, at: offset)
            segments[index].length += Int64(framed.count)
            diskBytes += Int64(framed.count)
            return SpoolLocation(segment: segments[index].first, offset: offset, length: framed.count)
        } catch {
            throw SpoolError(error)
        }
    }

    /// The file for a segment starting at `first`: the spare renamed, or else a new file.
    private func newSegment(first: UInt64) throws(DurableFileError) -> DurableFile {
        let path = segmentPath(first)
        guard let reused = spare else { return try DurableFile.open(path: path, create: true, truncate: true) }
        spare = nil
        do throws(DurableFileError) {
            try reused.rename(to: path)
            return reused
        } catch {
            reused.close()
            try? DurableFile.remove(reused.path)
            return try DurableFile.open(path: path, create: true, truncate: true)
        }
    }

    private func segmentPath(_ first: UInt64) -> String {
        (directory as NSString).appendingPathComponent(String(format: "seg-%020llu.spool", first))
    }

    /// Reads entry `sequence`, spooled at `location`.
    public func read(_ location: SpoolLocation, sequence: UInt64) throws(SpoolError) -> LoggedPacket {
        // Under the lock: a segment acknowledged meanwhile may be reused and written over.
        lock.lock()
        defer { lock.unlock() }
        guard let file = segments.first(where: { $0.first == location.segment })?.file else {
            throw SpoolError("spool: segment \(location.segment) of \(directory) is gone")
        }
        do throws(DurableFileError) {
            let bytes = try file.read(count: location.length, at: location.offset)
            guard bytes.count == location.length, case .entry(let entry)? = Self.parse(bytes[...]).first?.record, entry.sequence == sequence else {
                throw DurableFileError(operation: "reading a damaged record of", path: directory, code: EIO)
            }
            return entry
        } catch {
            throw SpoolError(error)
        }
    }

    /// Makes everything appended durable (fdatasync of the current segment).
    public func synchronize() throws(SpoolError) {
        let current = lock.withLock { segments.last?.file }
        do throws(DurableFileError) {
            try current?.synchronize()
        } catch {
            throw SpoolError(error)
        }
    }

    /// The receiver holds everything through `sequence`: records it and retires every segment whose
    /// entries are all acknowledged (never the segment being written), keeping one as the spare.
    public func acknowledge(through sequence: UInt64) {
        lock.withLock {
            var value = BinaryRecordWriter()
            value.append(sequence)
            if ackedFile == nil { ackedFile = try? DurableFile.open(path: (directory as NSString).appendingPathComponent("acked"), create: true) }
            try? ackedFile?.write(value.bytes, at: 0)
            while segments.count > 1, segments[1].first <= sequence + 1 {
                let gone = segments.removeFirst()
                diskBytes -= gone.length
                if spare == nil, (try? gone.file.rename(to: (directory as NSString).appendingPathComponent("spare.spool"))) != nil {
                    spare = gone.file
                } else {
                    gone.file.close()
                    try? DurableFile.remove(gone.file.path)
                }
            }
        }
    }

    /// Reads back everything the spool holds (after a restart), opening its segments for reading.
    /// A torn record at the end of the last segment (a crash mid-write) ends the contents.
    public func contents() throws(SpoolError) -> SpoolContents {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("seg-") && $0.hasSuffix(".spool") }.sorted()
        var acknowledged: UInt64 = 0
        var entries: [(sequence: UInt64, location: SpoolLocation, bytes: Int)] = []
        var end: StreamEnd?
        var endOfLastEntry: Int64 = 0
        lock.lock()
        defer { lock.unlock() }
        do throws(DurableFileError) {
            if let acked = try DurableFile.openForReading(path: (directory as NSString).appendingPathComponent("acked")) {
                var reader = BinaryRecordReader(try acked.read(count: 8, at: 0)[...])
                acknowledged = reader.readUInt64() ?? 0
            }
            for name in names {
                guard let first = UInt64(name.dropFirst(4).dropLast(6)) else { continue }
                let path = (directory as NSString).appendingPathComponent(name)
                let file = try DurableFile.open(path: path, create: false)
                let length = try file.length()
                let bytes = try file.read(count: Int(length), at: 0)
                var offset = 0
                // The segment's records run from `first` on; a record out of that run is older
                // content of a reused segment (or damage), and ends the segment.
                var expected = first
                records: for (record, size) in Self.parse(bytes[...]) {
                    switch record {
                    case .entry(let entry):
                        guard entry.sequence == expected else { break records }
                        expected += 1
                        endOfLastEntry = entry.endSampleTime
                        if let last = entries.last, entry.sequence != last.sequence + 1 { break }
                        entries.append((entry.sequence, SpoolLocation(segment: first, offset: Int64(offset), length: size), entry.byteCount))
                    case .end(let streamEnd, let lastSequence):
                        guard lastSequence + 1 == expected else { break records }
                        end = streamEnd
                    }
                    offset += size
                }
                segments.append((first, file, Int64(offset)))
                diskBytes += Int64(offset)
            }
        } catch {
            throw SpoolError(error)
        }
        entries.removeAll { $0.sequence <= acknowledged }
        return SpoolContents(entries: entries, end: end, acknowledged: acknowledged, endOfLastEntry: endOfLastEntry)
    }

    /// Parses framed records until the end or the first torn or damaged one.
    static func parse(_ bytes: ArraySlice<UInt8>) -> [(record: SpoolRecord, size: Int)] {
        var records: [(record: SpoolRecord, size: Int)] = []
        var reader = BinaryRecordReader(bytes)
        while reader.remaining >= SpoolRecord.headerSize {
            let start = reader.position
            guard let length = reader.readUInt32(), Int(length) <= SpoolRecord.maximumBody, let checksum = reader.readUInt64(),
                let body = reader.readBytes(Int(length)), RecordChecksum.of(body) == checksum,
                let record = SpoolRecord.decode(body: body)
            else { break }
            records.append((record, reader.position - start))
        }
        return records
    }

    /// Closes the spool's files and releases its lock, leaving the folder as it is for a later run
    /// (what the end of the process does too).
    public func release() {
        lock.withLock {
            for segment in segments { segment.file.close() }
            segments.removeAll()
            spare?.close()
            spare = nil
            ackedFile?.close()
        }
        lockFile.close()
    }

    /// Deletes the stream's spool folder: the receiver confirmed the whole stream.
    public func removeAll() {
        lock.withLock {
            for segment in segments { segment.file.close() }
            segments.removeAll()
            spare?.close()
            spare = nil
            ackedFile?.close()
            diskBytes = 0
        }
        try? FileManager.default.removeItem(atPath: directory)
        lockFile.close()
    }
}
