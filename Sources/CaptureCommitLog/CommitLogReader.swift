import CaptureCore

/// Where reading the log stopped, and why: at the clean end of what was written, or at a batch cut
/// short (a crash while it was being written, before the round's sync returned, so nothing in it was
/// acknowledged).
public enum CommitLogEnd: Equatable, Sendable {
    /// The log ends at `position`: past it lies no batch of this chain (zeros, the old contents of a
    /// recycled segment, a header torn by a crash, or an earlier opening's leftovers).
    case clean(LogPosition)
    /// A batch of this chain begins at `position` but is cut short or fails its checksum, and
    /// nothing valid follows it: a write torn by a crash. Its records were never acknowledged and
    /// are ignored.
    case tornTail(LogPosition, CommitLogBatch.Damage)

    /// Where the next batch goes.
    public var position: LogPosition {
        switch self {
        case .clean(let position), .tornTail(let position, _): return position
        }
    }
}

/// Reads the commit log from its last checkpoint, batch by batch, for replay at the receiver's
/// start; then `startWriting()` turns it into the `CommitLog` that appends after the last valid
/// batch. Opening a folder without a log creates one.
///
/// It follows the chain of batches: each must name its own position, this log, and an epoch no
/// older than the batch before it; a batch flagged as its segment's last, or too little room for a
/// header, moves to the next segment. The first batch that breaks the chain ends the log. A damaged batch followed by
/// a valid one is not an end but damage, and is reported as such (`CommitLogError.damaged`).
/// Not thread-safe: one thread at a time.
public final class CommitLogReader {
    let folder: CommitLogFolder
    /// The control file as read (or created); `startWriting` writes it with the next epoch.
    private(set) var control: CommitLogControl
    /// The next batch's position, and the epoch of the batch before it.
    private var position: LogPosition
    private var epochFloor: UInt64
    private var openSegment: (number: UInt64, file: DurableFile)?
    /// Why reading stopped; nil until it has.
    public private(set) var end: CommitLogEnd?
    /// Batches read so far.
    public private(set) var batchCount = 0

    /// Opens the log in `directory` (which must exist): reads its control file, or creates a new log
    /// of `segmentSize` when the folder holds none.
    public init(directory: String, segmentSize: UInt64 = CommitLog.defaultSegmentSize) throws(CommitLogError) {
        folder = CommitLogFolder(directory: directory)
        if let existing = try folder.readControl() {
            control = existing
        } else {
            guard try folder.segmentNumbers().isEmpty else { throw .missingControl(directory: directory) }
            guard let geometry = LogGeometry(segmentSize: segmentSize) else { throw .unusableSegmentSize(segmentSize) }
            control = CommitLogControl(logID: UInt64.random(in: 1...UInt64.max), geometry: geometry, epoch: 0, checkpoint: .start, checkpointEpoch: 0)
            try folder.writeControl(control)
        }
        position = control.checkpoint
        epochFloor = control.checkpointEpoch
    }

    /// The log's geometry (from its control file).
    public var geometry: LogGeometry { control.geometry }
    /// Where replay began.
    public var checkpoint: LogPosition { control.checkpoint }

    /// The records of the next batch; nil at the log's end (then `end` says where and why).
    public func next() throws(CommitLogError) -> [CommitLogRecord]? {
        guard end == nil else { return nil }
        while true {
            let geometry = control.geometry
            if geometry.room(at: position) < UInt64(CommitLogBatch.headerSize) {
                position = geometry.start(ofSegment: geometry.segment(of: position) + 1)
            }
            guard let file = try segment(geometry.segment(of: position)) else {
                end = .clean(position)
                return nil
            }
            let expected = CommitLogBatch.Expectation(
                logID: control.logID, position: position, epochs: min(epochFloor, control.epoch)...control.epoch, room: geometry.room(at: position))
            let head = try read(file, count: CommitLogBatch.headerSize, at: position)
            let header: CommitLogBatch.Header
            switch CommitLogBatch.header(head[...], expected: expected) {
            case .success(let found):
                header = found
            case .failure(.foreignLog(let logID)):
                throw .foreignSegment(path: file.path, logID: logID)
            case .failure:
                try refuseDamage(at: position, in: file, reason: "the bytes there are not a batch")
                end = .clean(position)
                return nil
            }
            let bytes = header.length == CommitLogBatch.headerSize ? head : try read(file, count: header.length, at: position)
            switch CommitLogBatch.records(bytes[...], header: header) {
            case .success(let records):
                let batchPosition = position
                epochFloor = header.stamp.epoch
                position = header.continuesInNextSegment
                    ? geometry.start(ofSegment: geometry.segment(of: batchPosition) + 1)
                    : LogPosition(batchPosition.offset + UInt64(header.length))
                // A batch of no records only says where the log goes on.
                if records.isEmpty { continue }
                batchCount += 1
                return records
            case .failure(let damage):
                try refuseDamage(at: position, in: file, reason: Self.words(damage))
                end = .tornTail(position, damage)
                return nil
            }
        }
    }

