import CaptureWire
import CaptureErrorText
import CaptureCore
import Foundation
import Synchronization

/// Why the spool could not be used; each message says what to do, naming a setting to change
/// through a `SettingNaming` (`message(naming:)`).
public struct SpoolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong and what to do, short of a setting to change.
    public var reason: String
    /// The setting to choose another value of (a folder), told after the reason; nil when none would help.
    public var chooseAnother: Setting?
    /// A short form for `spool list`'s STATE column, when the error is damage of the stream's spool.
    public var summary: String?

    public init(_ reason: String, summary: String? = nil, chooseAnother: Setting? = nil) {
        self.reason = reason
        self.summary = summary
        self.chooseAnother = chooseAnother
    }

    init(_ error: DurableFileError) { reason = "spool: \(error.description)" }

    public var description: String { message(naming: LibrarySettingNames()) }

    /// The error's text, naming the setting to change as `naming` spells it.
    public func message(naming: any SettingNaming) -> String {
        chooseAnother.map { "\(reason); choose another with \(naming.name(of: $0, value: "DIR"))" } ?? reason
    }
}

/// What a stream's spool must remember to deliver the stream after a restart: its identity, the
/// receiver it belongs to and the handshake's description. Stored as `meta.json` in the stream's
/// spool folder, with the format's fields flat beside the others (as every version wrote them).
/// Version 1 (before destinations) has no `destination`: such a stream is delivered only where the
/// user names it (`capture-send spool deliver ID --to HOST:PORT`).
public struct SpoolMeta: Codable, Sendable, Equatable {
    public var version = 2
    public var streamID: UUID
    public var streamName: String
    /// The receiver the stream belongs to; nil in spools written before version 2.
    public var destination: SpoolDestination?
    /// The stream's format, as the handshake describes it.
    public var format: StreamFormat
    public var magicCookie: [UInt8]
    public var primingFrames: Int
    /// UTC time of sample 0, seconds since 1970.
    public var startTime: Double
    /// The stream's resume secret (see `SenderConfiguration.resumeSecret`); nil in spools written
    /// before resume secrets existed (their streams resume without one).
    public var resumeSecret: [UInt8]?
    /// Set once the receiver no longer resumed the stream and its audio is delivered as a new stream
    /// that continues it (PROTOCOL.md §8.1); nil otherwise.
    public var continuation: StreamContinuation?
    /// Whether the clock that stamped `startTime` was synchronized; nil in older spools.
    public var clock: ClockSynchronization?
    /// The stream's channel layout, when it has one.
    public var channelLayout: ChannelLayout?
    /// The capture this stream is one encoding of, when the capture fed several; nil otherwise and
    /// in older spools.
    public var captureID: UUID?
    /// That encoding's label.
    public var captureEncoding: String?
    /// Whether the stream went to a background destination (lossless later): a later run delivers
    /// it behind that run's live streams, as this one did; nil (foreground) in older spools.
    public var background: Bool?

    public init(
        streamID: UUID, streamName: String, destination: SpoolDestination?, description: StreamDescription,
        resumeSecret: [UInt8] = ResumeSecret.make()
    ) {
        self.resumeSecret = resumeSecret
        self.streamID = streamID
        self.streamName = streamName
        self.destination = destination
        format = description.format
        magicCookie = description.magicCookie
        primingFrames = description.primingFrames
        startTime = description.startTime.timeIntervalSince1970
        clock = description.clock
        channelLayout = description.channelLayout
        captureID = description.capture?.captureID
        captureEncoding = description.capture?.encoding
    }

    /// The stream's description for the handshake.
    public var streamDescription: StreamDescription {
        StreamDescription(
            format: format, magicCookie: magicCookie, primingFrames: primingFrames, startTime: Date(timeIntervalSince1970: startTime),
            clock: clock ?? .unknown, channelLayout: channelLayout,
            capture: captureID.map { CaptureLink(captureID: $0, encoding: captureEncoding ?? "") })
    }

    // MARK: meta.json

