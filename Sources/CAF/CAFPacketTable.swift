/// The contents of a CAF packet table (`pakt`) chunk: where a variable bit rate stream's packets are,
/// and which of their frames are priming and remainder frames rather than audio to play.
public struct CAFPacketTable: Hashable, Sendable {
    /// Packets in the data chunk (`mNumberPackets`).
    public var numberPackets: Int64
    /// Frames to play: all frames minus priming and remainder (`mNumberValidFrames`).
    public var validFrames: Int64
    /// Frames at the start that are the encoder's delay, not audio (`mPrimingFrames`).
    public var primingFrames: Int32
    /// Frames at the end that pad the last packet, not audio (`mRemainderFrames`).
    public var remainderFrames: Int32
    /// The size in bytes of each packet, in order.
    public var packetSizes: [UInt32]
    /// The frame count of each packet; empty when the format has a constant number of frames a packet.
    public var packetFrameCounts: [UInt32]

    public init(
        numberPackets: Int64, validFrames: Int64, primingFrames: Int32, remainderFrames: Int32,
        packetSizes: [UInt32], packetFrameCounts: [UInt32] = []
    ) {
        self.numberPackets = numberPackets
        self.validFrames = validFrames
        self.primingFrames = primingFrames
        self.remainderFrames = remainderFrames
        self.packetSizes = packetSizes
        self.packetFrameCounts = packetFrameCounts
    }

    /// The `pakt` body. Sizes are written only for variable-size packets and frame counts only for
    /// variable-duration packets, as the specification requires.
    func encode(variableSizes: Bool, variableFrames: Bool) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(numberPackets)
        writer.append(validFrames)
        writer.append(primingFrames)
        writer.append(remainderFrames)
        for index in packetSizes.indices {
            if variableSizes { writer.append(varint: UInt64(packetSizes[index])) }
            if variableFrames { writer.append(varint: UInt64(packetFrameCounts[index])) }
        }
        return writer.bytes
    }

    /// Decodes a `pakt` body. The entry count is checked against the body's length before anything
    /// is allocated, so a hostile count cannot exhaust memory.
    static func decode(
        _ body: [UInt8], variableSizes: Bool, variableFrames: Bool, path: String
    ) throws(CAFError) -> CAFPacketTable {
        func malformed(_ reason: String) -> CAFError { .malformedChunk(path: path, chunk: "pakt", reason: reason) }
        var reader = ByteReader(body)
        guard let packets = reader.read(Int64.self), let valid = reader.read(Int64.self),
            let priming = reader.read(Int32.self), let remainder = reader.read(Int32.self)
        else { throw malformed("it is shorter than its 24-byte header") }
        guard packets >= 0 else { throw malformed("the packet count \(packets) is negative") }
        guard valid >= 0, priming >= 0, remainder >= 0 else {
            throw malformed("valid (\(valid)), priming (\(priming)) and remainder (\(remainder)) frames must not be negative")
        }
        // Each entry is a varint of at least one byte per value it holds.
        let bytesPerEntry: Int64 = (variableSizes ? 1 : 0) + (variableFrames ? 1 : 0)
        if bytesPerEntry > 0, packets > Int64(reader.remaining) / bytesPerEntry {
            throw malformed("it claims \(packets) packets but has room for at most \(Int64(reader.remaining) / bytesPerEntry)")
        }
        var sizes: [UInt32] = []
        var frames: [UInt32] = []
        if bytesPerEntry > 0 {
            sizes.reserveCapacity(variableSizes ? Int(packets) : 0)
            frames.reserveCapacity(variableFrames ? Int(packets) : 0)
            for index in 0..<packets {
                if variableSizes { sizes.append(try readEntry(&reader, index: index, path: path)) }
                if variableFrames { frames.append(try readEntry(&reader, index: index, path: path)) }
            }
        }
        return CAFPacketTable(
            numberPackets: packets, validFrames: valid, primingFrames: priming, remainderFrames: remainder,
            packetSizes: sizes, packetFrameCounts: frames
        )
    }

    private static func readEntry(_ reader: inout ByteReader, index: Int64, path: String) throws(CAFError) -> UInt32 {
        guard let value = reader.readVarint(), let entry = UInt32(exactly: value) else {
            throw .badVarint(path: path, packetIndex: index)
        }
        return entry
    }
}
