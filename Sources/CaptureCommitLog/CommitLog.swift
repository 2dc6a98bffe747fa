import CaptureCore

/// The receiver's commit log, written: records are appended to an open batch, and `commit()` writes
/// every batch since the last commit and makes them durable with one fdatasync of the segment file
/// (two when the batches cross into the next segment). That is the group commit of a round: however
/// many streams a round covers, it costs one sync of one file, and only after it returns may their
/// audio be acknowledged.
///
/// The log is endless, cut into fixed-size segment files. A checkpoint (the recordings durable up to
/// a position) lets the segments before it be reused: they are renamed to the numbers the log will
/// reach next and overwritten in place, as PostgreSQL recycles WAL segments, so the log's disk use is
/// bounded by what lies between checkpoints and no segment needs zero-filling twice. Segments are
/// made zero-filled and synced before they are written, so a round's fdatasync never allocates; the
/// next one is made ahead, on a thread of its own (`SegmentPreparer`), so no round waits for that.
///
/// A failed write or sync is final for this opening of the log (as PostgreSQL treats a failed fsync:
/// on Linux the kernel may have dropped the unsynced pages, so a retry could report success for data
/// that is gone): every later call says so, and the receiver must restart and replay. A full volume
/// when a new segment is needed is not final: nothing is appended, and a checkpoint that frees
/// segments makes room again.
///
/// Made by `CommitLogReader.startWriting()`. Not thread-safe: one thread (the receiver's commit
/// thread) uses it.
public final class CommitLog {
    /// 64 MiB: a round of 10,000 streams at 16 kB/s and 200 ms is 32 MB.
    public static let defaultSegmentSize: UInt64 = 64 << 20
    /// Recycled segments kept ready beyond the one being written, at least: more when the log
    /// crossed more segments between its last two checkpoints (PostgreSQL likewise recycles as many
    /// WAL segments as it expects the next checkpoint cycle to fill), so that a busy receiver
    /// reuses segments instead of zero-filling new ones.
    public static let minimumSpareSegments = 2

    let folder: CommitLogFolder
    private var control: CommitLogControl
    private var geometry: LogGeometry { control.geometry }
    /// Where the open batch begins (or the next batch will).
    private var batchStart: LogPosition
    private var batchRecords: [CommitLogRecord] = []
    private var batchBodySize = 0
    /// Sealed batches not yet written, in log order.
    private var pending: [(position: LogPosition, bytes: [UInt8])] = []
    private var segments: [UInt64: DurableFile] = [:]
    /// Makes the segment after the one being written, off the commit thread.
    private let preparer: SegmentPreparer
    /// The segment last asked of `preparer`.
    private var askedToPrepare: UInt64?
    private var failure: CommitLogError?
    /// Where this opening's first batch went, and the epoch of the batch that ends there (the last
    /// one replayed): what a checkpoint records as the epoch of the batch before it.
    private let openingStart: LogPosition
    private let recoveredLastEpoch: UInt64
    /// Everything before this position is durable.
    public private(set) var durableEnd: LogPosition

    init(folder: CommitLogFolder, control: CommitLogControl, end: LogPosition, lastEpoch: UInt64) throws(CommitLogError) {
        self.folder = folder
        self.control = control
        openingStart = end
        recoveredLastEpoch = lastEpoch
        batchStart = end
        durableEnd = end
        preparer = SegmentPreparer(folder: folder, segmentSize: control.geometry.segmentSize)
        _ = try segment(geometry.segment(of: end))
        prepareNextSegment()
    }

    /// This opening's epoch (stamped on every batch it writes).
    public var epoch: UInt64 { control.epoch }
    /// Where replay would start now.
    public var checkpoint: LogPosition { control.checkpoint }
    /// The log's geometry.
    public var segmentSize: UInt64 { geometry.segmentSize }
    /// The largest record body a segment holds.
    public var largestRecordBody: Int { Int(geometry.segmentSize) - CommitLogBatch.headerSize - CommitLogRecord.headerSize }
    /// Where the next record would go (past everything appended, committed or not).
    public var appendEnd: LogPosition { LogPosition(batchStart.offset + UInt64(batchRecords.isEmpty ? 0 : CommitLogBatch.headerSize + batchBodySize)) }

    /// Adds `record` to the open batch; a batch that would not fit in its segment is sealed and the
    /// record opens a new batch at the next segment's start (made now when it is missing: a full
    /// volume throws `.logVolumeFull` and appends nothing). Nothing is written until `commit()`.
    public func append(_ record: CommitLogRecord) throws(CommitLogError) {
        if let failure { throw .failedEarlier(failure.description) }
        guard record.body.count <= largestRecordBody else { throw .recordTooLarge(size: record.body.count, limit: largestRecordBody) }
        let needed = UInt64(CommitLogBatch.headerSize + batchBodySize + record.encodedSize)
        if needed > geometry.room(at: batchStart) {
            let next = geometry.segment(of: batchStart) + 1
            _ = try segment(next)
            if !batchRecords.isEmpty || geometry.room(at: batchStart) >= UInt64(CommitLogBatch.headerSize) {
                // The segment's last batch says that the log goes on in the next one (with no
                // records when the open batch is empty).
                sealBatch(continuesInNextSegment: true)
            }
            batchStart = geometry.start(ofSegment: next)
        }
        batchRecords.append(record)
        batchBodySize += record.encodedSize
    }