    /// The keys of `meta.json`, in the order they are written (and read, so that the first field
    /// found wrong is the one named); the format's fields among them.
    private enum CodingKeys: String, CodingKey {
        case version, streamID, streamName, destination
        case sampleRate, formatID, formatFlags, bytesPerPacket, framesPerPacket, bytesPerFrame, channelsPerFrame, bitsPerChannel
        case magicCookie, primingFrames, startTime, resumeSecret, continuation, clock, channelLayout, captureID, captureEncoding, background
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        streamID = try container.decode(UUID.self, forKey: .streamID)
        streamName = try container.decode(String.self, forKey: .streamName)
        destination = try container.decodeIfPresent(SpoolDestination.self, forKey: .destination)
        // The fields unchecked: `SpoolMetaReader` checks the format with everything else.
        format = StreamFormat(
            sampleRate: try container.decode(Double.self, forKey: .sampleRate),
            formatID: AudioFormatID(rawValue: try container.decode(UInt32.self, forKey: .formatID)),
            formatFlags: AudioFormatFlags(rawValue: try container.decode(UInt32.self, forKey: .formatFlags)),
            bytesPerPacket: try container.decode(UInt32.self, forKey: .bytesPerPacket),
            framesPerPacket: try container.decode(UInt32.self, forKey: .framesPerPacket),
            bytesPerFrame: try container.decode(UInt32.self, forKey: .bytesPerFrame),
            channelsPerFrame: try container.decode(UInt32.self, forKey: .channelsPerFrame),
            bitsPerChannel: try container.decode(UInt32.self, forKey: .bitsPerChannel))
        magicCookie = try container.decode([UInt8].self, forKey: .magicCookie)
        primingFrames = try container.decode(Int.self, forKey: .primingFrames)
        startTime = try container.decode(Double.self, forKey: .startTime)
        resumeSecret = try container.decodeIfPresent([UInt8].self, forKey: .resumeSecret)
        continuation = try container.decodeIfPresent(StreamContinuation.self, forKey: .continuation)
        clock = try container.decodeIfPresent(ClockSynchronization.self, forKey: .clock)
        channelLayout = try container.decodeIfPresent(ChannelLayout.self, forKey: .channelLayout)
        captureID = try container.decodeIfPresent(UUID.self, forKey: .captureID)
        captureEncoding = try container.decodeIfPresent(String.self, forKey: .captureEncoding)
        background = try container.decodeIfPresent(Bool.self, forKey: .background)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(streamID, forKey: .streamID)
        try container.encode(streamName, forKey: .streamName)
        try container.encodeIfPresent(destination, forKey: .destination)
        try container.encode(format.sampleRate, forKey: .sampleRate)
        try container.encode(format.formatID.rawValue, forKey: .formatID)
        try container.encode(format.formatFlags.rawValue, forKey: .formatFlags)
        try container.encode(format.bytesPerPacket, forKey: .bytesPerPacket)
        try container.encode(format.framesPerPacket, forKey: .framesPerPacket)
        try container.encode(format.bytesPerFrame, forKey: .bytesPerFrame)
        try container.encode(format.channelsPerFrame, forKey: .channelsPerFrame)
        try container.encode(format.bitsPerChannel, forKey: .bitsPerChannel)
        try container.encode(magicCookie, forKey: .magicCookie)
        try container.encode(primingFrames, forKey: .primingFrames)
        try container.encode(startTime, forKey: .startTime)
        try container.encodeIfPresent(resumeSecret, forKey: .resumeSecret)
        try container.encodeIfPresent(continuation, forKey: .continuation)
        try container.encodeIfPresent(clock, forKey: .clock)
        try container.encodeIfPresent(channelLayout, forKey: .channelLayout)
        try container.encodeIfPresent(captureID, forKey: .captureID)
        try container.encodeIfPresent(captureEncoding, forKey: .captureEncoding)
        try container.encodeIfPresent(background, forKey: .background)
    }
}

/// Where a spooled entry is: its segment (named by its first sequence), offset and record length.
public struct SpoolLocation: Sendable, Equatable {
    public var segment: UInt64
    public var offset: Int64
    public var length: Int
}