    /// Reads to the end, then returns the log that appends after its last valid batch (with the
    /// next epoch, recorded in the control file before anything is written).
    public func startWriting() throws(CommitLogError) -> CommitLog {
        while try next() != nil {}
        openSegment = nil
        var control = self.control
        control.epoch += 1
        try folder.writeControl(control)
        return try CommitLog(folder: folder, control: control, end: end?.position ?? position, lastEpoch: epochFloor)
    }

    // MARK: - Private

    private func segment(_ number: UInt64) throws(CommitLogError) -> DurableFile? {
        if let openSegment, openSegment.number == number { return openSegment.file }
        openSegment = nil
        guard let file = try folder.openSegment(number) else { return nil }
        openSegment = (number, file)
        return file
    }

    private func read(_ file: DurableFile, count: Int, at position: LogPosition) throws(CommitLogError) -> [UInt8] {
        do {
            return try file.read(count: count, at: control.geometry.offsetInSegment(position))
        } catch {
            throw .unreadable(path: file.path, reason: error.description)
        }
    }

    /// Throws `.damaged` when a valid batch of this chain lies past `position` (where reading
    /// stopped): in the rest of its segment, at any aligned offset, or at the next segment's start.
    private func refuseDamage(at position: LogPosition, in file: DurableFile, reason: String) throws(CommitLogError) {
        let geometry = control.geometry
        let room = Int(geometry.room(at: position))
        let rest = try read(file, count: room, at: position)
        let epochs = min(epochFloor, control.epoch)...control.epoch
        var offset = Int(LogGeometry.alignment)
        while offset + CommitLogBatch.headerSize <= rest.count {
            // "CLB1": only offsets that begin like a header are decoded.
            if rest[offset] == 0x43, rest[offset + 1] == 0x4C, rest[offset + 2] == 0x42, rest[offset + 3] == 0x31 {
                let candidate = LogPosition(position.offset + UInt64(offset))
                let expected = CommitLogBatch.Expectation(logID: control.logID, position: candidate, epochs: epochs, room: UInt64(room - offset))
                if case .success(let header) = CommitLogBatch.header(rest[offset...], expected: expected),
                    case .success = CommitLogBatch.records(rest[offset...], header: header)
                {
                    throw .damaged(path: file.path, position: position, reason: reason + ", yet a batch written after it follows at \(candidate.offset)")
                }
            }
            offset += Int(LogGeometry.alignment)
        }
        let nextStart = geometry.start(ofSegment: geometry.segment(of: position) + 1)
        guard let next = try folder.openSegment(geometry.segment(of: nextStart)) else { return }
        let head = try read(next, count: CommitLogBatch.headerSize, at: nextStart)
        let expected = CommitLogBatch.Expectation(logID: control.logID, position: nextStart, epochs: epochs, room: geometry.segmentSize)
        guard case .success(let header) = CommitLogBatch.header(head[...], expected: expected) else { return }
        if case .success = CommitLogBatch.records(try read(next, count: header.length, at: nextStart)[...], header: header) {
            throw .damaged(path: file.path, position: position, reason: reason + ", yet a batch written after it follows at \(nextStart.offset)")
        }
    }

    private static func words(_ damage: CommitLogBatch.Damage) -> String {
        switch damage {
        case .cutOff(let available): return "the segment ends after \(available) bytes of the batch"
        case .checksumMismatch: return "its checksum does not match"
        case .malformedRecords: return "its records do not fill it as its header says"
        }
    }
}
