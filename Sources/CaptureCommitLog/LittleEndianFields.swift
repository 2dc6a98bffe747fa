/// The log's fixed-width integer fields, little-endian at a byte offset: the batch header and the
/// control file are both written and read through these.
enum LittleEndianFields {
    /// Writes `value` into `bytes` at `offset` (the bytes must be there).
    static func put<Value: FixedWidthInteger>(_ value: Value, into bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for index in 0..<raw.count { bytes[offset + index] = raw[index] }
        }
    }

    /// The value at `offset` from the slice's start.
    static func get<Value: FixedWidthInteger>(_ type: Value.Type, _ bytes: ArraySlice<UInt8>, _ offset: Int) -> Value {
        var value: Value = 0
        let start = bytes.startIndex + offset
        for index in 0..<MemoryLayout<Value>.size {
            value |= Value(bytes[start + index]) << (8 * index)
        }
        return value
    }
}