/// One stream's disk spool: a folder `<root>/<stream-uuid>/` holding `meta.json`, a `lock` file
/// (flock'ed by the process that owns the stream, which writes its pid into it), an `acked` file
/// (the main receiver's position: its highest acknowledged sequence and the sample just past it,
/// 16 bytes big-endian; 8 bytes, the sequence only, before this version), a `last-error` file (the last delivery
/// error, if any) and segment files `seg-<first sequence, 20 digits>.spool` of records (see
/// `SpoolRecord`: UInt32 body length, `RecordChecksum` of the body, body). Segments roll over at
/// `segmentBytes`; the whole folder is deleted once the receiver confirmed the end of the stream.
///
/// A new stream's folder appears only with its first record: it is built as
/// `<root>/.<stream-uuid>.partial` (lock taken, `meta.json` written) and renamed into place, so a
/// capture-send that dies before it captured anything leaves nothing behind, and a folder with a
/// stream id for a name always has its `meta.json` and its owner's lock.
///
/// A segment whose entries are all acknowledged is not deleted but renamed `spare.spool` (one at
/// most; further ones are deleted), and the next segment is that file renamed again and written over
/// from its start. Writing over pages the file already has costs the kernel a fraction of filling
/// new ones. A reused segment still holds older records behind the ones written since; they have
/// lower sequence numbers than the segment's name, so reading back never takes one.
///
/// Reading back (`contents()`) resynchronises after damage: a record that fails its checksum costs
/// its own entries, which are delivered as gaps (or encoded silence) in their place, and the
/// records after it are found again (`SpoolScanner`); the damaged bytes are kept in
/// `<root>/<stream-uuid>.damaged/` when the stream is claimed for delivery (`keepDamagedBytes`).
///
/// Thread-safe: appends come from the log's spool queue, reads from the network's event loop.
///
/// Sendability: the files, the segments and the counters are in a `Mutex`, reads included, so a
/// segment is never reused under a read; a segment's file used outside the lock (a sync, a copy of
/// damaged bytes) is lent out as a `LentSegmentFile`.
public final class StreamSpool: Sendable {
    /// The stream's spool folder (it exists once the first record is written).
    public let directory: String
    /// The stream's identity and description.
    public let meta: SpoolMeta
    /// Segment size at which a new segment starts.
    public let segmentBytes: Int64

    /// The spool's open files and what it knows of them.
    private struct State {
        /// The folder's flock'ed `lock` file; nil until the folder exists (and for a read-only look).
        var lockFile: DurableFile?
        /// The segments held, oldest first: where each starts, its file, its length, and how much of
        /// it is known durable (`synchronize`).
        var segments: [(first: UInt64, file: DurableFile, length: Int64, synced: Int64)] = []
        /// An acknowledged segment kept open for reuse as the next one.
        var spare: DurableFile?
        var ackedFile: DurableFile?
        /// The highest acknowledgement written to `acked` (or read from it).
        var recordedAcknowledgement: UInt64 = 0
        /// The damage the last `contents()` found, why it makes the stream undeliverable (if it does),
        /// and where `keepDamagedBytes` kept its bytes.
        var recoveredDamage: [SpoolDamage] = []
        var recoveredUndeliverable: String?
        var keptDamage: String?
        var diskBytes: Int64 = 0

        /// Closes the segments, the spare and the `acked` file (not the lock).
        mutating func closeFiles() {
            for segment in segments { segment.file.close() }
            segments.removeAll()
            spare?.close()
            spare = nil
            ackedFile?.close()
            ackedFile = nil
        }
    }

    private let state: Mutex<State>

