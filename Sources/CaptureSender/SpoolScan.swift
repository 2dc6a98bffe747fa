import CaptureWire
import CaptureCodecs
import CaptureCore

/// A damaged stretch of a stream's spool, and what it costs the stream.
public struct SpoolDamage: Sendable, Equatable {
    /// Damaged bytes: `length` bytes at `offset` of the segment whose first sequence is `segment`.
    public struct Region: Sendable, Equatable {
        public var segment: UInt64
        public var offset: Int
        public var length: Int

        public init(segment: UInt64, offset: Int, length: Int) {
            self.segment = segment
            self.offset = offset
            self.length = length
        }
    }

    /// What the damage costs the stream.
    public enum Cost: Sendable, Equatable {
        /// Nothing the receiver still needs: the bytes held no record, or only records it has.
        case nothing
        /// The frames `frames` (entries `sequences`) are lost: they are delivered in their place as
        /// gaps (linear PCM) or encoded silence (Opus), so the audio after them keeps its place.
        case frames(Range<Int64>, sequences: ClosedRange<UInt64>)
        /// Everything spooled from frame `from` on (entry `sequence` on) is lost: the damage runs to
        /// the end of the spool, and the stream ends where the damage begins. `from` is nil when
        /// the spool does not say where that was.
        case tail(from: Int64?, sequence: UInt64)
        /// Only the record of the stream's end: the stream ends after its last entry.
        case endRecord
        /// Entries `sequences` (up to frame `until`) are lost and where they began on the timeline
        /// cannot be worked out (`why`): the stream cannot be delivered without them and stays in
        /// the spool.
        case unplaceable(sequences: ClosedRange<UInt64>?, until: Int64?, why: String)
    }

    /// Where the damaged bytes are (empty when records are missing without damaged bytes).
    public var regions: [Region]
    /// What it costs.
    public var cost: Cost

    public init(regions: [Region], cost: Cost) {
        self.regions = regions
        self.cost = cost
    }
}

/// How the frames of damaged records reach the receiver in their place: as `Gap`s (linear PCM: the
/// receiver writes silence and a marker with the reason), or as packets of encoded silence (Opus,
/// whose packets cannot skip time; docs/OPUS.md), one entry per lost sequence either way. Lost
/// sequences beyond what the frames can carry (records of no frames: markers) become markers
/// labelled `lostMarkerLabel` where the damage begins; when the frames can carry every lost
/// sequence, a lost marker's sequence carries some of them and the marker is simply lost.
public struct SpoolDamageFill: Sendable {
    enum Kind: Sendable {
        case gaps
        case silence(packet: [UInt8], framesPerPacket: Int64)
        /// Nothing can stand in for the lost frames (why).
        case unavailable(String)
    }

    let kind: Kind
    /// The gaps' reason.
    let reason: String

    /// Gaps with `reason`.
    public static func gaps(reason: String) -> SpoolDamageFill { SpoolDamageFill(kind: .gaps, reason: reason) }

    /// Packets of `framesPerPacket` frames, each `packet` (a packet that decodes to silence).
    public static func silence(packet: [UInt8], framesPerPacket: Int) -> SpoolDamageFill {
        SpoolDamageFill(kind: .silence(packet: packet, framesPerPacket: Int64(max(1, framesPerPacket))), reason: "")
    }

    /// The label of a marker made in place of a damaged record that carried no frames.
    public static let lostMarkerLabel = "a marker or more was lost to damage in the sender's spool"

    /// The longest stretch filled with encoded silence: as long as the Opus encoder fills a gap.
    static let maximumSilenceFrames: Int64 = 600 * 48_000

    /// Why `frames` frames cannot be `entries` entries of this fill; nil when they can.
    func problem(frames: Int64, entries: UInt64) -> String? {
        guard entries >= 1, frames >= 0 else { return "the records around them do not follow each other on the timeline" }
        switch kind {
        case .gaps:
            // Entries beyond the frames become markers (records of no frames).
            break
        case .silence(_, let framesPerPacket):
            guard frames % framesPerPacket == 0 else {
                return "the \(frames) frames between the records around the damage are not whole packets of \(framesPerPacket) for the \(entries) \(entries == 1 ? "record" : "records") lost"
            }
            guard frames <= Self.maximumSilenceFrames else { return "\(frames) frames are more than the 600 s a stretch of silence may take" }
        case .unavailable(let why):
            return why
        }
        return nil
    }

