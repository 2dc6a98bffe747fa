import CaptureCore

/// A round record's body (`ReceiverLogRecord`, kind 2), built as the stream writes: each
/// operation is encoded into the body the moment it happens, so a stream's audio is copied once,
/// from the message into the body, and the round's record is then handed to the commit log as it
/// is (no list of operations, no second encoding). `take` fills in the round's header fields and
/// starts the next body.
struct RoundRecordBody {
    /// The header's fields come first: packets before (8), sequence, sample time and packets after
    /// (8 each), operation count (4).
    static let headerSize = 36

    /// The header's room and the operations so far; nil (no storage) while there are none, so an
    /// idle stream holds no body between rounds.
    private var writer: BinaryRecordWriter?
    private var operationCount: UInt32 = 0
    /// What the last body taken held: the next one reserves as much at its first operation, so a
    /// steady stream grows its body without reallocating.
    private var lastSize = 0

    init() {}

    /// Whether no operation was added since the last `take`.
    var isEmpty: Bool { operationCount == 0 }

    /// Audio appended: frame count, packet count, the sizes, payload length, payload.
    mutating func appendAudio(_ payload: UnsafeRawBufferPointer, packetSizes: [UInt32], frameCount: Int) {
        beginOperation()
        writer?.append(ReceiverLogRecord.audioTag)
        writer?.append(UInt32(truncatingIfNeeded: frameCount))
        writer?.append(UInt32(truncatingIfNeeded: packetSizes.count))
        for size in packetSizes { writer?.append(size) }
        writer?.append(UInt32(truncatingIfNeeded: payload.count))
        writer?.append(contentsOf: payload)
        operationCount += 1
    }

    /// Linear PCM silence appended over a gap.
    mutating func appendSilence(frames: Int64) {
        beginOperation()
        writer?.append(ReceiverLogRecord.silenceTag)
        writer?.append(frames)
        operationCount += 1
    }

    /// A marker added at a frame position of the file.
    mutating func appendMarker(framePosition: Int64, name: String) {
        beginOperation()
        writer?.append(ReceiverLogRecord.markerTag)
        writer?.append(framePosition)
        writer?.append(UInt32(truncatingIfNeeded: name.utf8.count))
        writer?.append(contentsOf: name.utf8)
        operationCount += 1
    }

    /// Adds `operation` (a round given as a list: tests, and `ReceiverLogRecord.encoded`).
    mutating func append(_ operation: FileOperation) {
        switch operation {
        case .audio(let payload, let sizes, let frames):
            payload.withUnsafeBytes { appendAudio($0, packetSizes: sizes, frameCount: frames) }
        case .silence(let frames):
            appendSilence(frames: frames)
        case .marker(let position, let name):
            appendMarker(framePosition: position, name: name)
        }
    }

    /// The body of the round that brought the file from `packetsBefore` packets to `position`,
    /// holding every operation added since the last `take`; the next body starts empty.
    mutating func take(packetsBefore: Int64, position: StreamPositionRecord) -> [UInt8] {
        var body = writer ?? Self.emptyBody(reserving: Self.headerSize)
        writer = nil
        body.put(UInt64(bitPattern: packetsBefore), at: 0)
        body.put(position.position.lastSequence, at: 8)
        body.put(UInt64(bitPattern: position.position.endSampleTime), at: 16)
        body.put(UInt64(bitPattern: position.packets), at: 24)
        body.put(operationCount, at: 32)
        operationCount = 0
        lastSize = body.bytes.count
        return body.bytes
    }

    /// Drops every operation added since the last `take` (what they wrote became durable another way).
    mutating func discard() {
        writer = nil
        operationCount = 0
    }

    /// Makes room for the header before the first operation.
    private mutating func beginOperation() {
        if writer == nil { writer = Self.emptyBody(reserving: max(lastSize, 256)) }
    }

    /// A body holding only the header's room.
    private static func emptyBody(reserving capacity: Int) -> BinaryRecordWriter {
        var body = BinaryRecordWriter(reservingCapacity: capacity)
        body.append(contentsOf: repeatElement(0, count: headerSize))
        return body
    }
}
