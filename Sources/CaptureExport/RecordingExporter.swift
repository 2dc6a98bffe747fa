import CAF
import CaptureErrorText
import Foundation

/// Exports a finished CAF recording (`capture-recv export`, `--export-on-finalize`) as Broadcast
/// Wave (WAV, RF64), FLAC or Ogg Opus, with the recording's true times (docs/RECORDINGS.md): see
/// `SoundFileExport` and `OggOpusExport`. The export is written under a temporary name beside its
/// destination, made durable (fsync), renamed into place and its folder synced, so a reader never
/// sees half of one and a power cut after it is reported done loses none of it.
///
/// A damaged recording (or one export does not convert) gives an `ExportError` naming the file and
/// what is wrong, before anything is written: the CAF reader checks every chunk against the file,
/// and `ExportPlan` what the export relies on.
public enum RecordingExporter {
    /// Exports `cafPath` as `format` into `outputDirectory` (beside the recording when nil; made,
    /// with its parents, when missing), named after the recording with the format's extension;
    /// `replacing` allows overwriting an earlier export. Returns the export's path.
    @discardableResult
    public static func export(cafPath: String, as format: ExportFormat, outputDirectory: String? = nil, replacing: Bool = false) throws(ExportError) -> String {
        let file: CAFFile
        do {
            file = try CAFFile.read(path: cafPath)
        } catch {
            throw .unreadable("cannot read \(cafPath) as a CAF recording: \(error.description)")
        }
        let plan = try plan(file, as: format)
        let base = ((cafPath as NSString).lastPathComponent as NSString).deletingPathExtension
        let folder = outputDirectory ?? (cafPath as NSString).deletingLastPathComponent
        if let outputDirectory { try ExportFiles.makeFolder(outputDirectory) }
        let destination = (folder as NSString).appendingPathComponent("\(base).\(format.fileExtension)")
        if !replacing, FileManager.default.fileExists(atPath: destination) { throw .exists(destination) }
        let temporary = (folder as NSString).appendingPathComponent(".\(base).\(UUID().uuidString).partial")
        do throws(ExportError) {
            switch format {
            case .ogg: try OggOpusExport.write(plan, to: temporary, destination: destination)
            case .wav, .rf64, .flac: try SoundFileExport.write(plan, to: temporary, destination: destination)
            }
            try ExportFiles.makeDurable(temporary, destination: destination)
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        guard rename(temporary, destination) == 0 else {
            let reason = SystemErrorText.errno(errno)
            try? FileManager.default.removeItem(atPath: temporary)
            throw .writeFailed("cannot move the export into place as \(destination): \(reason)")
        }
        try ExportFiles.makeNameDurable(in: folder, destination: destination)
        return destination
    }

    /// What an export of `file` as `format` would hold, worked out by the same checks, reading and
    /// conversions as `export`, with nothing written: the audio is read (Opus decoded) and counted
    /// instead of handed to libsndfile, the Ogg packets counted instead of paged. The fuzz target
    /// `export` and the tests check it against the file.
    public static func dryRun(_ file: CAFFile, as format: ExportFormat) throws(ExportError) -> ExportDryRun {
        let plan = try plan(file, as: format)
        var result = ExportDryRun(sampleRate: plan.sampleRate, channels: plan.channels, validFrames: plan.validFrames)
        switch format {
        case .ogg:
            try OggOpusExport.packets(plan) { (packet) throws(ExportError) in
                if packet.number < 2 {
                    result.headerBytes += packet.bytes.count
                } else {
                    result.packets += 1
                    result.granulePositions.append(packet.granule)
                }
            }
        case .wav, .rf64, .flac:
            let audio = try RecordingAudio(plan: plan)
            while let piece = try audio.next() {
                switch piece {
                case .integers(let samples): result.samples += Int64(samples.count)
                case .floats(let samples): result.samples += Int64(samples.count)
                }
            }
            result.frames = audio.framesOut
            let cues = SoundFileExport.cuePoints(file.markers, leadingFrames: plan.leadingFrames, validFrames: plan.validFrames)
            result.cuePositions = cues.map { Int64($0.position) }
            if format != .flac, !cues.isEmpty {
                result.labelChunk = RIFFLabels.chunk(SoundFileExport.labels(cues))
            }
            result.headerBytes = plan.facts.summary(timeReference: plan.facts.timeReference(rate: plan.sampleRate)).utf8.count
        }
        return result
    }

    /// The checks every export starts with: an unfinished Opus recording needs recovery first.
    private static func plan(_ file: CAFFile, as format: ExportFormat) throws(ExportError) -> ExportPlan {
        guard file.isFinalized || file.format.isLinearPCM else {
            throw .unreadable("cannot export \(file.path): it is still being recorded (or was left unfinished): finish it first with `capture-recv recover`")
        }
        return try ExportPlan(file: file, format: format)
    }
}

/// What `RecordingExporter.dryRun` found an export would hold.
public struct ExportDryRun: Equatable, Sendable {
    /// The export's sample rate (48 kHz for Opus).
    public var sampleRate: Int
    /// The export's channels.
    public var channels: Int
    /// The frames the export is to hold: the recording's valid frames.
    public var validFrames: Int64
    /// wav, rf64, flac: the frames and samples the export's reader delivered.
    public var frames: Int64 = 0
    public var samples: Int64 = 0
    /// wav, rf64, flac: the cue points' positions (gap markers inside the valid audio, at most 100).
    public var cuePositions: [Int64] = []
    /// wav, rf64: the `LIST`/`adtl` chunk labelling the cue points (empty without cue points).
    public var labelChunk: [UInt8] = []
    /// ogg: the audio packets and each one's granule position.
    public var packets: Int64 = 0
    public var granulePositions: [Int64] = []
    /// ogg: the bytes of the OpusHead and OpusTags packets; wav, rf64, flac: of the description text.
    public var headerBytes = 0

    init(sampleRate: Int, channels: Int, validFrames: Int64) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.validFrames = validFrames
    }
}
