import CAF
import Foundation

/// Exports a finished CAF recording (`capture-recv export`, `--export-on-finalize`) as Broadcast
/// Wave (WAV, RF64), FLAC or Ogg Opus, with the recording's true times (docs/RECORDINGS.md): see
/// `SoundFileExport` and `OggOpusExport`. The export is written under a temporary name beside its
/// destination and renamed into place, so a reader never sees half of one.
public enum RecordingExporter {
    /// Exports `cafPath` as `format` into `outputDirectory` (beside the recording when nil), named
    /// after the recording with the format's extension; `replacing` allows overwriting an earlier
    /// export. Returns the export's path.
    @discardableResult
    public static func export(cafPath: String, as format: ExportFormat, outputDirectory: String? = nil, replacing: Bool = false) throws(ExportError) -> String {
        let file: CAFFile
        do {
            file = try CAFFile.read(path: cafPath)
        } catch {
            throw .unreadable("cannot read \(cafPath) as a CAF recording: \(error.description)")
        }
        guard file.isFinalized || file.format.isLinearPCM else {
            throw .unreadable("\(cafPath) is still being recorded (or was left unfinished): finish it first with `capture-recv recover`")
        }
        let base = ((cafPath as NSString).lastPathComponent as NSString).deletingPathExtension
        let folder = outputDirectory ?? (cafPath as NSString).deletingLastPathComponent
        let destination = (folder as NSString).appendingPathComponent("\(base).\(format.fileExtension)")
        if !replacing, FileManager.default.fileExists(atPath: destination) { throw .exists(destination) }
        let temporary = (folder as NSString).appendingPathComponent(".\(base).\(UUID().uuidString).partial")
        let facts = RecordingFacts(info: file.info)
        do throws(ExportError) {
            switch format {
            case .ogg:
                try OggOpusExport.write(file, facts: facts, to: temporary)
            case .wav, .rf64, .flac:
                try SoundFileExport.write(try RecordingAudio(file: file), facts: facts, as: format, to: temporary)
            }
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        guard rename(temporary, destination) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: temporary)
            throw .writeFailed("cannot move the export into place as \(destination): \(reason)")
        }
        return destination
    }
}