    private init(directory: String, meta: SpoolMeta, lockFile: sending DurableFile?, segmentBytes: Int64) {
        self.directory = directory
        self.meta = meta
        state = Mutex(State(lockFile: lockFile))
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

    /// The spool of a new stream under `root`. The root must be a folder this process can write
    /// (it is created if missing); the stream's own folder appears with its first record.
    public static func create(root: String, meta: SpoolMeta, segmentBytes: Int64 = 16 << 20) throws(SpoolError) -> StreamSpool {
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw SpoolError("cannot create the spool folder \(root): \(SystemErrorText.describe(error))", chooseAnother: .spoolFolder)
        }
        guard access(root, W_OK | X_OK) == 0 else {
            throw SpoolError("cannot write in the spool folder \(root): permission denied", chooseAnother: .spoolFolder)
        }
        let directory = (root as NSString).appendingPathComponent(meta.streamID.uuidString.lowercased())
        return StreamSpool(directory: directory, meta: meta, lockFile: nil, segmentBytes: segmentBytes)
    }

    /// Whether the stream's folder exists (a record was written).
    public var exists: Bool { state.withLock { $0.lockFile != nil } }

    /// Builds the stream's folder (see the type's comment); called under `state`'s lock before the
    /// first record.
    private func publish(into state: inout State) throws(DurableFileError) {
        let root = (directory as NSString).deletingLastPathComponent
        let staging = Self.partialPath(root: root, streamID: meta.streamID)
        guard mkdir(staging, 0o700) == 0 || errno == EEXIST else { throw DurableFileError(operation: "creating", path: staging, code: errno) }
        let file = try DurableFile.open(path: (staging as NSString).appendingPathComponent("lock"), create: true)
        guard file.tryLock() else {
            file.close()
            throw DurableFileError(operation: "locking", path: staging, code: EWOULDBLOCK)
        }
        do throws(DurableFileError) {
            try Self.writeOwner(file)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            guard let json = try? encoder.encode(meta) else { throw DurableFileError(operation: "encoding", path: staging, code: EINVAL) }
            try DurableFile.replaceAtomically(path: (staging as NSString).appendingPathComponent("meta.json"), with: Array(json))
            guard rename(staging, directory) == 0 else { throw DurableFileError(operation: "renaming", path: staging, code: errno) }
            try DurableFile.synchronizeDirectory(root)
        } catch {
            file.close()
            try? FileManager.default.removeItem(atPath: staging)
            throw error
        }
        state.lockFile = file
    }

    private static func partialPath(root: String, streamID: UUID) -> String {
        (root as NSString).appendingPathComponent(".\(streamID.uuidString.lowercased()).partial")
    }

    /// Writes "pid N" into a lock file this process holds, so that `spool list` can say who has it.
    private static func writeOwner(_ file: DurableFile) throws(DurableFileError) {
        try file.truncate(to: 0)
        try file.write(Array("pid \(getpid())\n".utf8), at: 0)
    }

    /// How claiming an earlier stream's folder went.
    public enum Claim: Sendable {
        /// This process holds the stream now (until `release()`, `removeAll()` or its exit).
        case claimed(StreamSpool)
        /// A running capture-send holds it ("pid N", as its lock file says).
        case inUse(owner: String)
        /// The folder holds no stream (any more): it was delivered or discarded meanwhile.
        case gone
    }

    /// Claims an earlier stream's spool folder under its exclusive lock, so that no other process
    /// can deliver or discard it meanwhile. The stream's description is read after the lock is
    /// taken: a folder that was removed while the lock was awaited is `.gone`; a damaged one throws
    /// (naming the file and the field), unless the stream is claimed `toDiscard`: then it is
    /// claimed all the same, with a description of its id only, good for `removeAll()` alone.
    public static func claim(directory: String, toDiscard: Bool = false) throws(SpoolError) -> Claim {
        let lockPath = (directory as NSString).appendingPathComponent("lock")
        let metaPath = (directory as NSString).appendingPathComponent("meta.json")
        let file: DurableFile
        do throws(DurableFileError) {
            guard FileManager.default.fileExists(atPath: metaPath) else { return .gone }
            file = try DurableFile.open(path: lockPath, create: true)
        } catch {
            if error.code == ENOENT { return .gone }
            throw SpoolError(error)
        }
        guard file.tryLock() else {
            let owner = ownerText(file)
            file.close()
            return .inUse(owner: owner)
        }
        guard FileManager.default.fileExists(atPath: metaPath) else {
            file.close()
            return .gone
        }
        let meta: SpoolMeta
        do throws(SpoolError) {
            guard let read = try readMeta(directory: directory) else {
                file.close()
                return .gone
            }
            meta = read
        } catch {
            guard toDiscard, let id = UUID(uuidString: (directory as NSString).lastPathComponent) else {
                file.close()
                throw error
            }
            meta = SpoolMeta(
                streamID: id, streamName: "", destination: nil,
                description: StreamDescription(format: .linearPCM(sampleRate: 48_000, channels: 1, sample: .s16), magicCookie: [], primingFrames: 0, startTime: Date(timeIntervalSince1970: 0)),
                resumeSecret: [])
        }
        try? writeOwner(file)
        return .claimed(StreamSpool(directory: directory, meta: meta, lockFile: file, segmentBytes: 16 << 20))
    }

