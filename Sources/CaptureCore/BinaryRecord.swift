/// Builds big-endian binary records for the sender's spool and the receiver's position log.
public struct BinaryRecordWriter: Sendable {
    /// The bytes so far.
    public private(set) var bytes: [UInt8] = []

    public init(reservingCapacity capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
    }

    public mutating func append(_ value: UInt8) { bytes.append(value) }
    public mutating func append(_ value: UInt32) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
    public mutating func append(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
    public mutating func append(_ value: Int64) { append(UInt64(bitPattern: value)) }
    public mutating func append<C: Collection>(contentsOf other: C) where C.Element == UInt8 { bytes.append(contentsOf: other) }
    /// Overwrites the 8 bytes at `offset` (already appended: a field filled in once the rest is known).
    public mutating func put(_ value: UInt64, at offset: Int) {
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt64.self) }
    }
    /// Overwrites the 4 bytes at `offset` (already appended).
    public mutating func put(_ value: UInt32, at offset: Int) {
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self) }
    }
}

/// Reads what `BinaryRecordWriter` wrote; every read returns nil past the end.
public struct BinaryRecordReader {
    private let bytes: ArraySlice<UInt8>
    /// The index of the next byte to read.
    public private(set) var position: Int

    public init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        position = bytes.startIndex
    }

    /// Bytes not read yet.
    public var remaining: Int { bytes.endIndex - position }

    public mutating func readUInt8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    public mutating func readUInt32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var value: UInt32 = 0
        for index in position..<(position + 4) { value = value << 8 | UInt32(bytes[index]) }
        position += 4
        return value
    }

    public mutating func readUInt64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var value: UInt64 = 0
        for index in position..<(position + 8) { value = value << 8 | UInt64(bytes[index]) }
        position += 8
        return value
    }

    public mutating func readInt64() -> Int64? { readUInt64().map { Int64(bitPattern: $0) } }

    public mutating func readBytes(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    /// Everything not read yet.
    public mutating func readRest() -> ArraySlice<UInt8> {
        defer { position = bytes.endIndex }
        return bytes[position...]
    }
}
