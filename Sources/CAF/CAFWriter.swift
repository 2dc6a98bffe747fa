import CaptureCore

/// Writes a CAF file as audio arrives, so that whatever has been synchronized survives a crash.
///
/// The file is laid out `caff` header, `desc`, `chan`, `info`, `kuki` (when there is a magic cookie),
/// then a `data` chunk whose size stays -1 ("runs to the end of the file") while recording. Packet sizes
/// (variable bit rate formats) and markers are kept in a journal beside the file, `<path>.pakt-journal`
/// (see `CAFJournal`), until `finalize()` sets the data size and appends the `pakt`, `mark` and `strg`
/// chunks after the audio. A file left unfinalized by a crash can be continued with `resume(path:)` or
/// finished with `CAFRecovery.recover(path:)`.
///
/// Writes go straight to the file descriptor at explicit offsets (no buffering); `synchronize()` makes
/// them durable. A writer is not thread-safe: use it from one thread (or one actor / event loop) at a time.
public final class CAFWriter {
    /// The CAF file's path.
    public let path: String
    /// The format written in the `desc` chunk.
    public let format: StreamFormat
    /// Encoder delay frames at the start, written to the `pakt` chunk (variable bit rate formats only).
    public let primingFrames: Int
    /// Packets appended (for linear PCM, one packet is one frame).
    public private(set) var packetCount: Int64
    /// Frames appended, priming frames included.
    public private(set) var frameCount: Int64
    /// Audio bytes appended.
    public private(set) var dataByteCount: Int64
    /// Packets that `synchronize()` has made durable: they survive a crash or power loss.
    public private(set) var durablePacketCount: Int64
    /// The markers recorded so far.
    public private(set) var markers: [CAFMarker]
    /// The journal file beside the CAF file.
    public var journalPath: String { CAFJournal.path(for: path) }

    private var file: PosixFile?
    private var journal: CAFJournalWriter?
    /// Where the journal ends while the writer is suspended (its descriptors closed).
    private var suspendedJournalLength: Int64?
    private let layout: CAFDataLayout

    /// Creates a new CAF file at `path` (never replacing one, never through a symbolic link; mode 0644
    /// less the umask) and its journal, and makes both durable.
    ///
    /// - Parameters:
    ///   - format: linear PCM or Opus; it must pass `StreamFormat.validate()`.
    ///   - channelLayoutTag: the `chan` chunk's tag; by default mono, stereo, or discrete-in-order.
    ///   - channelBitmap: the `chan` chunk's channel bitmap, for tag 0x10000 (use channel bitmap).
    ///   - info: `info` chunk entries such as `("title", …)`, `("recorded date", …)`, `("source", …)`,
    ///     `("encoding application", …)`; keys and values must not contain NUL. No `info` chunk is written
    ///     when empty.
    ///   - magicCookie: the codec configuration for the `kuki` chunk; none is written when empty.
    ///   - primingFrames: the encoder's delay, for the `pakt` chunk (variable bit rate formats only).
    ///   - synchronizing: make the file, its journal and their folder entries durable before returning
    ///     (fsync each). A caller that makes the whole file system durable later (the receiver's sync
    ///     round, before anything written to the file is acknowledged) passes false.
    public init(
        path: String, format: StreamFormat, channelLayoutTag: UInt32? = nil, channelBitmap: UInt32 = 0,
        info: [(key: String, value: String)], magicCookie: [UInt8] = [], primingFrames: Int = 0,
        synchronizing: Bool = true
    ) throws(CAFError) {
        do throws(StreamFormatError) {
            try format.validate()
        } catch {
            throw .invalidFormat(error)
        }
        guard primingFrames >= 0, primingFrames <= Int(Int32.max) else {
            throw .invalidArgument("priming frames must be between 0 and \(Int32.max), not \(primingFrames)")
        }
        guard format.isVariableBitRate || primingFrames == 0 else {
            throw .invalidArgument("priming frames apply only to variable bit rate formats such as Opus, not to linear PCM")
        }
        for pair in info where pair.key.utf8.contains(0) || pair.value.utf8.contains(0) || pair.key.isEmpty {
            throw .invalidArgument("info key \"\(pair.key)\" must be non-empty and neither it nor its value may contain a NUL character")
        }
        var header = ByteWriter()
        header.append(CAFChunkType.fileType)
        header.append(UInt16(1))
        header.append(UInt16(0))
        header.append(contentsOf: CAFChunkType.chunk(CAFChunkType.description, body: CAFDescription.encode(format)))
        var channelLayout = ByteWriter()
        channelLayout.append(channelLayoutTag ?? CAFChannelLayoutTag.default(channels: format.channelCount))
        channelLayout.append(channelBitmap)  // mChannelBitmap
        channelLayout.append(UInt32(0))  // mNumberChannelDescriptions
        header.append(contentsOf: CAFChunkType.chunk(CAFChunkType.channelLayout, body: channelLayout.bytes))
        if !info.isEmpty {
            // An empty info chunk is legal but libsndfile 1.2 then misses the data chunk: leave it out.
            header.append(contentsOf: CAFChunkType.chunk(CAFChunkType.information, body: CAFParser.encodeInformation(info)))
        }
        if !magicCookie.isEmpty {
            header.append(contentsOf: CAFChunkType.chunk(CAFChunkType.magicCookie, body: magicCookie))
        }
        let dataChunkHeaderOffset = Int64(header.bytes.count)
        header.append(CAFChunkType.audioData)
        header.append(CAFChunkType.sizeUnknown)
        header.append(UInt32(0))  // mEditCount

        let file = try PosixFile.createNew(path: path)
        var journal: CAFJournalWriter?
        do throws(CAFError) {
            try file.write(header.bytes, at: 0)
            journal = try CAFJournal.create(cafPath: path, primingFrames: Int32(primingFrames))
            if synchronizing {
                try file.synchronizeAll()
                try journal?.file.synchronizeAll()
                try PosixFile.synchronizeDirectory(containing: path)
            }
        } catch {
            // Both files were created here (exclusively), so removing them harms nobody's data.
            file.close()
            journal?.file.close()
            try? PosixFile.remove(path: path)
            if journal != nil { try? PosixFile.remove(path: CAFJournal.path(for: path)) }
            throw error
        }
        self.path = path
        self.format = format
        self.primingFrames = primingFrames
        self.file = file
        self.journal = journal
        self.layout = CAFDataLayout(
            dataChunkHeaderOffset: dataChunkHeaderOffset, dataOffset: Int64(header.bytes.count))
        self.packetCount = 0
        self.frameCount = 0
        self.dataByteCount = 0
        self.durablePacketCount = 0
        self.markers = []
    }

