import CaptureCore

/// Where a CAF file's data chunk is.
struct CAFDataLayout {
    /// Offset of the data chunk's header; its size field is 4 bytes further.
    var dataChunkHeaderOffset: Int64
    /// Offset of the first audio byte (after the edit count).
    var dataOffset: Int64

    var sizeFieldOffset: Int64 { dataChunkHeaderOffset + 4 }
}

/// Turns an unfinalized CAF file into a finished one. Shared by `CAFWriter.finalize` and `CAFRecovery`.
enum CAFFinisher {
    /// The chunks that follow the audio data: `pakt` for variable bit rate formats, then `mark` and
    /// `strg` when there are markers.
    static func trailer(
        format: StreamFormat, packetSizes: [UInt32], primingFrames: Int32, remainderFrames: Int32,
        markers: [CAFMarker]
    ) throws(CAFError) -> [UInt8] {
        var bytes: [UInt8] = []
        if format.isVariableBitRate {
            let totalFrames = Int64(packetSizes.count) * Int64(format.framesPerPacket)
            let validFrames = totalFrames - Int64(primingFrames) - Int64(remainderFrames)
            guard validFrames >= 0 else {
                throw .invalidArgument("\(primingFrames) priming and \(remainderFrames) remainder frames are more than the \(totalFrames) frames written")
            }
            let table = CAFPacketTable(
                numberPackets: Int64(packetSizes.count), validFrames: validFrames, primingFrames: primingFrames,
                remainderFrames: remainderFrames, packetSizes: packetSizes
            )
            bytes += CAFChunkType.chunk(
                CAFChunkType.packetTable, body: table.encode(variableSizes: true, variableFrames: false))
        }
        bytes += CAFMarkerChunks.encode(markers)
        return bytes
    }

    /// Finishes the file in an order that leaves a recoverable file at every step:
    /// 1. cut the file to exactly the kept audio and make the audio durable;
    /// 2. set the data chunk's size and make that durable (a crash now leaves a correct data chunk,
    ///    with the journal still beside it to rebuild what follows);
    /// 3. write the trailing chunks and make the whole file durable.
    /// Every step writes at fixed offsets, so the whole sequence can be repeated after a failure.
    static func finish(file: some CAFStorage, layout: CAFDataLayout, dataBytes: Int64, trailer: [UInt8]) throws(CAFError) {
        let dataEnd = layout.dataOffset + dataBytes
        try file.truncate(to: dataEnd)
        try file.synchronizeData()
        var size = ByteWriter()
        size.append(dataBytes + 4)
        try file.write(size.bytes, at: layout.sizeFieldOffset)
        try file.synchronizeData()
        if !trailer.isEmpty {
            try file.write(trailer, at: dataEnd)
        }
        try file.synchronizeAll()
    }

    /// Sets the data chunk's size field back to -1 ("runs to the end of the file").
    static func markUnfinalized(file: PosixFile, layout: CAFDataLayout) throws(CAFError) {
        var size = ByteWriter()
        size.append(CAFChunkType.sizeUnknown)
        try file.write(size.bytes, at: layout.sizeFieldOffset)
    }
}

/// What an unfinalized CAF file and its journal really hold: the whole packets and frames whose bytes
/// are in the file and (for variable bit rate formats) whose sizes are in the journal.
struct CAFSalvage {
    let parsed: CAFFile
    let format: StreamFormat
    let layout: CAFDataLayout
    let packetSizes: [UInt32]
    let packetCount: Int64
    let frameCount: Int64
    let keptDataBytes: Int64
    let markers: [CAFMarker]
    let primingFrames: Int32

    /// Audio bytes in the file beyond what is kept (a partial frame or packet, or packets not kept).
    var droppedDataBytes: Int64 { parsed.dataSize - keptDataBytes }

    /// Works out what to keep of `parsed`, using `journal`, keeping exactly `keepingPackets` if given.
    static func assess(
        parsed: CAFFile, journal: CAFJournal.Contents?, keepingPackets: Int64?
    ) throws(CAFError) -> CAFSalvage {
        let path = parsed.path
        let format = parsed.format
        do throws(StreamFormatError) {
            try format.validate()
        } catch {
            throw .invalidFormat(error)
        }
        if let chunk = parsed.trailingChunkBeforeData {
            // Finishing writes these chunks after the audio: the file would then hold two of each.
            throw .malformedChunk(path: path, chunk: chunk, reason: "it comes before the audio data, where the CAF writer never puts it, so the file cannot be finished or resumed")
        }
        if let keepingPackets, keepingPackets < 0 {
            throw .invalidArgument("cannot keep a negative number (\(keepingPackets)) of packets")
        }
        var sizes: [UInt32] = []
        let packets: Int64
        let keptBytes: Int64
        let frames: Int64
        if format.isVariableBitRate {
            guard let journal else { throw .journalMissing(path: path) }
            var complete = 0
            var bytes: Int64 = 0
            for size in journal.packetSizes {
                guard bytes + Int64(size) <= parsed.dataSize else { break }
                bytes += Int64(size)
                complete += 1
            }
            let kept = keepingPackets ?? Int64(complete)
            guard kept <= Int64(complete) else {
                throw .packetsUnavailable(path: path, requested: kept, available: Int64(complete))
            }
            sizes = Array(journal.packetSizes.prefix(Int(kept)))
            packets = kept
            keptBytes = sizes.reduce(Int64(0)) { $0 + Int64($1) }
            frames = kept * Int64(format.framesPerPacket)
        } else {
            let bytesPerFrame = Int64(format.bytesPerFrame)
            let complete = parsed.dataSize / bytesPerFrame
            let kept = keepingPackets ?? complete
            guard kept <= complete else {
                throw .packetsUnavailable(path: path, requested: kept, available: complete)
            }
            packets = kept
            frames = kept
            keptBytes = kept * bytesPerFrame
        }
        return CAFSalvage(
            parsed: parsed, format: format,
            layout: CAFDataLayout(dataChunkHeaderOffset: parsed.dataChunkHeaderOffset, dataOffset: parsed.dataOffset),
            packetSizes: sizes, packetCount: packets, frameCount: frames, keptDataBytes: keptBytes,
            markers: (journal?.markers ?? []).filter { (0...frames).contains($0.framePosition) },
            primingFrames: journal?.primingFrames ?? 0
        )
    }
}
