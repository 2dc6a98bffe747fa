/// Finishes CAF files that a crash left unfinalized.
public enum CAFRecovery {
    /// Finalizes the CAF file at `path` if a crash left it unfinalized (data size -1, or a journal beside
    /// it because `finalize` was interrupted).
    ///
    /// Linear PCM: the data size is set to the whole frames in the file (a partial trailing frame is
    /// dropped). Variable bit rate: the journal is replayed into a `pakt` chunk, keeping the packets it
    /// lists that the file fully holds and dropping any bytes after them; the remainder frame count is
    /// unknown after a crash and written as 0. Journaled markers become `mark` and `strg` chunks. The
    /// journal is then removed.
    ///
    /// Running it again, or on a file that was finalized properly, changes nothing and reports so.
    public static func recover(path: String) throws(CAFError) -> CAFRecoveryReport {
        let file = try PosixFile.openExisting(path: path, writable: true)
        defer { file.close() }
        let report = try recover(file, journal: try CAFJournal.read(cafPath: path))
        guard !report.wasAlreadyFinalized else { return report }
        file.close()
        try PosixFile.remove(path: CAFJournal.path(for: path))
        try PosixFile.synchronizeDirectory(containing: path)
        return report
    }

    /// Recovers a CAF file's bytes in memory as `recover(path:)` recovers the file, with `journal`
    /// the bytes of its journal (`nil`: there is none); `bytes` becomes the finished file, and the
    /// journal is then no longer needed. `name` stands for the path in errors and in the report.
    /// The same parsing, decisions and writes as on disk, without a disk (for checks and fuzzing).
    public static func recover(bytes: inout [UInt8], journal: [UInt8]?, name: String) throws(CAFError) -> CAFRecoveryReport {
        let contents = try journal.map { (journal) throws(CAFError) in try CAFJournal.parse(journal, path: CAFJournal.path(for: name)) }
        let file = CAFMemoryFile(path: name, bytes: bytes)
        let report = try recover(file, journal: contents)
        bytes = file.bytes
        return report
    }

    /// Finishes `file` with what `journal` says, unless it is finished already (and has no journal).
    private static func recover(_ file: some CAFStorage, journal: CAFJournal.Contents?) throws(CAFError) -> CAFRecoveryReport {
        let path = file.path
        let parsed = try CAFParser.parse(file, stopAfterDataHeader: true)
        if parsed.isFinalized, journal == nil {
            let table = try CAFParser.parse(file, stopAfterDataHeader: false)
            return CAFRecoveryReport(
                path: path, wasAlreadyFinalized: true, packetCount: table.packetCount ?? 0,
                frameCount: table.totalFrames ?? 0, dataByteCount: table.dataSize, droppedDataBytes: 0,
                markerCount: table.markers.count
            )
        }
        let salvage = try CAFSalvage.assess(parsed: parsed, journal: journal, keepingPackets: nil)
        // A crash before the encoder's delay was over leaves fewer frames than the priming: all of
        // them are priming, none valid.
        let priming = Int32(clamping: min(Int64(salvage.primingFrames), salvage.frameCount))
        let trailer = try CAFFinisher.trailer(
            format: salvage.format, packetSizes: salvage.packetSizes, primingFrames: priming,
            remainderFrames: 0, markers: salvage.markers
        )
        try CAFFinisher.finish(file: file, layout: salvage.layout, dataBytes: salvage.keptDataBytes, trailer: trailer)
        return CAFRecoveryReport(
            path: path, wasAlreadyFinalized: false, packetCount: salvage.packetCount,
            frameCount: salvage.frameCount, dataByteCount: salvage.keptDataBytes,
            droppedDataBytes: salvage.droppedDataBytes, markerCount: salvage.markers.count
        )
    }
}

/// What `CAFRecovery.recover(path:)` found and did.
public struct CAFRecoveryReport: Hashable, Sendable, CustomStringConvertible {
    /// The file's path.
    public var path: String
    /// The file was already finalized: nothing was changed.
    public var wasAlreadyFinalized: Bool
    /// Packets in the finished file.
    public var packetCount: Int64
    /// Frames in the finished file, priming frames included.
    public var frameCount: Int64
    /// Audio bytes in the finished file.
    public var dataByteCount: Int64
    /// Audio bytes cut off: a partial frame or packet, or bytes no journal entry accounts for.
    public var droppedDataBytes: Int64
    /// Markers written.
    public var markerCount: Int

    public init(
        path: String, wasAlreadyFinalized: Bool, packetCount: Int64, frameCount: Int64, dataByteCount: Int64,
        droppedDataBytes: Int64, markerCount: Int
    ) {
        self.path = path
        self.wasAlreadyFinalized = wasAlreadyFinalized
        self.packetCount = packetCount
        self.frameCount = frameCount
        self.dataByteCount = dataByteCount
        self.droppedDataBytes = droppedDataBytes
        self.markerCount = markerCount
    }

    public var description: String {
        if wasAlreadyFinalized {
            return "\(path) is already finalized (\(packetCount) packets, \(frameCount) frames): nothing to do"
        }
        var text = "\(path) recovered: \(packetCount) packets, \(frameCount) frames, \(dataByteCount) bytes of audio"
        if droppedDataBytes > 0 { text += ", dropped \(droppedDataBytes) incomplete trailing bytes" }
        if markerCount > 0 { text += ", \(markerCount) markers" }
        return text
    }
}
