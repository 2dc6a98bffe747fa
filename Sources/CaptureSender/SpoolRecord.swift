import CaptureCodecs
import CaptureCore
import CaptureWire

/// One record of a spool segment: a log entry (audio, gap, filled gap or marker) or the end of the stream.
enum SpoolRecord: Equatable {
    case entry(LoggedPacket)
    case end(StreamEnd)

    static let audioType: UInt8 = 0x41  // 'A'
    static let gapType: UInt8 = 0x47  // 'G'
    static let markerType: UInt8 = 0x4D  // 'M': sequence, sample time (Int64), the label's UTF-8 bytes
    static let filledGapType: UInt8 = 0x46  // 'F': sequence, position, sample time, length (Int64 each), the reason's UTF-8 bytes
    static let endType: UInt8 = 0x45  // 'E'
    /// Length (UInt32) and checksum (UInt64) before each body.
    static let headerSize = 12
    /// Bodies above this are corruption, not audio (frames are at most a few MiB).
    static let maximumBody = 64 << 20
    /// The smallest body: its type and sequence.
    static let minimumBody = 9
    /// Bytes the smallest record takes: no segment holds more records than its size over this.
    static let minimumSize = headerSize + minimumBody
    /// The highest sequence a record may carry: the protocol's (`WireProtocol.maximumSequence`);
    /// anything above is damage, and counting on from it can never overflow.
    static let maximumSequence: UInt64 = 1 << 62
    /// The highest sample time a record may reach: 2^62 frames (3 million years at 48 kHz). A
    /// record beyond it is damage; sums and differences of two sample times can never overflow.
    static let maximumSampleTime: Int64 = 1 << 62

    /// A record framed for a segment file: body length, `RecordChecksum` of the body, body. The
    /// body's audio payload is not copied behind its header: `head` holds everything up to it and
    /// `payload` is the entry's own storage, written together with one `pwritev`.
    struct Framed {
        /// Length, checksum and the body up to the payload.
        var head: [UInt8]
        /// The rest of the body (the audio payload, or nothing).
        var payload: [UInt8]

        /// Bytes the record takes in the segment.
        var count: Int { head.count + payload.count }
    }

    /// The record framed for a segment file.
    func framed() -> Framed {
        var body = BinaryRecordWriter(reservingCapacity: 64)
        var payload: [UInt8] = []
        switch self {
        case .entry(let entry):
            switch entry.content {
            case .audio(let packets):
                body.append(Self.audioType)
                body.append(entry.sequence)
                body.append(packets.firstSampleTime)
                body.append(UInt32(packets.frameCount))
                body.append(UInt32(packets.packetCount))
                body.append(UInt32(packets.packetSizes.count))
                for size in packets.packetSizes { body.append(size) }
                payload = packets.payload
            case .gap(let sampleTime, let length, let reason):
                body.append(Self.gapType)
                body.append(entry.sequence)
                body.append(sampleTime)
                body.append(length)
                body.append(contentsOf: reason.utf8)
            case .marker(let sampleTime, let label):
                body.append(Self.markerType)
                body.append(entry.sequence)
                body.append(sampleTime)
                body.append(contentsOf: label.utf8)
            case .filledGap(let position, let sampleTime, let length, let reason):
                body.append(Self.filledGapType)
                body.append(entry.sequence)
                body.append(position)
                body.append(sampleTime)
                body.append(length)
                body.append(contentsOf: reason.utf8)
            }
        case .end(let end):
            body.append(Self.endType)
            body.append(end.position.lastSequence)
            body.append(end.position.endSampleTime)
            body.append(UInt32(end.remainderFrames))
            body.append(contentsOf: end.reason.utf8)
        }
        var checksum = RecordChecksum.Running()
        checksum.add(body.bytes)
        checksum.add(payload)
        var head = BinaryRecordWriter(reservingCapacity: body.bytes.count + Self.headerSize)
        head.append(UInt32(body.bytes.count + payload.count))
        head.append(checksum.value)
        head.append(contentsOf: body.bytes)
        return Framed(head: head.bytes, payload: payload)
    }

    /// What the recovery scan needs of a record, without its payload: where it sits in the
    /// sequences and on the sample timeline.
    struct Summary: Equatable {
        /// `.marker` stands for every entry of no frames (markers and filled gaps).
        enum Kind: Equatable { case audio, gap, marker, end }
        var kind: Kind
        /// The entry's sequence; for the end record, the sequence after the last entry.
        var position: UInt64
        /// The entry's first sample (a gap's start); for the end record, the stream's end.
        var firstSampleTime: Int64
        /// The sample just past the entry; for the end record, the stream's end.
        var endSampleTime: Int64
        /// Payload bytes (audio only).
        var payloadBytes: Int
        /// The stream's end (the end record only).
        var streamEnd: StreamEnd? = nil
    }

