import CaptureCore

/// The unit the commit log writes and trusts: one or more records behind a header that names the
/// batch's own position, the log it belongs to and the epoch (the log's opening) that wrote it, and
/// a checksum of everything. A batch is read back whole or not at all. This file is the batch's
/// byte format, pure: encoding, and decoding that says exactly why some bytes are not a batch.
///
/// Layout (little-endian), 8-byte aligned:
/// - header, 48 bytes: magic "CLB1", flags (bit 0: the log goes on at the next segment's start,
///   the rest of this one is unused), length of the whole batch with padding, record count,
///   position, log id, epoch, and the checksum (`RecordChecksum`) of the header's first 40 bytes
///   followed by the body;
/// - body: the records, each a 16-byte header (kind, 3 zero bytes, body length, subject) and its
///   body padded with zeros to 8 bytes.
///
/// The position and the epoch are what make segment recycling safe, as PostgreSQL's page address
/// (`xlp_pageaddr`) and SQLite's WAL salts do: a recycled segment still holds old batches, whose
/// positions are behind the reader, and the leftovers of an earlier opening that lie past the end
/// of a later one carry an older epoch.
public enum CommitLogBatch {
    /// Bytes of a batch's header.
    public static let headerSize = 48
    static let magic: UInt32 = 0x3142_4C43  // "CLB1" little-endian
    static let continuesFlag: UInt32 = 1

    /// `count` rounded up to the log's alignment.
    static func aligned(_ count: Int) -> Int {
        let alignment = Int(LogGeometry.alignment)
        return (count + alignment - 1) / alignment * alignment
    }

    /// Where a batch was written: the log, the opening and the position.
    public struct Stamp: Equatable, Sendable {
        /// The log's identity, chosen at random when it was created.
        public var logID: UInt64
        /// The log's opening that wrote the batch (one more at every start of the receiver).
        public var epoch: UInt64
        /// The batch's own position.
        public var position: LogPosition

        public init(logID: UInt64, epoch: UInt64, position: LogPosition) {
            self.logID = logID
            self.epoch = epoch
            self.position = position
        }
    }

