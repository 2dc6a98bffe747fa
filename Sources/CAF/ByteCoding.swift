/// Builds big-endian byte sequences, the byte order of every CAF integer.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init() {}

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func append(float64 value: Double) {
        append(value.bitPattern)
    }

    mutating func append(contentsOf other: some Sequence<UInt8>) {
        bytes.append(contentsOf: other)
    }

    /// Appends UTF-8 bytes followed by a NUL terminator.
    mutating func append(nulTerminated string: String) {
        bytes.append(contentsOf: string.utf8)
        bytes.append(0)
    }

    /// Appends a CAF variable-length integer: 7 bits a byte, most significant group first,
    /// the high bit set on every byte but the last.
    mutating func append(varint value: UInt64) {
        var groups: [UInt8] = [UInt8(value & 0x7F)]
        var rest = value >> 7
        while rest != 0 {
            groups.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.append(contentsOf: groups.reversed())
    }
}

/// Reads big-endian values from a byte array; every read returns `nil` instead of running past the end.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var position: Int

    init(_ bytes: [UInt8], position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    var remaining: Int { bytes.count - position }
    var isAtEnd: Bool { position >= bytes.count }

    /// Inlined into each caller, so it is specialized for the type read (a generic call per field
    /// was most of the parser's time).
    @inline(__always)
    mutating func read<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { return nil }
        let start = position
        let value = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: start, as: T.self) }
        position += size
        return T(bigEndian: value)
    }

    mutating func readFloat64() -> Double? {
        read(UInt64.self).map(Double.init(bitPattern:))
    }

    mutating func readBytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

    /// Reads a NUL-terminated string; `nil` if there is no terminator or the bytes are not UTF-8.
    mutating func readNulTerminated() -> String? {
        guard let end = bytes[position...].firstIndex(of: 0) else { return nil }
        let string = String(validating: bytes[position..<end], as: UTF8.self)
        position = end + 1
        return string
    }

    /// Reads a CAF variable-length integer; `nil` if it is cut off or does not fit in 64 bits.
    mutating func readVarint() -> UInt64? {
        var value: UInt64 = 0
        var index = position
        while index < bytes.count {
            let byte = bytes[index]
            guard value >> 57 == 0 else { return nil }
            value = (value << 7) | UInt64(byte & 0x7F)
            index += 1
            if byte & 0x80 == 0 {
                position = index
                return value
            }
        }
        return nil
    }
}

/// CRC-32 (IEEE 802.3, the zlib polynomial), protecting journal records against torn writes.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var crc = UInt32(index)
        for _ in 0..<8 {
            crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
        }
        return crc
    }

    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
        }
        return crc ^ 0xFFFF_FFFF
    }
}