    private static func ownerText(_ file: DurableFile) -> String {
        let bytes = (try? file.read(count: 64, at: 0)) ?? []
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "another capture-send" : text
    }

    /// Who holds the stream folder's lock now ("pid N"), or nil when nobody does. Takes the lock
    /// for an instant to find out.
    public static func owner(directory: String) -> String? {
        guard let file = try? DurableFile.open(path: (directory as NSString).appendingPathComponent("lock"), create: false) else { return nil }
        defer { file.close() }
        return file.tryLock() ? nil : ownerText(file)
    }

    /// Reads an earlier stream's folder without claiming it (for `spool list`); nil when it holds
    /// no `meta.json` (any more). Throws, naming the file and the field, when its description is
    /// damaged (`SpoolMetaReader`).
    public static func inspect(directory: String) throws(SpoolError) -> StreamSpool? {
        guard let meta = try readMeta(directory: directory) else { return nil }
        return StreamSpool(directory: directory, meta: meta, lockFile: nil, segmentBytes: 16 << 20)
    }

    /// The description in a stream folder's `meta.json`, or nil when there is none. Throws when
    /// it is not one, holds a value no stream can have, or names another stream than the folder
    /// does (a stream is only ever delivered under its own id: a description copied or edited into
    /// another folder must not resume another file).
    private static func readMeta(directory: String) throws(SpoolError) -> SpoolMeta? {
        let metaPath = (directory as NSString).appendingPathComponent("meta.json")
        guard let data = FileManager.default.contents(atPath: metaPath) else { return nil }
        return try SpoolMetaReader.read(data, path: metaPath, folderName: (directory as NSString).lastPathComponent)
    }

    /// The stream folders under `root` (each may hold an earlier stream).
    public static func streamDirectories(root: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.filter { UUID(uuidString: $0) != nil }.sorted().map { (root as NSString).appendingPathComponent($0) }
    }

    /// Removes the half-built folders (`.<stream-uuid>.partial`) of runs that died while creating
    /// their stream's folder; they never held a record. Folders still locked are left alone.
    public static func removeAbandonedPartials(root: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for name in names where name.hasPrefix(".") && name.hasSuffix(".partial") {
            let path = (root as NSString).appendingPathComponent(name)
            if let file = try? DurableFile.open(path: (path as NSString).appendingPathComponent("lock"), create: false) {
                defer { file.close() }
                guard file.tryLock() else { continue }
            } else {
                // No lock yet: a run may be building it this very moment; leave it a minute.
                let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate]) as? Date
                guard let modified, modified.timeIntervalSinceNow < -60 else { continue }
            }
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    // MARK: - Last delivery error

    /// Records, durably, that the stream's audio is now delivered as the new stream `continuation`
    /// names, so a restarted sender carries on as that stream.
    public func recordContinuation(_ continuation: StreamContinuation) throws(SpoolError) {
        guard exists else { return }
        var updated = meta
        updated.continuation = continuation
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let path = (directory as NSString).appendingPathComponent("meta.json")
        guard let json = try? encoder.encode(updated) else { throw SpoolError(DurableFileError(operation: "encoding", path: path, code: EINVAL)) }
        do throws(DurableFileError) {
            try DurableFile.replaceAtomically(path: path, with: Array(json))
        } catch {
            throw SpoolError(error)
        }
    }