    /// `count` entries from `sequence` on covering `frames` frames from `start` (see `problem`): as
    /// many as the frames allow (at least one unit each), after markers for the rest.
    func entries(from sequence: UInt64, count: UInt64, start: Int64, frames: Int64) -> [LoggedPacket] {
        var result: [LoggedPacket] = []
        result.reserveCapacity(Int(count))
        let units: Int64
        let unitFrames: Int64
        switch kind {
        case .gaps, .unavailable:
            units = frames
            unitFrames = 1
        case .silence(_, let framesPerPacket):
            units = frames / framesPerPacket
            unitFrames = framesPerPacket
        }
        // Sequences the frames cannot carry (records of no frames, markers) come first, as markers.
        let markers = max(0, Int64(count) - units)
        for index in 0..<markers {
            result.append(LoggedPacket(sequence: sequence + UInt64(index), content: .marker(sampleTime: start, label: Self.lostMarkerLabel)))
        }
        let carrying = Int64(count) - markers
        guard carrying > 0 else { return result }
        // Spread evenly: the first `units % carrying` entries take one unit more.
        let each = units / carrying
        let more = units % carrying
        var position = start
        for index in 0..<carrying {
            let taken = each + (index < more ? 1 : 0)
            let length = taken * unitFrames
            let content: LoggedPacket.Content
            switch kind {
            case .gaps, .unavailable:
                content = .gap(sampleTime: position, length: length, reason: reason)
            case .silence(let packet, let framesPerPacket):
                let packets = Int(taken)
                content = .audio(EncodedPackets(
                    payload: Array([[UInt8]](repeating: packet, count: packets).joined()), packetCount: packets,
                    packetSizes: [UInt32](repeating: UInt32(packet.count), count: packets), firstSampleTime: position,
                    frameCount: packets * Int(framesPerPacket)))
            }
            result.append(LoggedPacket(sequence: sequence + UInt64(markers + index), content: content))
            position += length
        }
        return result
    }
}

/// What a stream's `acked` file records: where the main receiver stood.
public struct SpoolAckedRecord: Sendable, Equatable {
    /// The highest sequence the receiver acknowledged and the sample just past it.
    public var position: StreamPosition
    /// False for an `acked` file of a version before this one (8 bytes: the sequence alone): then
    /// `position.endSampleTime` is 0 and says nothing.
    public var endSampleTimeIsKnown: Bool

    /// The record of `position`, whose end sample time is known (what this version writes).
    public init(position: StreamPosition) {
        self.position = position
        endSampleTimeIsKnown = true
    }

    /// The record of an older version's `acked` file: the sequence alone.
    public init(sequenceOnly sequence: UInt64) {
        position = StreamPosition(lastSequence: sequence, endSampleTime: 0)
        endSampleTimeIsKnown = false
    }

    /// The sample just past the acknowledged audio, when the file records it.
    public var knownEndSampleTime: Int64? { endSampleTimeIsKnown ? position.endSampleTime : nil }

    /// The record an `acked` file holds: 16 bytes (sequence, sample), or 8 (sequence) as older
    /// versions wrote it; nil for anything else or a value no stream reaches (damage: the file is
    /// only an optimisation, and without it the receiver's own position is used).
    public static func decode(_ bytes: [UInt8]) -> SpoolAckedRecord? {
        var reader = BinaryRecordReader(bytes[...])
        guard bytes.count == 8 || bytes.count == 16, let sequence = reader.readUInt64(), sequence <= SpoolRecord.maximumSequence else { return nil }
        guard bytes.count == 16 else { return SpoolAckedRecord(sequenceOnly: sequence) }
        guard let end = reader.readInt64(), end >= 0, end <= SpoolRecord.maximumSampleTime else { return nil }
        return SpoolAckedRecord(position: StreamPosition(lastSequence: sequence, endSampleTime: end))
    }

    /// The 16 bytes of the `acked` file.
    public var encoded: [UInt8] {
        var writer = BinaryRecordWriter(reservingCapacity: 16)
        writer.append(position.lastSequence)
        writer.append(position.endSampleTime)
        return writer.bytes
    }
}

