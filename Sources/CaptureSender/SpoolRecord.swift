import CaptureCodecs
import CaptureCore

/// One record of a spool segment: a log entry (audio or gap) or the end of the stream.
enum SpoolRecord: Equatable {
    case entry(LoggedPacket)
    case end(StreamEnd, lastSequence: UInt64)

    static let audioType: UInt8 = 0x41  // 'A'
    static let gapType: UInt8 = 0x47  // 'G'
    static let endType: UInt8 = 0x45  // 'E'
    /// Length (UInt32) and checksum (UInt64) before each body.
    static let headerSize = 12
    /// Bodies above this are corruption, not audio (frames are at most a few MiB).
    static let maximumBody = 64 << 20

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
            }
        case .end(let end, let lastSequence):
            body.append(Self.endType)
            body.append(lastSequence)
            body.append(end.endSampleTime)
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

    /// Decodes a record body (without its length and checksum); nil when malformed.
    static func decode(body: ArraySlice<UInt8>) -> SpoolRecord? {
        var reader = BinaryRecordReader(body)
        guard let type = reader.readUInt8(), let sequence = reader.readUInt64() else { return nil }
        switch type {
        case audioType:
            guard let first = reader.readInt64(), let frames = reader.readUInt32(), let packets = reader.readUInt32(),
                let sizeCount = reader.readUInt32(), Int(sizeCount) <= reader.remaining / 4
            else { return nil }
            var sizes: [UInt32] = []
            sizes.reserveCapacity(Int(sizeCount))
            for _ in 0..<sizeCount {
                guard let size = reader.readUInt32() else { return nil }
                sizes.append(size)
            }
            let payload = Array(reader.readRest())
            return .entry(LoggedPacket(sequence: sequence, content: .audio(EncodedPackets(
                payload: payload, packetCount: Int(packets), packetSizes: sizes, firstSampleTime: first, frameCount: Int(frames)))))
        case gapType:
            guard let sampleTime = reader.readInt64(), let length = reader.readInt64() else { return nil }
            let reason = String(decoding: reader.readRest(), as: UTF8.self)
            return .entry(LoggedPacket(sequence: sequence, content: .gap(sampleTime: sampleTime, length: length, reason: reason)))
        case endType:
            guard let endTime = reader.readInt64(), let remainder = reader.readUInt32() else { return nil }
            let reason = String(decoding: reader.readRest(), as: UTF8.self)
            return .end(StreamEnd(endSampleTime: endTime, remainderFrames: Int(remainder), reason: reason), lastSequence: sequence)
        default:
            return nil
        }
    }
}