    /// Records why the last delivery attempt failed (`last-error`, shown by `spool list`), when the
    /// stream's folder exists.
    public func recordDeliveryError(_ message: String, at time: Date = Date()) {
        guard exists else { return }
        let formatter = ISO8601DateFormatter()
        let line = "\(formatter.string(from: time)) \(message.replacingOccurrences(of: "\n", with: " "))\n"
        try? DurableFile.replaceAtomically(path: (directory as NSString).appendingPathComponent("last-error"), with: Array(line.utf8))
    }

    /// The last delivery error recorded in a stream folder ("<UTC time> <message>"), if any.
    public static func lastDeliveryError(directory: String) -> String? {
        guard let data = FileManager.default.contents(atPath: (directory as NSString).appendingPathComponent("last-error")) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// Bytes the spool's live segments take on disk.
    public var bytesOnDisk: Int64 { state.withLock { $0.diskBytes } }

    /// Appends an entry; returns where it is.
    public func append(_ entry: LoggedPacket) throws(SpoolError) -> SpoolLocation {
        try append(record: .entry(entry), sequence: entry.sequence)
    }

    /// Records the end of the stream (after its last sequence). A stream that never spooled an
    /// entry has nothing to deliver later: its end is not recorded and no folder appears.
    public func appendEnd(_ end: StreamEnd) throws(SpoolError) {
        guard exists else { return }
        _ = try append(record: .end(end), sequence: end.position.nextSequence)
    }

    private func append(record: SpoolRecord, sequence: UInt64) throws(SpoolError) -> SpoolLocation {
        let framed = record.framed()
        return try state.withLock { state throws(SpoolError) -> SpoolLocation in
            do throws(DurableFileError) {
                if state.lockFile == nil { try publish(into: &state) }
                if state.segments.isEmpty || state.segments[state.segments.count - 1].length >= segmentBytes {
                    state.segments.append((sequence, try newSegment(first: sequence, in: &state), 0, 0))
                }
                let index = state.segments.count - 1
                let offset = state.segments[index].length
                try state.segments[index].file.write(framed.head, framed.payload, at: offset)
                state.segments[index].length += Int64(framed.count)
                state.diskBytes += Int64(framed.count)
                return SpoolLocation(segment: state.segments[index].first, offset: offset, length: framed.count)
            } catch {
                throw SpoolError(error)
            }
        }
    }

    /// The file for a segment starting at `first`: the spare renamed, or else a new file. Under
    /// `state`'s lock.
    private func newSegment(first: UInt64, in state: inout State) throws(DurableFileError) -> DurableFile {
        let path = segmentPath(first)
        guard let reused = state.spare else { return try DurableFile.open(path: path, create: true, truncate: true) }
        state.spare = nil
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
        try state.withLock { state throws(SpoolError) -> LoggedPacket in
            guard let file = state.segments.first(where: { $0.first == location.segment })?.file else {
                throw SpoolError("spool: segment \(location.segment) of \(directory) is gone")
            }
            do throws(DurableFileError) {
                let bytes = try file.read(count: location.length, at: location.offset)
                guard bytes.count == location.length, let entry = bytes.withUnsafeBytes({ Self.entry(in: $0) }), entry.sequence == sequence else {
                    throw DurableFileError(operation: "reading a damaged record of", path: directory, code: EIO)
                }
                return entry
            } catch {
                throw SpoolError(error)
            }
        }
    }

    /// The entry whose record fills `bytes` (as `read` gets it at its location); nil when they are
    /// not one whole, intact entry record.
    public static func entry(in bytes: UnsafeRawBufferPointer) -> LoggedPacket? {
        guard let (record, size) = SpoolRecord.parse(bytes, at: 0), size == bytes.count, case .entry(let entry) = record else { return nil }
        return entry
    }

    /// Makes everything appended and still held durable: an fdatasync of every segment written since
    /// its last one. A segment the receiver acknowledged whole before its sync is retired unsynced:
    /// nobody needs it any more, and a stream delivered faster than the sync interval never costs
    /// the disk a write of its own.
    public func synchronize() throws(SpoolError) {
        let pending = state.withLock { state in
            state.segments.filter { $0.length > $0.synced }.map { LentSegmentFile(first: $0.first, file: $0.file, length: $0.length) }
        }
        do throws(DurableFileError) {
            for segment in pending {
                try segment.file.synchronize()
                state.withLock { state in
                    if let index = state.segments.firstIndex(where: { $0.first == segment.first && ObjectIdentifier($0.file) == segment.identity }) {
                        state.segments[index].synced = max(state.segments[index].synced, segment.length)
                    }
                }
            }
        } catch {
            throw SpoolError(error)
        }
    }

    /// Bytes of the segments still held that are not yet known durable (appended since their last sync).
    public var unsyncedBytes: Int64 {
        state.withLock { state in state.segments.reduce(0) { $0 + $1.length - $1.synced } }
    }

    /// The main receiver holds everything through `recorded` (its sequence and where its audio ends):
    /// written to the `acked` file, so that a restarted sender delivers to it from there (the spool
    /// is bound to the main receiver) and knows where damaged entries after it began. Every
    /// receiver still served holds everything through `retiringThrough`: each segment whose entries
    /// are all at or below it is retired (never the segment being written), one kept as the spare.
    /// With one receiver both are the same.
    public func acknowledge(recording recorded: StreamPosition, retiringThrough sequence: UInt64) {
        state.withLock { state in
            guard state.lockFile != nil else { return }
            if recorded.lastSequence > state.recordedAcknowledgement {
                state.recordedAcknowledgement = recorded.lastSequence
                let record = SpoolAckedRecord(position: recorded)
                if state.ackedFile == nil { state.ackedFile = try? DurableFile.open(path: (directory as NSString).appendingPathComponent("acked"), create: true) }
                try? state.ackedFile?.write(record.encoded, at: 0)
            }
            while state.segments.count > 1, state.segments[1].first <= sequence + 1 {
                let gone = state.segments.removeFirst()
                state.diskBytes -= gone.length
                if state.spare == nil, (try? gone.file.rename(to: (directory as NSString).appendingPathComponent("spare.spool"))) != nil {
                    state.spare = gone.file
                } else {
                    gone.file.close()
                    try? DurableFile.remove(gone.file.path)
                }
            }
        }
    }

    /// Reads back everything the spool holds (after a restart), opening its segments for reading:
    /// the entries, the end, and the damage found with what it costs (`SpoolScanner`,
    /// `SpoolContents`). A record torn at the end of the last segment (a crash mid-write) ends
    /// the contents, as older content of a reused segment does.
    public func contents() throws(SpoolError) -> SpoolContents {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("seg-") && $0.hasSuffix(".spool") }.sorted()
        var acknowledged: SpoolAckedRecord?
        var scanner = SpoolScanner()
        return try state.withLock { state throws(SpoolError) -> SpoolContents in
            do throws(DurableFileError) {
                if let acked = try DurableFile.openForReading(path: (directory as NSString).appendingPathComponent("acked")) {
                    defer { acked.close() }
                    acknowledged = SpoolAckedRecord.decode(try acked.read(count: 16, at: 0))
                }
                for name in names {
                    guard let first = UInt64(name.dropFirst(4).dropLast(6)) else { continue }
                    let path = (directory as NSString).appendingPathComponent(name)
                    let file = try DurableFile.open(path: path, create: false)
                    let bytes = try file.read(count: Int(try file.length()), at: 0)
                    bytes.withUnsafeBytes { scanner.scan(segment: first, bytes: $0) }
                    let length = Int64(scanner.segmentLengths.last?.length ?? 0)
                    state.segments.append((first, file, length, length))
                    state.diskBytes += length
                }
            } catch {
                throw SpoolError(error)
            }
            scanner.finish()
            let contents = SpoolContents(scan: scanner, acknowledged: acknowledged, fill: .forStream(meta.streamDescription.format, keptIn: damagedBytesFolder))
            state.recordedAcknowledgement = contents.acknowledged
            state.recoveredDamage = contents.damage
            state.recoveredUndeliverable = contents.undeliverable
            return contents
        }
    }