/// The recovery scan of a stream's spool, one segment's bytes at a time, in memory: the step the
/// file-backed reader (`StreamSpool.contents()`) and the `spool` fuzz target share.
///
/// A segment's records run from the sequence in its name, one after another. The scan takes each
/// record that is whole, passes its checksum and is the next one expected; when the bytes at the
/// expected place are not such a record, it **resynchronises**: it looks, byte by byte, for the
/// next record that passes its checksum and carries a sequence at or after the expected one (and no
/// higher than the bytes before it could hold), and reports the bytes skipped as damage with the
/// entries they held. Records with lower sequences (older content of a reused segment) are never
/// taken. What follows the last record of a segment is older content or a record torn by a crash,
/// unless the next segment starts later than the next sequence expected (the lost records were
/// there), or, at the end of the last segment, it is a whole record with the next sequence that
/// fails its checksum (damage, not a tear: a tear cuts a record short), or the segment holds no
/// record at all (a segment always begins with one).
public struct SpoolScanner {
    /// What the scan found, in order.
    public enum Item: Equatable, Sendable {
        /// A record that reads back: an entry at `location`, or the stream's end.
        case entry(Entry)
        /// Damage: `regions`, then entries missing from `fromSequence` (which began at `fromSample`
        /// when known) up to the record found after it (`resumes`: where the stream stands just
        /// before that record, whose sequence and first sample are its `nextSequence` and
        /// `nextSampleTime`), or to the end of the spool (`resumes` nil; `endRecord`: what is there
        /// looks like the end record).
        case damage(Break)
    }

    /// An entry that reads back.
    public struct Entry: Equatable, Sendable {
        public var sequence: UInt64
        public var location: SpoolLocation
        public var payloadBytes: Int
        public var firstSampleTime: Int64
        public var endSampleTime: Int64
        public var isAudio: Bool
    }

    /// A damaged stretch, before its cost is known (see `SpoolContents`).
    public struct Break: Equatable, Sendable {
        public var regions: [SpoolDamage.Region]
        public var fromSequence: UInt64
        public var fromSample: Int64?
        public var resumes: StreamPosition?
        public var endRecord: Bool
    }

    /// Everything found, in order.
    public private(set) var items: [Item] = []
    /// The end of the stream, when its record was found.
    public private(set) var end: StreamEnd?
    /// For each segment scanned: where its last good record ends (what the spool holds of it).
    public private(set) var segmentLengths: [(first: UInt64, length: Int)] = []

    /// The next sequence expected; nil before the first segment.
    private var expected: UInt64?
    /// The sample just past the last entry; nil when not known (before the first entry of a spool
    /// whose first segment does not start the stream).
    private var lastEnd: Int64?
    /// Damaged bytes not yet followed by a good record.
    private var pending: [SpoolDamage.Region] = []
    /// The bytes after the last good record of the last segment scanned (older content, a torn
    /// record or damage), and whether they look like a damaged record (see the type's comment).
    private var leftover: (region: SpoolDamage.Region, damagedRecord: (type: UInt8, position: UInt64)?)?
    private var ended = false

    public init() {}

    /// Scans the bytes of the segment named after sequence `first` (segments in the order of
    /// their names).
    public mutating func scan(segment first: UInt64, bytes: UnsafeRawBufferPointer) {
        var length = 0
        defer { segmentLengths.append((first, length)) }
        guard !ended, first <= SpoolRecord.maximumSequence else { return }
        if let expected {
            if first > expected, let leftover { pending.append(leftover.region) }
        } else {
            expected = first
            lastEnd = first == 1 ? 0 : nil
        }
        leftover = nil
        var offset = 0
        while offset < bytes.count, let next = expected {
            if let (record, size) = SpoolRecord.summary(bytes, at: offset), record.position >= next {
                take(record, at: SpoolLocation(segment: first, offset: Int64(offset), length: size))
                offset += size
                length = offset
                if ended { return }
                continue
            }
            if let found = resynchronize(bytes, from: offset + 1, segment: first) {
                pending.append(SpoolDamage.Region(segment: first, offset: offset, length: found - offset))
                offset = found
                continue
            }
            leftover = (SpoolDamage.Region(segment: first, offset: offset, length: bytes.count - offset),
                        SpoolRecord.claimedPosition(bytes, at: offset))
            return
        }
    }

    /// The damage at the end of the spool, once every segment is scanned; call it once, last.
    public mutating func finish() {
        guard !ended, let expected else { return }
        var regions = pending
        var endRecord = false
        if let leftover {
            let claimed = leftover.damagedRecord.flatMap { $0.position == expected ? $0 : nil }
            // A segment always begins with a record: bytes there that are none are damage.
            let atStart = leftover.region.offset == 0 && leftover.region.length >= SpoolRecord.minimumSize
            if claimed != nil || atStart || !pending.isEmpty {
                regions.append(leftover.region)
                endRecord = claimed?.type == SpoolRecord.endType
            }
        }
        guard !regions.isEmpty else { return }
        items.append(.damage(Break(regions: regions, fromSequence: expected, fromSample: lastEnd, resumes: nil, endRecord: endRecord)))
        pending = []
    }