    /// Writes everything appended since the last commit and makes it durable (one pwrite and one
    /// fdatasync per segment touched, a segment synced before anything is written to the next, so
    /// that a valid batch always means the ones before it were synced); returns the position
    /// everything before which is durable. A failure here is final for this opening (see the type's
    /// documentation).
    @discardableResult
    public func commit() throws(CommitLogError) -> LogPosition {
        if let failure { throw .failedEarlier(failure.description) }
        sealBatch()
        guard !pending.isEmpty else { return durableEnd }
        do throws(CommitLogError) {
            var index = 0
            while index < pending.count {
                // Contiguous batches in one segment go in one write.
                let number = geometry.segment(of: pending[index].position)
                var bytes = pending[index].bytes
                let first = pending[index].position
                index += 1
                while index < pending.count, geometry.segment(of: pending[index].position) == number,
                    pending[index].position.offset == first.offset + UInt64(bytes.count)
                {
                    bytes += pending[index].bytes
                    index += 1
                }
                let file = try segment(number)
                do {
                    if CrashPoint.midAppend.isArmed { try file.write(Array(bytes.prefix(bytes.count / 2)), at: geometry.offsetInSegment(first)) }
                    CrashPoint.midAppend.reached()
                    try file.write(bytes, at: geometry.offsetInSegment(first))
                    CrashPoint.afterAppendBeforeSync.reached()
                    try file.synchronize()
                } catch {
                    throw CommitLogError.writeFailed(error)
                }
            }
        } catch {
            failure = error
            throw error
        }
        pending.removeAll(keepingCapacity: true)
        durableEnd = batchStart
        closeSegments(before: geometry.segment(of: batchStart))
        prepareNextSegment()
        return durableEnd
    }

    /// Records that everything before `position` (at most `durableEnd`) is durable in the
    /// recordings, so replay starts there; segments wholly before it are recycled (renamed to the
    /// numbers the log reaches next, as many as the log crossed since the previous checkpoint and at
    /// least `minimumSpareSegments`) or removed.
    public func checkpoint(through position: LogPosition) throws(CommitLogError) {
        if let failure { throw .failedEarlier(failure.description) }
        let position = min(position, durableEnd)
        guard position > control.checkpoint else { return }
        let crossed = Int(geometry.segment(of: position) - geometry.segment(of: control.checkpoint))
        let wantedSpares = max(Self.minimumSpareSegments, crossed + 1)
        var updated = control
        updated.checkpoint = position
        // The epoch of the batch that ends at the checkpoint: this opening's when it wrote that batch;
        // the replayed chain's last when the checkpoint is where this opening began; else the old
        // checkpoint's, which no batch after it is older than.
        updated.checkpointEpoch =
            position > openingStart ? control.epoch : position == openingStart ? recoveredLastEpoch : control.checkpointEpoch
        try folder.writeControl(updated)
        control = updated
        // The folder must not change while it is listed and its segments renamed.
        preparer.quiesce()
        askedToPrepare = nil
        defer { prepareNextSegment() }
        let firstKept = geometry.segment(of: position)
        let present = try folder.segmentNumbers()
        let current = geometry.segment(of: batchStart)
        var spares = present.filter { $0 > current }.count
        var nextNumber = max(present.last ?? current, current) + 1
        var changed = false
        for number in present where number < firstKept && number < current {
            segments[number]?.close()
            segments[number] = nil
            if spares < wantedSpares {
                try folder.renameSegment(number, to: nextNumber)
                nextNumber += 1
                spares += 1
            } else {
                try folder.removeSegment(number)
            }
            changed = true
        }
        if changed { try folder.synchronize() }
    }

    deinit { preparer.stop() }

    /// Waits until the segment after the one being written is made ahead (for tests).
    func waitForPreparedSegment() { preparer.waitUntilPrepared() }

    /// Closes the segment files (the log can be read again from its folder).
    public func close() {
        preparer.stop()
        for file in segments.values { file.close() }
        segments.removeAll()
    }

    // MARK: - Private

    private func stamp(at position: LogPosition) -> CommitLogBatch.Stamp {
        CommitLogBatch.Stamp(logID: control.logID, epoch: control.epoch, position: position)
    }

    private func sealBatch(continuesInNextSegment: Bool = false) {
        guard !batchRecords.isEmpty || continuesInNextSegment else { return }
        let bytes = CommitLogBatch.encode(batchRecords, stamp: stamp(at: batchStart), continuesInNextSegment: continuesInNextSegment)
        pending.append((batchStart, bytes))
        batchStart = LogPosition(batchStart.offset + UInt64(bytes.count))
        batchRecords.removeAll(keepingCapacity: true)
        batchBodySize = 0
    }

    /// Asks for the segment after the one being written to be made ahead (a failure there is
    /// retried when the segment is needed, and reported then).
    private func prepareNextSegment() {
        let next = geometry.segment(of: batchStart) + 1
        guard segments[next] == nil, askedToPrepare != next else { return }
        askedToPrepare = next
        preparer.prepare(next)
    }

    /// Segment `number`, open (made first when missing: by `preparer` when it was asked to, else here).
    private func segment(_ number: UInt64) throws(CommitLogError) -> DurableFile {
        if let file = segments[number] { return file }
        let file: DurableFile
        if let prepared = preparer.take(number) {
            file = prepared
        } else if let existing = try folder.openSegment(number) {
            file = existing
        } else {
            file = try folder.makeSegment(number, size: geometry.segmentSize)
        }
        segments[number] = file
        return file
    }

    private func closeSegments(before number: UInt64) {
        for (open, file) in segments where open < number {
            file.close()
            segments[open] = nil
        }
    }
}
