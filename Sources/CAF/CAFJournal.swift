#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The crash journal kept beside a CAF file while it is being written: `<path>.pakt-journal`.
///
/// A CAF file's packet table (`pakt`) and markers (`mark`) can only be written once the recording ends,
/// after the audio data. Until then they live in this journal, so that a crash loses none of them:
/// `CAFWriter.resume` and `CAFRecovery.recover` rebuild them from it. The journal exists from the moment
/// the writer creates the CAF file until `finalize` has made the finished file durable; a journal beside a
/// CAF file therefore means the file is not (completely) finalized.
///
/// Format (all integers big-endian):
/// - Header, 16 bytes: magic `"CAFJ"`, version (UInt16, 1), flags (UInt16, 0), priming frames (Int32),
///   CRC-32 of the preceding 12 bytes (UInt32).
/// - Records, one after another: type (UInt8), payload length (UInt32), payload, CRC-32 of type, length
///   and payload (UInt32). Types:
///   - `'S'` (0x53) packet sizes: the payload is one UInt32 per packet, in packet order. Written for
///     variable bit rate formats on every append.
///   - `'M'` (0x4D) marker: frame position (Int64), then the name's UTF-8 bytes.
///
/// Replay reads records until the end of the file or the first record that is cut off or fails its CRC
/// (a torn write at the moment of a crash) and ignores everything from there on. Packet sizes in the
/// journal are trusted only as far as the CAF file really holds their bytes.
enum CAFJournal {
    static let suffix = ".pakt-journal"
    static let magic: UInt32 = 0x4341_464A  // 'CAFJ'
    static let version: UInt16 = 1
    static let headerSize = 16
    static let packetSizesRecord: UInt8 = 0x53
    static let markerRecord: UInt8 = 0x4D
    /// Larger payloads are treated as corruption rather than trusted to size an allocation.
    static let maximumPayload = 64 << 20

    static func path(for cafPath: String) -> String { cafPath + suffix }

    static func header(primingFrames: Int32) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(magic)
        writer.append(version)
        writer.append(UInt16(0))
        writer.append(primingFrames)
        writer.append(CRC32.checksum(writer.bytes))
        return writer.bytes
    }

    static func record(type: UInt8, payload: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(type)
        writer.append(UInt32(payload.count))
        writer.append(contentsOf: payload)
        writer.append(CRC32.checksum(writer.bytes))
        return writer.bytes
    }

    static func packetSizes(_ sizes: [UInt32]) -> [UInt8] {
        var payload = ByteWriter()
        for size in sizes { payload.append(size) }
        return record(type: packetSizesRecord, payload: payload.bytes)
    }

    static func marker(_ marker: CAFMarker) -> [UInt8] {
        var payload = ByteWriter()
        payload.append(marker.framePosition)
        payload.append(contentsOf: marker.name.utf8)
        return record(type: markerRecord, payload: payload.bytes)
    }

    /// What a journal holds.
    struct Contents: Equatable {
        var primingFrames: Int32
        var packetSizes: [UInt32] = []
        var markers: [CAFMarker] = []
        /// Bytes after the last intact record (a torn write), ignored.
        var ignoredTailBytes = 0
    }

    /// Parses a journal's bytes; a bad header is an error, a torn tail is not.
    static func parse(_ bytes: [UInt8], path: String) throws(CAFError) -> Contents {
        var reader = ByteReader(bytes)
        guard let magicValue = reader.read(UInt32.self), magicValue == magic,
            let versionValue = reader.read(UInt16.self), reader.read(UInt16.self) != nil,
            let priming = reader.read(Int32.self), let checksum = reader.read(UInt32.self),
            checksum == CRC32.checksum(bytes[0..<12])
        else { throw .journalCorrupt(path: path, reason: "it does not start with an intact CAF journal header") }
        guard versionValue == version else {
            throw .journalCorrupt(path: path, reason: "it is version \(versionValue); this program reads version \(version)")
        }
        guard priming >= 0 else {
            throw .journalCorrupt(path: path, reason: "its priming frame count \(priming) is negative")
        }
        var contents = Contents(primingFrames: priming)
        while !reader.isAtEnd {
            let start = reader.position
            guard let type = reader.read(UInt8.self), let length = reader.read(UInt32.self),
                Int(length) <= maximumPayload, let payload = reader.readBytes(Int(length)),
                let storedChecksum = reader.read(UInt32.self),
                storedChecksum == CRC32.checksum(bytes[start..<(reader.position - 4)])
            else {
                contents.ignoredTailBytes = bytes.count - start
                break
            }
            var payloadReader = ByteReader(payload)
            switch type {
            case packetSizesRecord where length % 4 == 0:
                while let size = payloadReader.read(UInt32.self) { contents.packetSizes.append(size) }
            case markerRecord:
                guard let position = payloadReader.read(Int64.self),
                    let name = String(validating: payload[8...], as: UTF8.self)
                else { throw .journalCorrupt(path: path, reason: "a marker record is malformed") }
                contents.markers.append(CAFMarker(framePosition: position, name: name))
            default:
                throw .journalCorrupt(path: path, reason: "it has an unknown record type \(type)")
            }
        }
        return contents
    }

    /// Reads and parses the journal for `cafPath`; `nil` when there is none.
    static func read(cafPath: String) throws(CAFError) -> Contents? {
        let journalPath = path(for: cafPath)
        let file: PosixFile
        do {
            file = try PosixFile.openExisting(path: journalPath, writable: false)
        } catch .fileMissing {
            return nil
        }
        defer { file.close() }
        let length = try file.length()
        guard length <= Int64(Int32.max) else {
            throw .journalCorrupt(path: journalPath, reason: "it is implausibly large (\(length) bytes)")
        }
        return try parse(try file.read(count: Int(length), at: 0), path: journalPath)
    }

    /// Writes a fresh journal holding `contents` and makes it durable, replacing any journal there
    /// through a temporary file and a rename, so a crash leaves either the old or the new journal.
    static func rewrite(cafPath: String, contents: Contents) throws(CAFError) -> Int64 {
        let journalPath = path(for: cafPath)
        let temporaryPath = journalPath + ".tmp"
        try PosixFile.remove(path: temporaryPath)
        let file = try PosixFile.createNew(path: temporaryPath)
        var bytes = header(primingFrames: contents.primingFrames)
        if !contents.packetSizes.isEmpty { bytes += packetSizes(contents.packetSizes) }
        for marker in contents.markers { bytes += self.marker(marker) }
        try file.write(bytes, at: 0)
        try file.synchronizeAll()
        guard rename(temporaryPath, journalPath) == 0 else {
            throw CAFError.system(errno, operation: "renaming the journal into place", path: journalPath)
        }
        file.close()
        try PosixFile.synchronizeDirectory(containing: journalPath)
        return Int64(bytes.count)
    }

    /// Creates the journal for a new CAF file (synced with `synchronizing`); its length. A journal
    /// already there cannot belong to any file (the CAF file was just created, so it did not exist):
    /// it is an orphan and is replaced.
    static func create(cafPath: String, primingFrames: Int32, synchronizing: Bool) throws(CAFError) -> Int64 {
        let journalPath = path(for: cafPath)
        try PosixFile.remove(path: journalPath)
        let file = try PosixFile.createNew(path: journalPath)
        defer { file.close() }
        let bytes = header(primingFrames: primingFrames)
        try file.write(bytes, at: 0)
        if synchronizing { try file.synchronizeAll() }
        return Int64(bytes.count)
    }
}