    private mutating func take(_ record: SpoolRecord.Summary, at location: SpoolLocation) {
        guard let next = expected else { return }
        let follows = lastEnd.map { $0 == record.firstSampleTime } ?? true
        if record.position > next || !pending.isEmpty || !follows {
            items.append(.damage(Break(
                regions: pending, fromSequence: next, fromSample: lastEnd, resumes: StreamPosition(nextSequence: record.position, nextSampleTime: record.firstSampleTime), endRecord: false)))
            pending = []
        }
        switch record.kind {
        case .audio, .gap, .marker:
            items.append(.entry(Entry(
                sequence: record.position, location: location, payloadBytes: record.payloadBytes,
                firstSampleTime: record.firstSampleTime, endSampleTime: record.endSampleTime, isAudio: record.kind == .audio)))
            expected = record.position + 1
            lastEnd = record.endSampleTime
        case .end:
            end = record.streamEnd
            ended = true
        }
    }

    /// The offset of the next good record at or after `from` whose position is at least the one
    /// expected and at most what a segment starting at `segment` can hold at that offset.
    private func resynchronize(_ bytes: UnsafeRawBufferPointer, from start: Int, segment first: UInt64) -> Int? {
        guard let next = expected, start < bytes.count else { return nil }
        var offset = start
        while bytes.count - offset >= SpoolRecord.minimumSize {
            let highest = min(SpoolRecord.maximumSequence, first + UInt64(offset / SpoolRecord.minimumSize) + 1)
            if next <= highest, SpoolRecord.mightStart(bytes, at: offset, positions: next...highest),
                let (record, _) = SpoolRecord.summary(bytes, at: offset), record.position >= next {
                return offset
            }
            offset += 1
        }
        return nil
    }
}

/// What a stream's spool holds, read back after a restart: the entries to deliver (with entries
/// made up in place of damaged records), the end, and the damage found with what it costs.
public struct SpoolContents: Sendable {
    /// One entry to deliver.
    public struct Entry: Sendable, Equatable {
        public var sequence: UInt64
        /// Where it is in the spool; nil for an entry made up in place of damaged records.
        public var location: SpoolLocation?
        /// Payload bytes it takes in the spool (0 for an entry made up).
        public var bytes: Int
        /// The sample just past it.
        public var endSampleTime: Int64
        /// The entry itself, when it was made up in place of damaged records (see `SpoolDamageFill`).
        public var replacement: LoggedPacket?
    }

    /// The entries to deliver (those the receiver has not acknowledged), oldest first, contiguous;
    /// when the stream is undeliverable, those before the damage that makes it so.
    public var entries: [Entry]
    /// The end of the stream, if capture had ended and its record reads back.
    public var end: StreamEnd?
    /// The highest sequence the receiver acknowledged, as last recorded.
    public var acknowledged: UInt64
    /// The sample index just past the last entry in the spool (acknowledged or not); 0 when none.
    public var endOfLastEntry: Int64
    /// Whether the spool ever held captured audio or the receiver acknowledged anything of the
    /// stream. When false (only gaps, or nothing: the run ended or died before its first buffer)
    /// there is nothing to deliver and the stream must never become a file. Damage that may have
    /// cost audio counts as audio: a damaged stream is never taken for an empty one.
    public var holdsCapturedAudio: Bool
    /// The damage found, in the order of the stream.
    public var damage: [SpoolDamage]
    /// Why the stream cannot be delivered as it is (damage whose place on the timeline is not
    /// known, or nothing of it reads back); nil when it can.
    public var undeliverable: String?

