import CaptureCore

/// A CAF file read from disk (or from memory): its format, metadata, packet table and where its audio is.
///
/// `read(path:)` (and `read(bytes:name:)`) parses every chunk and rejects malformed files with a
/// `CAFError`, without trusting any size or count in the file further than the file's real length:
/// the description's fields must agree with each other, and the packet table may not claim more
/// packets or frames than the data holds, so `packetCount` and `totalFrames` never exceed the audio. The audio itself is read on demand
/// with `readAudioData()`, `readAudioBytes(offset:count:)` or `readPacket(_:)`.
///
/// A file whose data chunk size is -1 (being written, or left by a crash) reads too: its data runs to the
/// end of the file and `isFinalized` is `false`.
public struct CAFFile: Sendable {
    /// The file's path.
    public let path: String
    /// The stream format, with Core Audio flag meanings (`bytesPerFrame` derived for linear PCM).
    public let format: StreamFormat
    /// The `chan` chunk's layout tag, if the file has one.
    public let channelLayoutTag: UInt32?
    /// The `chan` chunk's channel bitmap (meaningful with tag 0x10000, use channel bitmap); 0 without one.
    public let channelBitmap: UInt32
    /// The `info` chunk's key/value pairs, in file order.
    public let info: [(key: String, value: String)]
    /// The `kuki` chunk's bytes (empty when there is none).
    public let magicCookie: [UInt8]
    /// The `pakt` chunk, if the file has one.
    public let packetTable: CAFPacketTable?
    /// Where the audio data starts in the file (after the data chunk's edit count).
    public let dataOffset: Int64
    /// Bytes of audio data; for an unfinalized file, everything from `dataOffset` to the end of the file.
    public let dataSize: Int64
    /// Whether the data chunk's size is set (not -1).
    public let isFinalized: Bool
    /// The markers of the `mark` chunk, named from the `strg` chunk.
    public let markers: [CAFMarker]
    /// Where the data chunk's header starts (its size field is 4 bytes further).
    let dataChunkHeaderOffset: Int64
    /// The first `pakt`, `mark` or `strg` chunk found before the audio data (the writer puts them
    /// after it, where recovery and resume rebuild them), if any.
    let trailingChunkBeforeData: String?
    /// Start offset of each packet within the data and, last, the end of the last packet
    /// (variable-size formats with a packet table only).
    private let packetOffsets: [Int64]

    /// Packets of audio: from the packet table for variable-size formats (`nil` without one), otherwise
    /// the whole packets in the data.
    public let packetCount: Int64?

    /// Frames of audio, counting priming and remainder frames: whole frames in the data for linear PCM,
    /// packets times frames per packet (or the sum of the packet table's frame counts) otherwise.
    public let totalFrames: Int64?

    /// Where the file's bytes are, for reading its audio: on disk at `path`, or in memory.
    enum Origin: Sendable {
        case file
        case memory([UInt8])
    }

    let origin: Origin

    /// Reads and parses the CAF file at `path`.
    public static func read(path: String) throws(CAFError) -> CAFFile {
        let file = try PosixFile.openExisting(path: path, writable: false)
        defer { file.close() }
        return try CAFParser.parse(file, stopAfterDataHeader: false)
    }

    /// Parses a CAF file's bytes held in memory, with the same checks as `read(path:)`; `name` stands
    /// for the path in errors and in `path`. Its audio is read from `bytes`.
    public static func read(bytes: [UInt8], name: String) throws(CAFError) -> CAFFile {
        try CAFParser.parse(CAFMemoryFile(path: name, bytes: bytes), stopAfterDataHeader: false)
    }

    /// All the audio data bytes.
    public func readAudioData() throws(CAFError) -> [UInt8] {
        guard dataSize <= Int64(Int.max) else {
            throw .invalidArgument("the audio data (\(dataSize) bytes) is too large to read at once; read it in parts")
        }
        return try readAudioBytes(offset: 0, count: Int(dataSize))
    }

    /// `count` bytes of audio data starting `offset` bytes into the data (fewer at the end of the data).
    public func readAudioBytes(offset: Int64, count: Int) throws(CAFError) -> [UInt8] {
        guard offset >= 0, count >= 0, offset <= dataSize else {
            throw .invalidArgument("audio bytes \(offset)..+\(count) are outside the \(dataSize) bytes of data")
        }
        let available = Int(min(Int64(count), dataSize - offset))
        let storage: any CAFStorage
        switch origin {
        case .file: storage = try PosixFile.openExisting(path: path, writable: false)
        case .memory(let bytes): storage = CAFMemoryFile(path: path, bytes: bytes)
        }
        defer { storage.close() }
        let bytes = try storage.read(count: available, at: dataOffset + offset)
        guard bytes.count == available else {
            throw .truncatedChunk(path: path, chunk: "data", offset: dataChunkHeaderOffset)
        }
        return bytes
    }

    /// The bytes of packet `index` (0-based).
    public func readPacket(_ index: Int64) throws(CAFError) -> [UInt8] {
        let count = packetCount ?? 0
        guard index >= 0, index < count else { throw .packetOutOfRange(index: index, count: count) }
        if format.bytesPerPacket > 0 {
            let size = Int64(format.bytesPerPacket)
            return try readAudioBytes(offset: index * size, count: Int(size))
        }
        let start = packetOffsets[Int(index)]
        return try readAudioBytes(offset: start, count: Int(packetOffsets[Int(index) + 1] - start))
    }

    /// `packetCount` and `totalFrames` must be what `CAFParser` checked them to be.
    init(
        path: String, origin: Origin, format: StreamFormat, channelLayoutTag: UInt32?, channelBitmap: UInt32 = 0,
        info: [(key: String, value: String)], magicCookie: [UInt8], packetTable: CAFPacketTable?, packetCount: Int64?,
        totalFrames: Int64?, dataChunkHeaderOffset: Int64, dataOffset: Int64, dataSize: Int64, isFinalized: Bool,
        markers: [CAFMarker], trailingChunkBeforeData: String? = nil
    ) {
        self.trailingChunkBeforeData = trailingChunkBeforeData
        self.path = path
        self.origin = origin
        self.packetCount = packetCount
        self.totalFrames = totalFrames
        self.format = format
        self.channelLayoutTag = channelLayoutTag
        self.channelBitmap = channelBitmap
        self.info = info
        self.magicCookie = magicCookie
        self.packetTable = packetTable
        self.dataChunkHeaderOffset = dataChunkHeaderOffset
        self.dataOffset = dataOffset
        self.dataSize = dataSize
        self.isFinalized = isFinalized
        self.markers = markers
        var offsets: [Int64] = []
        if let packetTable, format.bytesPerPacket == 0 {
            offsets.reserveCapacity(packetTable.packetSizes.count + 1)
            var position: Int64 = 0
            offsets.append(0)
            // At most 2^28 sizes (a pakt chunk is at most 256 MiB) below 2^32 each: the sum fits.
            for size in packetTable.packetSizes {
                position += Int64(size)
                offsets.append(position)
            }
        }
        self.packetOffsets = offsets
    }
}