    private init(resuming salvage: CAFSalvage, file: PosixFile, journal: CAFJournalWriter) {
        path = salvage.parsed.path
        format = salvage.format
        primingFrames = Int(salvage.primingFrames)
        self.file = file
        self.journal = journal
        layout = salvage.layout
        packetCount = salvage.packetCount
        frameCount = salvage.frameCount
        dataByteCount = salvage.keptDataBytes
        durablePacketCount = salvage.packetCount
        markers = salvage.markers
    }

    deinit {
        file?.close()
        journal?.file.close()
    }

    /// Appends audio. Linear PCM: `bytes` holds whole frames and `packetSizes` is empty. Variable bit
    /// rate: `bytes` holds the packets back to back, `packetSizes` one size per packet, and `frameCount`
    /// is the packets times the format's frames per packet.
    ///
    /// If it throws (a full disk, say), nothing is counted as appended and the call can be repeated.
    public func append(_ bytes: UnsafeRawBufferPointer, packetSizes: [UInt32], frameCount: Int) throws(CAFError) {
        guard let file, let journal else { throw .writerClosed(path: path) }
        let packets: Int64
        if format.isVariableBitRate {
            let total = packetSizes.reduce(0) { $0 + Int($1) }
            guard total == bytes.count else {
                throw .invalidArgument("the packet sizes add up to \(total) bytes but \(bytes.count) bytes were given")
            }
            guard !packetSizes.contains(0) else {
                throw .invalidArgument("a packet of 0 bytes cannot be stored: readers take it for the end of the stream")
            }
            let expectedFrames = packetSizes.count * Int(format.framesPerPacket)
            guard frameCount == expectedFrames else {
                throw .invalidArgument("\(packetSizes.count) packets of \(format.framesPerPacket) frames are \(expectedFrames) frames, not \(frameCount)")
            }
            packets = Int64(packetSizes.count)
        } else {
            guard packetSizes.isEmpty else {
                throw .invalidArgument("linear PCM takes no packet sizes: pass whole frames and an empty list")
            }
            let bytesPerFrame = Int(format.bytesPerFrame)
            guard bytes.count % bytesPerFrame == 0, bytes.count / bytesPerFrame == frameCount else {
                throw .invalidArgument("\(bytes.count) bytes are not \(frameCount) whole frames of \(bytesPerFrame) bytes")
            }
            packets = Int64(frameCount)
        }
        guard !bytes.isEmpty else { return }
        try file.write(bytes, at: layout.dataOffset + dataByteCount)
        if format.isVariableBitRate {
            try journal.append(CAFJournal.packetSizes(packetSizes))
        }
        dataByteCount += Int64(bytes.count)
        packetCount += packets
        self.frameCount += Int64(frameCount)
    }