    /// The contents a finished scan found, with the receiver's position from the `acked` file, and
    /// entries made with `fill` in place of damaged records the receiver does not have.
    public init(scan: SpoolScanner, acknowledged record: SpoolAckedRecord?, fill: SpoolDamageFill) {
        let acknowledgedPosition = record?.position ?? .start
        let acknowledged = acknowledgedPosition.lastSequence
        let acknowledgedEnd = record?.knownEndSampleTime
        var entries: [Entry] = []
        var damage: [SpoolDamage] = []
        var sawAudio = false
        var endOfLastEntry: Int64 = 0
        var undeliverable: String?
        for item in scan.items {
            switch item {
            case .entry(let entry):
                if entry.isAudio { sawAudio = true }
                endOfLastEntry = entry.endSampleTime
                // Entries after damage that cannot be placed are not delivered (nor is anything).
                if entry.sequence > acknowledged, undeliverable == nil {
                    entries.append(Entry(sequence: entry.sequence, location: entry.location, bytes: entry.payloadBytes,
                                         endSampleTime: entry.endSampleTime, replacement: nil))
                }
            case .damage(let found):
                let cost = Self.cost(of: found, acknowledged: acknowledgedPosition, acknowledgedEnd: acknowledgedEnd, fill: fill)
                damage.append(SpoolDamage(regions: found.regions, cost: cost))
                switch cost {
                case .frames(let frames, let sequences):
                    guard undeliverable == nil else { break }
                    for made in fill.entries(from: sequences.lowerBound, count: sequences.upperBound - sequences.lowerBound + 1,
                                             start: frames.lowerBound, frames: frames.upperBound - frames.lowerBound) {
                        entries.append(Entry(sequence: made.sequence, location: nil, bytes: 0, endSampleTime: made.endSampleTime, replacement: made))
                    }
                    endOfLastEntry = frames.upperBound
                case .unplaceable(_, _, let why):
                    undeliverable = undeliverable ?? why
                case .nothing, .tail, .endRecord:
                    break
                }
            }
        }
        let costly = damage.contains { $0.cost != .nothing && $0.cost != .endRecord }
        if undeliverable == nil, costly, !sawAudio, acknowledged == 0 {
            undeliverable = "none of its audio reads back"
        }
        if entries.isEmpty, let acknowledgedEnd { endOfLastEntry = max(endOfLastEntry, acknowledgedEnd) }
        self.entries = entries
        self.end = scan.end
        self.acknowledged = acknowledged
        self.endOfLastEntry = endOfLastEntry
        self.holdsCapturedAudio = sawAudio || acknowledged > 0 || costly
        self.damage = damage
        self.undeliverable = undeliverable
    }

    /// What a damaged stretch costs, given what the receiver acknowledged (see `SpoolDamage.Cost`;
    /// `acknowledgedEnd`: where its audio ends, when the `acked` file records it).
    private static func cost(
        of found: SpoolScanner.Break, acknowledged: StreamPosition, acknowledgedEnd: Int64?, fill: SpoolDamageFill
    ) -> SpoolDamage.Cost {
        guard let resumes = found.resumes else {
            if found.endRecord { return .endRecord }
            if found.fromSequence > acknowledged.lastSequence { return .tail(from: found.fromSample, sequence: found.fromSequence) }
            return .tail(from: acknowledgedEnd, sequence: acknowledged.nextSequence)
        }
        // The receiver has everything up to `acknowledged`: only what lies beyond is lost.
        let first = max(found.fromSequence, acknowledged.nextSequence)
        guard first <= resumes.lastSequence else {
            if resumes.nextSequence > acknowledged.lastSequence, let from = found.fromSample, from != resumes.nextSampleTime {
                return .unplaceable(sequences: nil, until: resumes.nextSampleTime, why: "its records do not follow each other on the stream's timeline")
            }
            return .nothing
        }
        let sequences = first...resumes.lastSequence
        let start: Int64?
        if first == found.fromSequence, let from = found.fromSample {
            start = from
        } else {
            // The lost stretch starts where the receiver's acknowledged audio ends.
            start = first == acknowledged.nextSequence ? acknowledgedEnd : nil
        }
        guard let start else {
            return .unplaceable(sequences: sequences, until: resumes.nextSampleTime,
                                why: "the spool does not record where the damaged records began: its acked file is from an older version")
        }
        let count = sequences.upperBound - sequences.lowerBound + 1
        let bytes = found.regions.reduce(0) { $0 + $1.length }
        guard count <= UInt64(bytes / SpoolRecord.minimumSize + 1) else {
            return .unplaceable(sequences: sequences, until: resumes.nextSampleTime,
                                why: "more records are missing than the damaged bytes could have held (a segment file is missing)")
        }
        let frames = resumes.nextSampleTime - start
        if let problem = fill.problem(frames: frames, entries: count) {
            return .unplaceable(sequences: sequences, until: resumes.nextSampleTime, why: problem)
        }
        return .frames(start..<resumes.nextSampleTime, sequences: sequences)
    }
}
