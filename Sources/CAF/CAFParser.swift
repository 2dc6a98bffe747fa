import CaptureCore

/// Parses a CAF file chunk by chunk with bounded reads; every size and count is checked against the
/// file's real length before it is used.
enum CAFParser {
    /// Metadata chunks (everything but audio data and `free`) larger than this are refused as malformed.
    static let maximumMetadataChunk: Int64 = 256 << 20

    /// Bytes of a `chan` chunk's header (tag, bitmap, description count) and of each channel description.
    static let channelLayoutHeaderSize: Int64 = 12
    static let channelDescriptionSize: Int64 = 20

    /// Parses `file` (on disk or in memory). With `stopAfterDataHeader`, parsing ends at the data
    /// chunk's header, ignoring anything after the audio (used by recovery, which rebuilds those
    /// chunks from the journal).
    static func parse(_ file: some CAFStorage, stopAfterDataHeader: Bool) throws(CAFError) -> CAFFile {
        let path = file.path
        let length = try file.length()
        let header = try file.read(count: Int(CAFChunkType.fileHeaderSize), at: 0)
        var headerReader = ByteReader(header)
        guard let magic = headerReader.read(UInt32.self), magic == CAFChunkType.fileType,
            let version = headerReader.read(UInt16.self), headerReader.read(UInt16.self) != nil
        else { throw .notCAF(path: path) }
        guard version == 1 else { throw .unsupportedVersion(path: path, version: version) }

        var format: StreamFormat?
        var channelLayoutTag: UInt32?
        var channelBitmap: UInt32 = 0
        var info: [(key: String, value: String)] = []
        var magicCookie: [UInt8] = []
        var packetTableBody: [UInt8]?
        var markerBody: [UInt8]?
        var stringsBody: [UInt8]?
        var data: (headerOffset: Int64, offset: Int64, size: Int64, finalized: Bool)?
        var trailingChunkBeforeData: String?

        var offset = CAFChunkType.fileHeaderSize
        chunks: while offset < length {
            guard length - offset >= CAFChunkType.headerSize else {
                throw .truncatedChunk(path: path, chunk: "chunk header", offset: offset)
            }
            var reader = ByteReader(try file.read(count: Int(CAFChunkType.headerSize), at: offset))
            guard let type = reader.read(UInt32.self), let size = reader.read(Int64.self) else {
                throw .truncatedChunk(path: path, chunk: "chunk header", offset: offset)
            }
            var name: String { CAFChunkType.name(type) }  // for messages only
            let bodyStart = offset + CAFChunkType.headerSize
            if format == nil, type != CAFChunkType.description {
                throw .missingChunk(path: path, chunk: "desc")
            }
            if type == CAFChunkType.audioData {
                guard data == nil else {
                    throw .malformedChunk(path: path, chunk: name, reason: "the file has a second data chunk")
                }
                guard size == CAFChunkType.sizeUnknown || size >= 4 else {
                    throw .malformedChunk(path: path, chunk: name, reason: "its size \(size) leaves no room for the edit count")
                }
                guard length - bodyStart >= 4 else { throw .truncatedChunk(path: path, chunk: name, offset: offset) }
                if size == CAFChunkType.sizeUnknown {
                    data = (offset, bodyStart + 4, length - bodyStart - 4, false)
                    break chunks  // a data chunk of unknown size runs to the end of the file
                }
                guard size <= length - bodyStart else { throw .truncatedChunk(path: path, chunk: name, offset: offset) }
                data = (offset, bodyStart + 4, size - 4, true)
                if stopAfterDataHeader { break chunks }
                offset = bodyStart + size
                continue
            }
            guard size >= 0 else {
                throw .malformedChunk(path: path, chunk: name, reason: "its size \(size) is negative, which only the last data chunk may be")
            }
            guard size <= length - bodyStart else { throw .truncatedChunk(path: path, chunk: name, offset: offset) }
            switch type {
            case CAFChunkType.description, CAFChunkType.channelLayout, CAFChunkType.information,
                CAFChunkType.magicCookie, CAFChunkType.packetTable, CAFChunkType.marker, CAFChunkType.strings:
                guard size <= maximumMetadataChunk else {
                    throw .malformedChunk(path: path, chunk: name, reason: "its size \(size) is implausibly large")
                }
                let body = try file.read(count: Int(size), at: bodyStart)
                if data == nil, trailingChunkBeforeData == nil,
                    type == CAFChunkType.packetTable || type == CAFChunkType.marker || type == CAFChunkType.strings {
                    trailingChunkBeforeData = name
                }
                switch type {
                case CAFChunkType.description:
                    guard format == nil else {
                        throw .malformedChunk(path: path, chunk: name, reason: "the file has a second desc chunk")
                    }
                    format = try CAFDescription.decode(body, path: path)
                case CAFChunkType.channelLayout:
                    var bodyReader = ByteReader(body)
                    guard let tag = bodyReader.read(UInt32.self), let bitmap = bodyReader.read(UInt32.self),
                        let descriptions = bodyReader.read(UInt32.self)
                    else {
                        throw .malformedChunk(path: path, chunk: name, reason: "it is shorter than 12 bytes")
                    }
                    let needed = channelLayoutHeaderSize + Int64(descriptions) * channelDescriptionSize
                    guard needed <= Int64(body.count) else {
                        throw .malformedChunk(path: path, chunk: name, reason: "it lists \(descriptions) channel descriptions (\(needed) bytes) but has \(body.count)")
                    }
                    channelLayoutTag = tag
                    channelBitmap = bitmap
                case CAFChunkType.information:
                    info = try decodeInformation(body, path: path)
                case CAFChunkType.magicCookie:
                    magicCookie = body
                case CAFChunkType.packetTable:
                    guard packetTableBody == nil else {
                        throw .malformedChunk(path: path, chunk: name, reason: "the file has a second pakt chunk")
                    }
                    packetTableBody = body
                case CAFChunkType.marker:
                    markerBody = body
                default:
                    stringsBody = body
                }
            default:
                break  // `free` and chunks this reader does not use are skipped
            }
            offset = bodyStart + size
        }

        guard let format else { throw .missingChunk(path: path, chunk: "desc") }
        guard let data else { throw .missingChunk(path: path, chunk: "data") }
        let variableSizes = format.bytesPerPacket == 0
        let variableFrames = format.framesPerPacket == 0
        var packetTable: CAFPacketTable?
        if let packetTableBody {
            packetTable = try CAFPacketTable.decode(
                packetTableBody, variableSizes: variableSizes, variableFrames: variableFrames, path: path)
        } else if (variableSizes || variableFrames) && data.finalized && !stopAfterDataHeader {
            throw .missingChunk(path: path, chunk: "pakt")
        }
        let counts = try self.counts(format: format, dataSize: data.size, packetTable: packetTable, path: path)
        let strings = try stringsBody.map { (body) throws(CAFError) in try CAFMarkerChunks.decodeStrings(body, path: path) } ?? [:]
        let markers = try markerBody.map { (body) throws(CAFError) in
            try CAFMarkerChunks.decodeMarkers(body, strings: strings, path: path)
        } ?? []
        return CAFFile(
            path: path, origin: file.origin, format: format, channelLayoutTag: channelLayoutTag, channelBitmap: channelBitmap,
            info: info, magicCookie: magicCookie, packetTable: packetTable, packetCount: counts.packets,
            totalFrames: counts.frames, dataChunkHeaderOffset: data.headerOffset, dataOffset: data.offset,
            dataSize: data.size, isFinalized: data.finalized, markers: markers, trailingChunkBeforeData: trailingChunkBeforeData
        )
    }