    /// The bytes of a batch of `records` written at `stamp`; with `continuesInNextSegment` the log
    /// goes on at the next segment's start (a batch of no records then only says that).
    public static func encode(_ records: [CommitLogRecord], stamp: Stamp, continuesInNextSegment: Bool = false) -> [UInt8] {
        let bodySize = records.reduce(0) { $0 + $1.encodedSize }
        // Each byte is written once: record headers and bodies copied in, only the padding zeroed
        // (a round of 10,000 streams is tens of megabytes).
        var bytes = [UInt8](unsafeUninitializedCapacity: headerSize + bodySize) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            raw.baseAddress?.initializeMemory(as: UInt8.self, repeating: 0, count: headerSize)
            var offset = headerSize
            for record in records {
                raw.storeBytes(of: UInt32(record.kind).littleEndian, toByteOffset: offset, as: UInt32.self)
                raw.storeBytes(of: UInt32(record.body.count).littleEndian, toByteOffset: offset + 4, as: UInt32.self)
                raw.storeBytes(of: record.subject.littleEndian, toByteOffset: offset + 8, as: UInt64.self)
                let bodyStart = offset + CommitLogRecord.headerSize
                record.body.withUnsafeBytes { body in
                    UnsafeMutableRawBufferPointer(rebasing: raw[bodyStart..<(bodyStart + body.count)]).copyMemory(from: body)
                }
                let end = offset + record.encodedSize
                let padding = bodyStart + record.body.count
                (raw.baseAddress.map { $0 + padding })?.initializeMemory(as: UInt8.self, repeating: 0, count: end - padding)
                offset = end
            }
            initialized = offset
        }
        LittleEndianFields.put(magic, into: &bytes, at: 0)
        LittleEndianFields.put(continuesInNextSegment ? continuesFlag : 0, into: &bytes, at: 4)
        LittleEndianFields.put(UInt32(bytes.count), into: &bytes, at: 8)
        LittleEndianFields.put(UInt32(records.count), into: &bytes, at: 12)
        LittleEndianFields.put(stamp.position.offset, into: &bytes, at: 16)
        LittleEndianFields.put(stamp.logID, into: &bytes, at: 24)
        LittleEndianFields.put(stamp.epoch, into: &bytes, at: 32)
        LittleEndianFields.put(checksum(bytes), into: &bytes, at: 40)
        return bytes
    }

    /// The checksum of a whole batch's bytes: its first 40 bytes, then its body.
    private static func checksum(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { raw in
            var running = RecordChecksum.Running()
            running.add(UnsafeRawBufferPointer(rebasing: raw[0..<40]))
            running.add(UnsafeRawBufferPointer(rebasing: raw[headerSize...]))
            return running.value
        }
    }

    // MARK: - Decoding

    /// What a batch's header says, read before its body.
    public struct Header: Equatable, Sendable {
        /// Bytes of the whole batch.
        public var length: Int
        /// Records in it.
        public var count: Int
        /// Whether the log goes on at the next segment's start after it.
        public var continuesInNextSegment: Bool
        /// Where, in which log and opening, it says it was written.
        public var stamp: Stamp

        public init(length: Int, count: Int, continuesInNextSegment: Bool, stamp: Stamp) {
            self.length = length
            self.count = count
            self.continuesInNextSegment = continuesInNextSegment
            self.stamp = stamp
        }
    }

    /// Why there is no batch at a position.
    public enum Absence: Error, Equatable, Sendable {
        /// Nothing was ever written there: zeros, or the end of the file (a fresh segment).
        case unwritten
        /// Bytes that do not begin a batch: a header cut short or damaged.
        case notABatch
        /// A batch from earlier in the log: this part of a recycled segment was not written again.
        case stale(LogPosition)
        /// A batch of another log (a segment file copied in from elsewhere).
        case foreignLog(UInt64)
        /// A batch an earlier opening of the log wrote, past where a later opening's batches end.
        case olderEpoch(UInt64)
        /// A header whose length cannot be (too short, unaligned, or past the segment's end).
        case impossibleLength(Int)
    }

    /// What a reader expects at the next position of the chain.
    public struct Expectation: Equatable, Sendable {
        /// The log being read.
        public var logID: UInt64
        /// Where the batch must say it was written.
        public var position: LogPosition
        /// The epochs it may carry: from the epoch of the batch before it (a later batch never
        /// carries an earlier epoch) to the reader's own.
        public var epochs: ClosedRange<UInt64>
        /// Bytes from `position` to its segment's end.
        public var room: UInt64

        public init(logID: UInt64, position: LogPosition, epochs: ClosedRange<UInt64>, room: UInt64) {
            self.logID = logID
            self.position = position
            self.epochs = epochs
            self.room = room
        }
    }

    /// Reads the header at the start of `bytes` (the bytes from the expected position on; fewer
    /// than `headerSize` at a file's end).
    public static func header(_ bytes: ArraySlice<UInt8>, expected: Expectation) -> Result<Header, Absence> {
        let head = bytes.prefix(headerSize)
        guard head.count == headerSize, LittleEndianFields.get(UInt32.self, bytes, 0) == magic else {
            return .failure(head.allSatisfy { $0 == 0 } ? .unwritten : .notABatch)
        }
        let flags = LittleEndianFields.get(UInt32.self, bytes, 4)
        let length = Int(LittleEndianFields.get(UInt32.self, bytes, 8))
        let count = Int(LittleEndianFields.get(UInt32.self, bytes, 12))
        let stamp = Stamp(logID: LittleEndianFields.get(UInt64.self, bytes, 24), epoch: LittleEndianFields.get(UInt64.self, bytes, 32), position: LogPosition(LittleEndianFields.get(UInt64.self, bytes, 16)))
        guard flags & ~continuesFlag == 0 else { return .failure(.notABatch) }
        // The position first: bytes that only look like a header (audio inside an old batch) almost
        // never name the exact position they lie at.
        guard stamp.position == expected.position else { return .failure(.stale(stamp.position)) }
        guard stamp.logID == expected.logID else { return .failure(.foreignLog(stamp.logID)) }
        guard stamp.epoch >= expected.epochs.lowerBound else { return .failure(.olderEpoch(stamp.epoch)) }
        guard stamp.epoch <= expected.epochs.upperBound else { return .failure(.notABatch) }
        guard length >= headerSize, length % Int(LogGeometry.alignment) == 0, UInt64(length) <= expected.room,
            count <= (length - headerSize) / CommitLogRecord.headerSize
        else { return .failure(.impossibleLength(length)) }
        return .success(Header(length: length, count: count, continuesInNextSegment: flags & continuesFlag != 0, stamp: stamp))
    }

    /// Why a batch whose header was read is not trusted.
    public enum Damage: Error, Equatable, Sendable {
        /// Fewer bytes than the header's length (the file ends inside it).
        case cutOff(available: Int)
        /// The checksum does not match: a write torn by a crash, or bytes damaged since.
        case checksumMismatch
        /// The records do not fill the body as the header says.
        case malformedRecords
    }

    /// The records of the batch whose `header` was read, from `bytes` (the whole batch).
    public static func records(_ bytes: ArraySlice<UInt8>, header: Header) -> Result<[CommitLogRecord], Damage> {
        guard bytes.count >= header.length else { return .failure(.cutOff(available: bytes.count)) }
        let batch = Array(bytes.prefix(header.length))
        guard LittleEndianFields.get(UInt64.self, batch[...], 40) == checksum(batch) else { return .failure(.checksumMismatch) }
        var records: [CommitLogRecord] = []
        records.reserveCapacity(header.count)
        var offset = headerSize
        for _ in 0..<header.count {
            guard offset + CommitLogRecord.headerSize <= batch.count else { return .failure(.malformedRecords) }
            let kind = LittleEndianFields.get(UInt32.self, batch[...], offset)
            let bodyLength = Int(LittleEndianFields.get(UInt32.self, batch[...], offset + 4))
            let subject = LittleEndianFields.get(UInt64.self, batch[...], offset + 8)
            let bodyStart = offset + CommitLogRecord.headerSize
            guard kind <= UInt32(UInt8.max), bodyLength <= batch.count - bodyStart else { return .failure(.malformedRecords) }
            records.append(CommitLogRecord(kind: UInt8(kind), subject: subject, body: Array(batch[bodyStart..<(bodyStart + bodyLength)])))
            offset = bodyStart + aligned(bodyLength)
        }
        guard offset == batch.count else { return .failure(.malformedRecords) }
        return .success(records)
    }
}
