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
/// Writes go to the file at explicit offsets; `synchronize()` makes them durable. With `writeBehind`
/// (bytes), audio is gathered in memory and written once that much has come (and by `flush()`,
/// `synchronize()` and anything that reads the file back), so a stream of small packets costs one
/// write per `writeBehind` bytes instead of one per packet. Such a write ends on a 4 KiB page of the
/// file, keeping the rest gathered: the kernel then never zeroes the unwritten part of a new page
/// before copying audio into it, and no page is written out half full and dirtied again by the next
/// write. Packet sizes and markers are gathered
/// too and written to the journal at `flush()`, `synchronize()`, or once as much as `writeBehind`
/// (at most 4 KiB) of them has come. What is gathered is lost in a crash, as unsynced writes are.
///
/// Descriptors: the journal is opened only to write it. The CAF file's descriptor is held between
/// writes while `holdsDescriptor` (the default); otherwise the file is opened for each write and
/// closed after it, so a process can write to thousands of files without a descriptor each (the
/// receiver, when its streams' sockets leave no descriptors to spare, and its commit log's replay).
///
/// A writer is not thread-safe: use it from one thread (or one actor / event loop) at a time.
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
    /// Audio bytes appended (written to the file or still gathered in memory).
    public private(set) var dataByteCount: Int64
    /// Packets that `synchronize()` has made durable: they survive a crash or power loss.
    public private(set) var durablePacketCount: Int64
    /// The markers recorded so far.
    public private(set) var markers: [CAFMarker]
    /// The journal file beside the CAF file.
    public var journalPath: String { CAFJournal.path(for: path) }
    /// The journal file beside the CAF file at `cafPath` (an unfinished file has one).
    public static func journalPath(for cafPath: String) -> String { CAFJournal.path(for: cafPath) }
    /// Audio gathered before it is written: see the type's description.
    public let writeBehind: Int
    /// Audio bytes written to the file after which the writer asks the kernel to start writing them
    /// to the storage, without waiting (`sync_file_range`); 0: never. Whole pages only, so a page
    /// is not written out and then dirtied again by the next write. A later sync (the receiver's
    /// checkpoint) then finds little left to write, instead of everything since the last one in one
    /// burst that the writes of other files (the receiver's commit log) wait behind. PostgreSQL's
    /// `backend_flush_after` does the same for its data files.
    public var writebackAfter = 0
    /// Where the audio not yet handed to writeback begins in the file.
    private var writebackStart: Int64 = 0
    /// With `writebackAfter`: each time writeback is started, the writer also tells the kernel that
    /// it will not read the audio handed to writeback the time before (`posix_fadvise`
    /// `POSIX_FADV_DONTNEED`; pages still being written out are left alone). A receiver never reads
    /// its recordings back while writing them, and without this every byte recorded stays in the
    /// page cache until memory runs short: 160 MB/s for 10,000 streams, crowding out what is read
    /// again (the commit log's recycled segments), and on a virtual machine that hands free memory
    /// back to its host, making every page written a fresh one that the host must supply first.
    /// PostgreSQL advises the same for the WAL segments it closes.
    public var releasesWrittenBackPages = false
    /// Where the range last handed to writeback begins (nil before the first).
    private var writebackRanStart: Int64?
    /// Whether appended audio, packet sizes or markers are still gathered in memory, not yet written.
    public var hasGatheredData: Bool { !pendingAudio.isEmpty || !pendingPacketSizes.isEmpty || !pendingMarkers.isEmpty }
    /// Whether the file's descriptor is kept open between writes.
    public private(set) var holdsDescriptor: Bool

    /// The file's descriptor, while held.
    private var file: PosixFile?
    /// False once finalized or closed.
    private var isOpen = true
    /// Audio appended but not yet written, and where it goes.
    private var pendingAudio: [UInt8] = []
    /// Packet sizes and markers appended but not yet in the journal.
    private var pendingPacketSizes: [UInt32] = []
    private var pendingMarkers: [CAFMarker] = []
    /// Audio bytes in the file: `dataByteCount` less what is gathered. Derived, so an append taken
    /// back after its audio was written (its journal write failed) is overwritten by the next.
    private var writtenDataBytes: Int64 { dataByteCount - Int64(pendingAudio.count) }
    /// Where the journal ends.
    private var journalLength: Int64
    /// The journal has writes that no sync covered.
    private var journalUnsynchronized = false
    private let layout: CAFDataLayout

    /// Packet sizes and markers gathered before they are written to the journal: as much as
    /// `writeBehind`, and at most 4 KiB.
    private var journalWriteBehind: Int { min(writeBehind, 4_096) }

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
    ///   - writeBehind: audio bytes gathered before they are written (0: each append is written at once).
    ///   - holdingDescriptor: keep the file's descriptor open between writes.
    public init(
        path: String, format: StreamFormat, channelLayoutTag: UInt32? = nil, channelBitmap: UInt32 = 0,
        info: [(key: String, value: String)], magicCookie: [UInt8] = [], primingFrames: Int = 0,
        synchronizing: Bool = true, writeBehind: Int = 0, holdingDescriptor: Bool = true
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
        var journalLength: Int64?
        do throws(CAFError) {
            try file.write(header.bytes, at: 0)
            journalLength = try CAFJournal.create(cafPath: path, primingFrames: Int32(primingFrames), synchronizing: synchronizing)
            if synchronizing {
                try file.synchronizeAll()
                try PosixFile.synchronizeDirectory(containing: path)
            }
        } catch {
            // Both files were created here (exclusively), so removing them harms nobody's data.
            file.close()
            try? PosixFile.remove(path: path)
            if journalLength != nil { try? PosixFile.remove(path: CAFJournal.path(for: path)) }
            throw error
        }
        self.path = path
        self.format = format
        self.primingFrames = primingFrames
        self.writeBehind = max(0, writeBehind)
        self.holdsDescriptor = holdingDescriptor
        self.file = Self.kept(file, holding: holdingDescriptor)
        self.journalLength = journalLength ?? 0
        self.journalUnsynchronized = !synchronizing
        self.layout = CAFDataLayout(
            dataChunkHeaderOffset: dataChunkHeaderOffset, dataOffset: Int64(header.bytes.count))
        self.packetCount = 0
        self.frameCount = 0
        self.dataByteCount = 0
        self.durablePacketCount = 0
        self.markers = []
    }

    private init(resuming salvage: CAFSalvage, file: PosixFile, journalLength: Int64, writeBehind: Int, holdingDescriptor: Bool) {
        path = salvage.parsed.path
        format = salvage.format
        primingFrames = Int(salvage.primingFrames)
        self.writeBehind = max(0, writeBehind)
        self.holdsDescriptor = holdingDescriptor
        self.file = Self.kept(file, holding: holdingDescriptor)
        self.journalLength = journalLength
        layout = salvage.layout
        packetCount = salvage.packetCount
        frameCount = salvage.frameCount
        dataByteCount = salvage.keptDataBytes
        durablePacketCount = salvage.packetCount
        markers = salvage.markers
    }

    deinit {
        file?.close()
    }

    /// `file` when its descriptor is to be held; otherwise it is closed.
    private static func kept(_ file: PosixFile, holding: Bool) -> PosixFile? {
        if holding { return file }
        file.close()
        return nil
    }

    /// Appends audio. Linear PCM: `bytes` holds whole frames and `packetSizes` is empty. Variable bit
    /// rate: `bytes` holds the packets back to back, `packetSizes` one size per packet, and `frameCount`
    /// is the packets times the format's frames per packet.
    ///
    /// If it throws (a full disk, say), nothing is counted as appended and the call can be repeated.
    public func append(_ bytes: UnsafeRawBufferPointer, packetSizes: [UInt32], frameCount: Int) throws(CAFError) {
        guard isOpen else { throw .writerClosed(path: path) }
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
        let gatheredAudio = pendingAudio
        let gatheredSizes = pendingPacketSizes.count
        var gatheredWritten = 0
        var counted = false
        do throws(CAFError) {
            if pendingAudio.count + bytes.count > writeBehind {
                gatheredWritten = try writeAudio(then: bytes, wholePages: writeBehind > 0)
            } else {
                pendingAudio.append(contentsOf: bytes)
            }
            dataByteCount += Int64(bytes.count)
            packetCount += packets
            self.frameCount += Int64(frameCount)
            pendingPacketSizes.append(contentsOf: packetSizes)
            counted = true
            if pendingPacketSizes.count * 4 > journalWriteBehind { try writeJournal() }
        } catch {
            // Nothing of this append counts: the gathered audio it wrote stays written (the file
            // holds it now), and what it wrote of its own is overwritten by the next write, which
            // starts where the counted audio ends.
            if counted {
                pendingPacketSizes.removeSubrange(gatheredSizes...)
                dataByteCount -= Int64(bytes.count)
                packetCount -= packets
                self.frameCount -= Int64(frameCount)
            }
            pendingAudio = gatheredWritten == 0 ? gatheredAudio : Array(gatheredAudio[gatheredWritten...])
            throw error
        }
    }

    /// Writes the gathered audio to the file and the gathered packet sizes and markers to the
    /// journal (not synced). If it throws, what was not written stays gathered.
    public func flush() throws(CAFError) {
        guard isOpen else { throw .writerClosed(path: path) }
        try writeAudio()
        try writeJournal()
    }

    /// Writes the gathered audio at the end of what the file holds.
    private func writeAudio() throws(CAFError) {
        guard !pendingAudio.isEmpty else { return }
        _ = try writeAudio(then: UnsafeRawBufferPointer(start: nil, count: 0), wholePages: false)
    }

    /// Writes the gathered audio and then `more` (in one `pwritev`, without gathering `more` first)
    /// at the end of what the file holds; with `wholePages`, only as much as ends on a page of the
    /// file, the rest being gathered. Returns how many of the gathered bytes it wrote. If it
    /// throws, nothing changed: what was gathered stays gathered and `more` is not.
    private func writeAudio(then more: UnsafeRawBufferPointer, wholePages: Bool) throws(CAFError) -> Int {
        let at = layout.dataOffset + writtenDataBytes
        let available = pendingAudio.count + more.count
        let end = wholePages ? (at + Int64(available)) & ~Self.pageMask : at + Int64(available)
        let count = max(0, Int(end - at))
        let fromGathered = min(count, pendingAudio.count)
        if count > 0 {
            let writeback = writebackRange(endingBefore: end)
            try withFile { file throws(CAFError) in
                let written: Result<Void, CAFError> = pendingAudio.withUnsafeBytes { gathered in
                    Result { () throws(CAFError) in
                        try file.write(
                            UnsafeRawBufferPointer(rebasing: gathered[..<fromGathered]),
                            UnsafeRawBufferPointer(rebasing: more[..<(count - fromGathered)]), at: at)
                    }
                }
                try written.get()
                if let writeback {
                    file.startWriteback(at: writeback.lowerBound, length: Int(writeback.count))
                    // The range handed to writeback the time before: it starts where that one did.
                    if releasesWrittenBackPages, let released = writebackRanStart, released < writeback.lowerBound {
                        file.releaseCachedPages(at: released, length: Int(writeback.lowerBound - released))
                    }
                }
            }
            if let writeback {
                writebackRanStart = writeback.lowerBound
                writebackStart = writeback.upperBound
            }
        }
        let restOfMore = UnsafeRawBufferPointer(rebasing: more[(count - fromGathered)...])
        if fromGathered == pendingAudio.count {
            pendingAudio = Array(restOfMore)
        } else {
            pendingAudio.removeFirst(fromGathered)
            pendingAudio.append(contentsOf: restOfMore)
        }
        return fromGathered
    }

    /// The whole pages of audio before `end` not yet handed to writeback, once they are
    /// `writebackAfter` bytes or more.
    private func writebackRange(endingBefore end: Int64) -> Range<Int64>? {
        guard writebackAfter > 0 else { return nil }
        let start = max(writebackStart, layout.dataOffset & ~Self.pageMask)
        let pagesEnd = end & ~Self.pageMask
        guard pagesEnd - start >= Int64(writebackAfter) else { return nil }
        return start..<pagesEnd
    }

    /// Bytes of a page, less one (writeback is asked for whole 4 KiB pages).
    private static let pageMask: Int64 = 4_095

    /// Appends the gathered packet sizes and markers to the journal, in one write.
    private func writeJournal() throws(CAFError) {
        guard !pendingPacketSizes.isEmpty || !pendingMarkers.isEmpty else { return }
        var records: [UInt8] = []
        if !pendingPacketSizes.isEmpty { records += CAFJournal.packetSizes(pendingPacketSizes) }
        for marker in pendingMarkers { records += CAFJournal.marker(marker) }
        let journal = try PosixFile.openExisting(path: journalPath, writable: true)
        defer { journal.close() }
        try journal.write(records, at: journalLength)
        journalLength += Int64(records.count)
        journalUnsynchronized = true
        pendingPacketSizes = []
        pendingMarkers = []
    }

    /// Runs `body` with the file open: its held descriptor, or one opened for the call.
    private func withFile<Result>(_ body: (PosixFile) throws(CAFError) -> Result) throws(CAFError) -> Result {
        if let file { return try body(file) }
        let opened = try PosixFile.openExisting(path: path, writable: true)
        if holdsDescriptor {
            file = opened
            return try body(opened)
        }
        defer { opened.close() }
        return try body(opened)
    }

    /// Writes the size of the audio written so far (not what is still gathered) into the data
    /// chunk's header, in place of -1 ("runs to the end of the file"), for readers that do not accept
    /// -1 (libsndfile 1.2 calls such a file malformed): after a crash such a reader then reads the
    /// audio up to that size. The journal stays, so the file is still recovered or resumed as an
    /// unfinished one; `finalize()` writes the final size. One 8-byte write.
    public func publishDataSize() throws(CAFError) {
        guard isOpen else { throw .writerClosed(path: path) }
        var size = ByteWriter()
        size.append(writtenDataBytes + 4)
        let bytes = size.bytes
        try withFile { file throws(CAFError) in try file.write(bytes, at: layout.sizeFieldOffset) }
    }

    /// Cuts off whatever a failed write left past the audio written so far (a full disk can take
    /// part of a write), so that the file ends where its published data size says (see
    /// `publishDataSize()`) and readers find no damaged chunk after the audio.
    public func discardUnwrittenTail() throws(CAFError) {
        guard isOpen else { throw .writerClosed(path: path) }
        let end = layout.dataOffset + writtenDataBytes
        try withFile { file throws(CAFError) in try file.truncate(to: end) }
    }

    /// Closes the file's descriptor: from now on it is opened for each write (see the type's
    /// description). Nothing gathered is lost.
    public func releaseDescriptor() {
        holdsDescriptor = false
        file?.close()
        file = nil
    }

    /// Keeps the file's descriptor open between writes again (it is opened at the next write).
    public func holdDescriptor() {
        holdsDescriptor = true
    }

    /// Appends `frameCount` frames of silence to linear PCM audio without writing them: the file is
    /// extended, and the file system keeps the new range as a hole that reads as zeros and takes no
    /// disk blocks (ext4, XFS, NFSv4.2; a file system without holes stores zeros). A gap in a
    /// recording therefore costs no more disk than its marker, however long it claims to be.
    ///
    /// If it throws (the file would exceed the file system's largest file), nothing is appended.
    public func appendSilence(frameCount: Int64) throws(CAFError) {
        guard isOpen else { throw .writerClosed(path: path) }
        guard !format.isVariableBitRate else {
            throw .invalidArgument("silence can only be appended to linear PCM; a variable bit rate stream marks gaps instead")
        }
        guard frameCount > 0 else { return }
        let (bytes, overflow) = frameCount.multipliedReportingOverflow(by: Int64(format.bytesPerFrame))
        let end = layout.dataOffset + dataByteCount
        guard !overflow, bytes <= Int64.max - end else {
            throw .invalidArgument("\(frameCount) frames of silence are beyond any file's size")
        }
        try writeAudio()
        // First cut off whatever a failed write may have left past the audio, so the hole holds
        // only zeros, then extend the file over the silence.
        try withFile { file throws(CAFError) in
            try file.truncate(to: end)
            do throws(CAFError) {
                try file.truncate(to: end + bytes)
            } catch {
                try? file.truncate(to: end)
                throw error
            }
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
        let packets = packetCount
        try flush()
        try withFile { file throws(CAFError) in try file.synchronizeData() }
        if journalUnsynchronized {
            let journal = try PosixFile.openExisting(path: journalPath, writable: true)
            defer { journal.close() }
            try journal.synchronizeData()
            journalUnsynchronized = false
        }
        durablePacketCount = packets
    }

    /// The last `count` packets appended (fewer when the file holds fewer), oldest first: variable bit
    /// rate formats only (their sizes come from the journal). A segmented stream that resumes in this
    /// file reads them back for the next file's pre-roll.
    public func lastPackets(_ count: Int) throws(CAFError) -> [[UInt8]] {
        guard isOpen, format.isVariableBitRate, count > 0, packetCount > 0 else { return [] }
        try flush()
        let sizes = Array((try CAFJournal.read(cafPath: path)?.packetSizes ?? []).prefix(Int(packetCount)))
        guard Int64(sizes.count) == packetCount else {
            throw .journalCorrupt(path: journalPath, reason: "it lists \(sizes.count) packet sizes but the file holds \(packetCount) packets")
        }
        let kept = sizes.suffix(count)
        var offset = dataByteCount - Int64(kept.reduce(0) { $0 + Int($1) })
        let dataOffset = layout.dataOffset
        return try withFile { file throws(CAFError) in
            var packets: [[UInt8]] = []
            for size in kept {
                packets.append(try file.read(count: Int(size), at: dataOffset + offset))
                offset += Int64(size)
            }
            return packets
        }
    }

    /// Records a marker at `framePosition` (for example a capture gap or overrun). It is journaled at
    /// the next `flush()` (durable with the next `synchronize()`) and written to the `mark` and `strg`
    /// chunks at `finalize()`. If it throws, the marker is not recorded.
    ///
    /// A marker equal to one the file already holds (the same frame position and name) is not added
    /// again, and false is returned: markers are idempotent, so a marker journaled before a crash and
    /// written again when the stream resumes (or its commit log round is replayed) appears once.
    @discardableResult
    public func addMarker(framePosition: Int64, name: String) throws(CAFError) -> Bool {
        guard isOpen else { throw .writerClosed(path: path) }
        guard framePosition >= 0 else { throw .invalidArgument("a marker's frame position must not be negative") }
        guard !name.utf8.contains(0) else { throw .invalidArgument("a marker name must not contain a NUL character") }
        let marker = CAFMarker(framePosition: framePosition, name: name)
        guard !markers.contains(marker) else { return false }
        pendingMarkers.append(marker)
        if writeBehind == 0 {
            do throws(CAFError) {
                try writeJournal()
            } catch {
                pendingMarkers.removeLast()
                throw error
            }
        }
        markers.append(marker)
        return true
    }

    /// Finishes the file: sets the data chunk's size, appends the `pakt` chunk (variable bit rate formats;
    /// valid frames = frames − priming − `remainderFrames`) and the markers, makes everything durable,
    /// closes the file and removes the journal. If it throws, the writer stays open and `finalize` can be
    /// called again (after freeing disk space, say).
    public func finalize(remainderFrames: Int = 0) throws(CAFError) {
        guard isOpen else { throw .writerClosed(path: path) }
        guard remainderFrames >= 0, remainderFrames <= Int(Int32.max) else {
            throw .invalidArgument("remainder frames must be between 0 and \(Int32.max), not \(remainderFrames)")
        }
        guard format.isVariableBitRate || remainderFrames == 0 else {
            throw .invalidArgument("remainder frames apply only to variable bit rate formats such as Opus, not to linear PCM")
        }
        try flush()
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
        let layout = self.layout
        let dataBytes = dataByteCount
        try withFile { file throws(CAFError) in try CAFFinisher.finish(file: file, layout: layout, dataBytes: dataBytes, trailer: trailer) }
        durablePacketCount = packetCount
        file?.close()
        file = nil
        isOpen = false
        try PosixFile.remove(path: journalPath)
        try PosixFile.synchronizeDirectory(containing: path)
    }

    /// Writes what is gathered (when it can: what cannot be written is dropped) and closes the file
    /// without finalizing, leaving it as a crash would (data size -1, journal beside it). `resume` or `CAFRecovery.recover` can take it
    /// from there.
    public func close() {
        if isOpen { try? flush() }
        file?.close()
        file = nil
        isOpen = false
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
    ///
    /// `writeBehind` and `holdingDescriptor` are as for a new writer.
    public static func resume(
        path: String, keepingPackets: Int64? = nil, writeBehind: Int = 0, holdingDescriptor: Bool = true
    ) throws(CAFError) -> CAFWriter {
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
        let journalLength = try CAFJournal.rewrite(
            cafPath: path,
            contents: CAFJournal.Contents(
                primingFrames: salvage.primingFrames, packetSizes: salvage.packetSizes, markers: salvage.markers)
        )
        return CAFWriter(resuming: salvage, file: file, journalLength: journalLength, writeBehind: writeBehind, holdingDescriptor: holdingDescriptor)
    }
}
