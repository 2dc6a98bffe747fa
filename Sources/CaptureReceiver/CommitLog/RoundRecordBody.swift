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

    /// The header's room and the operations so far; no storage at all while there are none, so an
    /// idle stream holds no body between rounds.
    private var bytes: [UInt8] = []
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
        bytes.append(ReceiverLogRecord.audioTag)
        append(UInt32(truncatingIfNeeded: frameCount))
        append(UInt32(truncatingIfNeeded: packetSizes.count))
        for size in packetSizes { append(size) }
        append(UInt32(truncatingIfNeeded: payload.count))
        bytes.append(contentsOf: payload)
        operationCount += 1
    }

    /// Linear PCM silence appended over a gap.
    mutating func appendSilence(frames: Int64) {
        beginOperation()
        bytes.append(ReceiverLogRecord.silenceTag)
        append(UInt64(bitPattern: frames))
        operationCount += 1
    }

    /// A marker added at a frame position of the file.
    mutating func appendMarker(framePosition: Int64, name: String) {
        beginOperation()
        bytes.append(ReceiverLogRecord.markerTag)
        append(UInt64(bitPattern: framePosition))
        append(UInt32(truncatingIfNeeded: name.utf8.count))
        bytes.append(contentsOf: name.utf8)
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
        var body = bytes.isEmpty ? [UInt8](repeating: 0, count: Self.headerSize) : bytes
        lastSize = body.count
        bytes = []
        let count = operationCount
        operationCount = 0
        body.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt64(bitPattern: packetsBefore).bigEndian, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: position.sequence.bigEndian, toByteOffset: 8, as: UInt64.self)
            raw.storeBytes(of: UInt64(bitPattern: position.sampleTime).bigEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: UInt64(bitPattern: position.packets).bigEndian, toByteOffset: 24, as: UInt64.self)
            raw.storeBytes(of: count.bigEndian, toByteOffset: 32, as: UInt32.self)
        }
        return body
    }

    /// Drops every operation added since the last `take` (what they wrote became durable another way).
    mutating func discard() {
        bytes = []
        operationCount = 0
    }

    /// Makes room for the header before the first operation.
    private mutating func beginOperation() {
        guard bytes.isEmpty else { return }
        bytes.reserveCapacity(max(lastSize, 256))
        bytes.append(contentsOf: repeatElement(0, count: Self.headerSize))
    }

    private mutating func append(_ value: UInt32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func append(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