    /// The packets and frames of audio the file holds, checking the packet table against the data:
    /// it may list no more packets than the data holds (whole constant-size packets, or variable
    /// sizes that add up to at most the data's bytes), and its valid, priming and remainder frames
    /// together no more than its packets' frames. Counts that overflow 64 bits are refused.
    static func counts(
        format: StreamFormat, dataSize: Int64, packetTable: CAFPacketTable?, path: String
    ) throws(CAFError) -> (packets: Int64?, frames: Int64?) {
        func malformed(_ reason: String) -> CAFError { .malformedChunk(path: path, chunk: "pakt", reason: reason) }
        let packets: Int64?
        if format.bytesPerPacket > 0 {
            let inData = dataSize / Int64(format.bytesPerPacket)
            if let packetTable, packetTable.numberPackets > inData {
                throw malformed("it claims \(packetTable.numberPackets) packets but the data chunk holds \(inData) of \(format.bytesPerPacket) bytes")
            }
            packets = inData
        } else if let packetTable {
            // At most 2^28 sizes (a pakt chunk is at most 256 MiB) below 2^32 each: the sum fits.
            let described = packetTable.packetSizes.reduce(Int64(0)) { $0 + Int64($1) }
            guard described <= dataSize else {
                throw malformed("its packets add up to \(described) bytes but the data chunk holds \(dataSize)")
            }
            packets = packetTable.numberPackets
        } else {
            packets = nil
        }
        func frames(of packets: Int64) throws(CAFError) -> Int64? {
            if format.framesPerPacket > 0 {
                let (product, overflow) = packets.multipliedReportingOverflow(by: Int64(format.framesPerPacket))
                guard !overflow else {
                    throw .malformedChunk(path: path, chunk: "data", reason: "its \(packets) packets of \(format.framesPerPacket) frames are more frames than a 64-bit count holds")
                }
                return product
            }
            // Variable durations: the table's counts, at most 2^28 of them below 2^32 each.
            guard let packetTable else { return nil }
            return packetTable.packetFrameCounts.reduce(Int64(0)) { $0 + Int64($1) }
        }
        if let packetTable, let tableFrames = try frames(of: packetTable.numberPackets) {
            let (claimed, overflow) = packetTable.validFrames.addingReportingOverflow(
                Int64(packetTable.primingFrames) + Int64(packetTable.remainderFrames))
            guard !overflow, claimed <= tableFrames else {
                throw malformed("it claims \(packetTable.validFrames) valid, \(packetTable.primingFrames) priming and \(packetTable.remainderFrames) remainder frames but its \(packetTable.numberPackets) packets hold \(tableFrames)")
            }
        }
        guard let packets else { return (nil, nil) }
        return (packets, try frames(of: packets))
    }

    /// The key/value pairs of an `info` body: an entry count, then NUL-terminated UTF-8 keys and values.
    static func decodeInformation(_ body: [UInt8], path: String) throws(CAFError) -> [(key: String, value: String)] {
        var reader = ByteReader(body)
        guard let count = reader.read(UInt32.self) else {
            throw .malformedChunk(path: path, chunk: "info", reason: "it is shorter than its entry count")
        }
        guard Int64(count) * 2 <= Int64(reader.remaining) else {
            throw .malformedChunk(path: path, chunk: "info", reason: "it claims \(count) entries but has room for fewer")
        }
        var pairs: [(key: String, value: String)] = []
        for index in 0..<count {
            guard let key = reader.readNulTerminated(), let value = reader.readNulTerminated() else {
                throw .malformedChunk(path: path, chunk: "info", reason: "entry \(index) is not a pair of NUL-terminated UTF-8 strings")
            }
            pairs.append((key, value))
        }
        return pairs
    }

    /// The `info` body for `pairs`.
    static func encodeInformation(_ pairs: [(key: String, value: String)]) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(UInt32(pairs.count))
        for pair in pairs {
            writer.append(nulTerminated: pair.key)
            writer.append(nulTerminated: pair.value)
        }
        return writer.bytes
    }
}