    /// The record that starts at `offset` of `bytes` and its size, when a whole record with a good
    /// checksum and sane values is there; nil otherwise (cut off, damaged, or no record at all).
    static func parse(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> (record: SpoolRecord, size: Int)? {
        guard let body = checkedBody(bytes, at: offset), let record = decode(body: ArraySlice(body)) else { return nil }
        return (record, headerSize + body.count)
    }

    /// The summary of the record that starts at `offset` of `bytes` and its size (see `parse`),
    /// without copying its payload.
    static func summary(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> (summary: Summary, size: Int)? {
        guard let body = checkedBody(bytes, at: offset), let summary = summarize(body: body) else { return nil }
        return (summary, headerSize + body.count)
    }

    /// Whether a record of a position from `positions` could start at `offset`: a cheap look at its
    /// header and the first bytes of its body, before its checksum is computed (the resynchronising
    /// scan asks this at every byte of a damaged stretch).
    static func mightStart(_ bytes: UnsafeRawBufferPointer, at offset: Int, positions: ClosedRange<UInt64>) -> Bool {
        guard offset >= 0, bytes.count - offset >= minimumSize else { return false }
        // The type byte first: it turns away all but 5 offsets in 256 with one comparison.
        let type = bytes[offset + headerSize]
        guard type == audioType || type == gapType || type == markerType || type == filledGapType || type == endType else { return false }
        let length = Int(load(UInt32.self, bytes, offset))
        guard length >= minimumBody, length <= maximumBody, length <= bytes.count - offset - headerSize else { return false }
        let sequence = load(UInt64.self, bytes, offset + headerSize + 1)
        return type == endType ? sequence < maximumSequence && positions.contains(sequence + 1) : positions.contains(sequence)
    }

    /// The record header at `offset` of `bytes`, when the record it announces is whole: its type
    /// and the position its sequence field claims (the entry's sequence, or the sequence after the
    /// end record's last entry). The recovery scan asks it of a record that failed its checksum.
    static func claimedPosition(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> (type: UInt8, position: UInt64)? {
        guard offset >= 0, bytes.count - offset >= minimumSize else { return nil }
        let length = Int(load(UInt32.self, bytes, offset))
        guard length >= minimumBody, length <= maximumBody, length <= bytes.count - offset - headerSize else { return nil }
        let type = bytes[offset + headerSize]
        let sequence = load(UInt64.self, bytes, offset + headerSize + 1)
        guard sequence < maximumSequence else { return nil }
        switch type {
        case audioType, gapType, markerType, filledGapType: return (type, sequence)
        case endType: return (type, sequence + 1)
        default: return nil
        }
    }

    private static func load(_: UInt32.Type, _ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    private static func load(_: UInt64.Type, _ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// The body of the record at `offset` when it is whole and its checksum holds.
    private static func checkedBody(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UnsafeRawBufferPointer? {
        guard offset >= 0, bytes.count - offset >= headerSize else { return nil }
        let length = Int(load(UInt32.self, bytes, offset))
        guard length >= minimumBody, length <= maximumBody, length <= bytes.count - offset - headerSize else { return nil }
        let checksum = load(UInt64.self, bytes, offset + 4)
        let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + headerSize)..<(offset + headerSize + length)])
        guard RecordChecksum.of(body) == checksum else { return nil }
        return body
    }

    /// The fixed fields of an audio body, checked: its sequence, first sample, frame and packet
    /// counts, its packet sizes (VBR: one per packet, adding up to the payload exactly) and where
    /// its payload starts in the body.
    private struct AudioFields {
        var sequence: UInt64
        var first: Int64
        var frames: Int
        var packets: Int
        var sizes: [UInt32]
        var payloadOffset: Int
    }

    /// Type, sequence, first sample, frame count, packet count and size count: 29 bytes.
    private static let audioFixedBytes = 29

    private static func audioFields(_ body: UnsafeRawBufferPointer) -> AudioFields? {
        guard body.count >= audioFixedBytes, body[0] == audioType else { return nil }
        let sequence = load(UInt64.self, body, 1)
        let first = Int64(bitPattern: load(UInt64.self, body, 9))
        let frames = load(UInt32.self, body, 17)
        let packets = load(UInt32.self, body, 21)
        let sizeCount = Int(load(UInt32.self, body, 25))
        guard sequence <= maximumSequence, first >= 0, first <= maximumSampleTime - Int64(frames),
            sizeCount <= (body.count - audioFixedBytes) / 4
        else { return nil }
        var sizes: [UInt32] = []
        sizes.reserveCapacity(sizeCount)
        var total = 0
        for index in 0..<sizeCount {
            let size = load(UInt32.self, body, audioFixedBytes + 4 * index)
            sizes.append(size)
            total += Int(size)
        }
        let payloadOffset = audioFixedBytes + 4 * sizeCount
        guard sizes.isEmpty || (sizes.count == Int(packets) && total == body.count - payloadOffset) else { return nil }
        return AudioFields(sequence: sequence, first: first, frames: Int(frames), packets: Int(packets), sizes: sizes, payloadOffset: payloadOffset)
    }

    private static func summarize(body: UnsafeRawBufferPointer) -> Summary? {
        guard let type = body.first else { return nil }
        if type == audioType {
            guard let fields = audioFields(body) else { return nil }
            return Summary(kind: .audio, position: fields.sequence, firstSampleTime: fields.first,
                           endSampleTime: fields.first + Int64(fields.frames), payloadBytes: body.count - fields.payloadOffset)
        }
        switch decode(body: ArraySlice(body)) {
        case .entry(let entry)?:
            let kind: Summary.Kind
            switch entry.content {
            case .marker, .filledGap: kind = .marker
            default: kind = .gap
            }
            return Summary(kind: kind, position: entry.sequence, firstSampleTime: entry.firstSampleTime, endSampleTime: entry.endSampleTime, payloadBytes: 0)
        case .end(let end)?:
            return Summary(kind: .end, position: end.position.nextSequence, firstSampleTime: end.position.endSampleTime, endSampleTime: end.position.endSampleTime, payloadBytes: 0, streamEnd: end)
        case nil:
            return nil
        }
    }

    /// Decodes a record body (without its length and checksum); nil when malformed or when a value
    /// is beyond what a stream can hold (see `maximumSequence`, `maximumSampleTime`).
    static func decode(body: ArraySlice<UInt8>) -> SpoolRecord? {
        var reader = BinaryRecordReader(body)
        guard let type = reader.readUInt8(), let sequence = reader.readUInt64(), sequence <= maximumSequence else { return nil }
        switch type {
        case audioType:
            guard let fields = body.withUnsafeBytes({ audioFields($0) }) else { return nil }
            let payload = Array(body[(body.startIndex + fields.payloadOffset)...])
            return .entry(LoggedPacket(sequence: sequence, content: .audio(EncodedPackets(
                payload: payload, packetCount: fields.packets, packetSizes: fields.sizes, firstSampleTime: fields.first, frameCount: fields.frames))))
        case gapType:
            guard let sampleTime = reader.readInt64(), let length = reader.readInt64(),
                sampleTime >= 0, length >= 0, sampleTime <= maximumSampleTime - length
            else { return nil }
            let reason = String(decoding: reader.readRest(), as: UTF8.self)
            return .entry(LoggedPacket(sequence: sequence, content: .gap(sampleTime: sampleTime, length: length, reason: reason)))
        case markerType:
            guard let sampleTime = reader.readInt64(), sampleTime >= 0, sampleTime <= maximumSampleTime else { return nil }
            let label = String(decoding: reader.readRest(), as: UTF8.self)
            return .entry(LoggedPacket(sequence: sequence, content: .marker(sampleTime: sampleTime, label: label)))
        case filledGapType:
            guard let position = reader.readInt64(), let sampleTime = reader.readInt64(), let length = reader.readInt64(),
                sampleTime >= 0, length >= 0, sampleTime <= position, position <= maximumSampleTime, length <= maximumSampleTime - sampleTime
            else { return nil }
            let reason = String(decoding: reader.readRest(), as: UTF8.self)
            return .entry(LoggedPacket(sequence: sequence, content: .filledGap(position: position, sampleTime: sampleTime, length: length, reason: reason)))
        case endType:
            guard sequence < maximumSequence, let endTime = reader.readInt64(), let remainder = reader.readUInt32(),
                endTime >= 0, endTime <= maximumSampleTime
            else { return nil }
            let reason = String(decoding: reader.readRest(), as: UTF8.self)
            return .end(StreamEnd(position: StreamPosition(lastSequence: sequence, endSampleTime: endTime), remainderFrames: Int(remainder), reason: reason))
        default:
            return nil
        }
    }
}