    /// The damage the last `contents()` found, with where `keepDamagedBytes` kept its bytes; nil
    /// when it found none.
    public var damageReport: SpoolDamageReport? {
        state.withLock { state in
            state.recoveredDamage.isEmpty ? nil : SpoolDamageReport(
                damage: state.recoveredDamage, sampleRate: meta.format.sampleRate, keptIn: state.keptDamage, undeliverable: state.recoveredUndeliverable)
        }
    }

    /// Where the damaged bytes of this stream's spool are kept: `<root>/<stream-uuid>.damaged`.
    public var damagedBytesFolder: String { directory + ".damaged" }

    /// Copies the damaged bytes the last `contents()` found into `damagedBytesFolder`, one file per
    /// damaged stretch, `seg-<segment's first sequence>-at-<offset>.bytes` (the segment files are
    /// removed with the stream once it is delivered; these stay). Returns the folder, or nil when
    /// there were no damaged bytes.
    public func keepDamagedBytes() throws(SpoolError) -> String? {
        let regions = state.withLock { $0.recoveredDamage.flatMap(\.regions) }
        guard !regions.isEmpty else { return nil }
        let folder = damagedBytesFolder
        do throws(DurableFileError) {
            guard mkdir(folder, 0o700) == 0 || errno == EEXIST else { throw DurableFileError(operation: "creating", path: folder, code: errno) }
            for region in regions {
                let lent = state.withLock { state in
                    state.segments.first(where: { $0.first == region.segment }).map { LentSegmentFile(first: $0.first, file: $0.file, length: $0.length) }
                }
                guard let lent else {
                    throw DurableFileError(operation: "reading", path: segmentPath(region.segment), code: ENOENT)
                }
                let bytes = try lent.file.read(count: region.length, at: Int64(region.offset))
                let name = String(format: "seg-%020llu-at-%lld.bytes", region.segment, Int64(region.offset))
                try DurableFile.replaceAtomically(path: (folder as NSString).appendingPathComponent(name), with: bytes)
            }
            try DurableFile.synchronizeDirectory(folder)
            try DurableFile.synchronizeDirectory((directory as NSString).deletingLastPathComponent)
        } catch {
            throw SpoolError("spool: cannot keep the damaged bytes of \(directory) in \(folder): \(error.description); the stream is left in the spool as it is")
        }
        state.withLock { $0.keptDamage = folder }
        return folder
    }