    /// Appends `frameCount` frames of silence to linear PCM audio without writing them: the file is
    /// extended, and the file system keeps the new range as a hole that reads as zeros and takes no
    /// disk blocks (ext4, XFS, NFSv4.2; a file system without holes stores zeros). A gap in a
    /// recording therefore costs no more disk than its marker, however long it claims to be.
    ///
    /// If it throws (the file would exceed the file system's largest file), nothing is appended.
    public func appendSilence(frameCount: Int64) throws(CAFError) {
        guard let file else { throw .writerClosed(path: path) }
        guard !format.isVariableBitRate else {
            throw .invalidArgument("silence can only be appended to linear PCM; a variable bit rate stream marks gaps instead")
        }
        guard frameCount > 0 else { return }
        let (bytes, overflow) = frameCount.multipliedReportingOverflow(by: Int64(format.bytesPerFrame))
        let end = layout.dataOffset + dataByteCount
        guard !overflow, bytes <= Int64.max - end else {
            throw .invalidArgument("\(frameCount) frames of silence are beyond any file's size")
        }
        // First cut off whatever a failed write may have left past the audio, so the hole holds
        // only zeros, then extend the file over the silence.
        try file.truncate(to: end)
        do throws(CAFError) {
            try file.truncate(to: end + bytes)
        } catch {
            try? file.truncate(to: end)
            throw error
        }
        dataByteCount += bytes
        packetCount += frameCount
        self.frameCount += frameCount
    }

    /// Appends audio from an array; see `append(_:packetSizes:frameCount:)`.
    public func append(_ bytes: [UInt8], packetSizes: [UInt32] = [], frameCount: Int) throws(CAFError) {
        let result: Result<Void, CAFError> = bytes.withUnsafeBytes { raw in
            do throws(CAFError) {
                try append(raw, packetSizes: packetSizes, frameCount: frameCount)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Makes everything appended so far durable (audio, packet sizes and markers); afterwards
    /// `durablePacketCount` equals `packetCount`.
    public func synchronize() throws(CAFError) {
        guard let file, let journal else { throw .writerClosed(path: path) }
        let packets = packetCount
        try file.synchronizeData()
        try journal.file.synchronizeData()
        durablePacketCount = packets
    }

    /// The last `count` packets appended (fewer when the file holds fewer), oldest first: variable bit
    /// rate formats only (their sizes come from the journal). A segmented stream that resumes in this
    /// file reads them back for the next file's pre-roll.
    public func lastPackets(_ count: Int) throws(CAFError) -> [[UInt8]] {
        guard let file, format.isVariableBitRate, count > 0, packetCount > 0 else { return [] }
        let sizes = Array((try CAFJournal.read(cafPath: path)?.packetSizes ?? []).prefix(Int(packetCount)))
        guard Int64(sizes.count) == packetCount else {
            throw .journalCorrupt(path: journalPath, reason: "it lists \(sizes.count) packet sizes but the file holds \(packetCount) packets")
        }
        let kept = sizes.suffix(count)
        var offset = dataByteCount - Int64(kept.reduce(0) { $0 + Int($1) })
        var packets: [[UInt8]] = []
        for size in kept {
            packets.append(try file.read(count: Int(size), at: layout.dataOffset + offset))
            offset += Int64(size)
        }
        return packets
    }

    /// Records a marker at `framePosition` (for example a capture gap or overrun). It is journaled at
    /// once (durable with the next `synchronize()`) and written to the `mark` and `strg` chunks at
    /// `finalize()`. If it throws, the marker is not recorded.
    public func addMarker(framePosition: Int64, name: String) throws(CAFError) {
        guard let journal else { throw .writerClosed(path: path) }
        guard framePosition >= 0 else { throw .invalidArgument("a marker's frame position must not be negative") }
        guard !name.utf8.contains(0) else { throw .invalidArgument("a marker name must not contain a NUL character") }
        let marker = CAFMarker(framePosition: framePosition, name: name)
        try journal.append(CAFJournal.marker(marker))
        markers.append(marker)
    }

    /// Finishes the file: sets the data chunk's size, appends the `pakt` chunk (variable bit rate formats;
    /// valid frames = frames − priming − `remainderFrames`) and the markers, makes everything durable,
    /// closes the file and removes the journal. If it throws, the writer stays open and `finalize` can be
    /// called again (after freeing disk space, say).
    public func finalize(remainderFrames: Int = 0) throws(CAFError) {
        guard let file, let journal else { throw .writerClosed(path: path) }
        guard remainderFrames >= 0, remainderFrames <= Int(Int32.max) else {
            throw .invalidArgument("remainder frames must be between 0 and \(Int32.max), not \(remainderFrames)")
        }
        guard format.isVariableBitRate || remainderFrames == 0 else {
            throw .invalidArgument("remainder frames apply only to variable bit rate formats such as Opus, not to linear PCM")
        }
        // The packet sizes come back from the journal, which holds every one of them: kept in memory
        // they would grow by 4 bytes a packet for as long as the stream records (720 KB an hour
        // for 20 ms Opus packets, per stream).
        var packetSizes: [UInt32] = []
        if format.isVariableBitRate {
            let journaled = try CAFJournal.read(cafPath: path)?.packetSizes ?? []
            guard Int64(journaled.count) >= packetCount else {
                throw .journalCorrupt(path: journalPath, reason: "it lists \(journaled.count) packet sizes but the file holds \(packetCount) packets")
            }
            packetSizes = Array(journaled.prefix(Int(packetCount)))
        }
        let trailer = try CAFFinisher.trailer(
            format: format, packetSizes: packetSizes, primingFrames: Int32(primingFrames),
            remainderFrames: Int32(remainderFrames), markers: markers
        )
        try CAFFinisher.finish(file: file, layout: layout, dataBytes: dataByteCount, trailer: trailer)
        durablePacketCount = packetCount
        file.close()
        journal.file.close()
        self.file = nil
        self.journal = nil
        try PosixFile.remove(path: journalPath)
        try PosixFile.synchronizeDirectory(containing: path)
    }

    /// Closes the file and journal without finalizing, leaving the file as a crash would (data size -1,
    /// journal beside it). `resume` or `CAFRecovery.recover` can take it from there.
    public func close() {
        file?.close()
        journal?.file.close()
        file = nil
        journal = nil
    }

    /// Closes the file's and journal's descriptors but keeps the writer's state (counts, markers,
    /// where the journal ends), so that one process can keep thousands of files open for writing
    /// without a descriptor each: the receiver's replay of its commit log does. `reattach()` opens
    /// them again; until then every other call throws `writerClosed`.
    public func suspend() {
        guard let file, let journal else { return }
        suspendedJournalLength = journal.length
        file.close()
        journal.file.close()
        self.file = nil
        self.journal = nil
    }

    /// Opens a suspended writer's file and journal again, to go on exactly where it was.
    public func reattach() throws(CAFError) {
        guard file == nil, let length = suspendedJournalLength else { return }
        let file = try PosixFile.openExisting(path: path, writable: true)
        let journalFile: PosixFile
        do throws(CAFError) {
            journalFile = try PosixFile.openExisting(path: journalPath, writable: true)
        } catch {
            file.close()
            throw error
        }
        self.file = file
        journal = CAFJournalWriter(file: journalFile, length: length)
        suspendedJournalLength = nil
    }

    /// Reopens a file to append more: one that was never finalized (after a receiver crash, or after
    /// `close()`), or a finished one, which becomes unfinished again until the next `finalize`.
    ///
    /// The state is rebuilt from the file and its journal: linear PCM keeps the whole frames in the data
    /// (a partial trailing frame is cut off); Opus keeps the packets that the journal lists and the file
    /// fully holds (bytes past them are cut off). With `keepingPackets`, exactly that many packets are
    /// kept, so a receiver can continue at its last acknowledged packet and a resent packet is written
    /// once. Markers past the kept audio are dropped. A file whose `finalize` was interrupted is reopened
    /// too. The journal is rewritten to match and everything is made durable before this returns.
    public static func resume(path: String, keepingPackets: Int64? = nil) throws(CAFError) -> CAFWriter {
        let file = try PosixFile.openExisting(path: path, writable: true)
        let parsed = try CAFParser.parse(file, stopAfterDataHeader: true)
        var journalContents = try CAFJournal.read(cafPath: path)
        if parsed.isFinalized, journalContents == nil {
            // A finished file (for example one a receiver finalized when it shut down) is reopened
            // from its own packet table and markers, which hold what its journal held.
            let finished = try CAFFile.read(path: path)
            journalContents = CAFJournal.Contents(
                primingFrames: finished.packetTable?.primingFrames ?? 0,
                packetSizes: finished.packetTable?.packetSizes ?? [],
                markers: finished.markers
            )
        }
        let salvage = try CAFSalvage.assess(parsed: parsed, journal: journalContents, keepingPackets: keepingPackets)
        // Each step leaves a file that a later resume or recovery reads the same way.
        if parsed.isFinalized {
            try file.truncate(to: salvage.layout.dataOffset + parsed.dataSize)
            try file.synchronizeData()
            try CAFFinisher.markUnfinalized(file: file, layout: salvage.layout)
            try file.synchronizeData()
        }
        try file.truncate(to: salvage.layout.dataOffset + salvage.keptDataBytes)
        try file.synchronizeAll()
        let journal = try CAFJournal.rewrite(
            cafPath: path,
            contents: CAFJournal.Contents(
                primingFrames: salvage.primingFrames, packetSizes: salvage.packetSizes, markers: salvage.markers)
        )
        return CAFWriter(resuming: salvage, file: file, journal: journal)
    }
}