    /// Closes the spool's files and releases its lock, leaving the folder as it is for a later run
    /// (what the end of the process does too).
    public func release() {
        state.withLock { state in
            state.closeFiles()
            state.lockFile?.close()
            state.lockFile = nil
        }
    }

    /// Deletes the stream's spool folder: the receiver confirmed the whole stream.
    public func removeAll() {
        state.withLock { state in
            state.closeFiles()
            state.diskBytes = 0
            // Removed while still locked, so that no other process claims a half-removed folder.
            if state.lockFile != nil { try? FileManager.default.removeItem(atPath: directory) }
            state.lockFile?.close()
            state.lockFile = nil
        }
    }
}

/// A segment's file lent out of `StreamSpool`'s lock for one `fdatasync` or one read of damaged
/// bytes, which must not hold the lock (appends would wait on the disk); `identity` tells, back
/// under the lock, whether the segment still has that file.
///
/// Sendability (`@unchecked Sendable`): the lent file is used by the one thread that borrowed it;
/// what renames or closes a segment's file does so under the lock and never beside a borrower:
/// `synchronize` runs on its `PacketLog`'s spool queue, as the appends and acknowledgements do, and
/// `keepDamagedBytes` when the stream is claimed, before anything else uses its spool. The compiler
/// cannot see that order, and `Mutex.withLock` cannot hand out the `DurableFile` itself (its result
/// is `sending`).
private struct LentSegmentFile: @unchecked Sendable {
    let first: UInt64
    let file: DurableFile
    let length: Int64

    var identity: ObjectIdentifier { ObjectIdentifier(file) }
}
