import ArgumentParser
import CaptureCLISupport
import CaptureLocalCopy
import CaptureSender

/// capture-send's safety copy on the unit: `--record PATH` and `--record-segment DURATION`.
struct RecordOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Also write the capture to this file on this machine while streaming, in the capture's own format whatever --codec says: .caf (crash-safe: after a crash it holds every buffer written, and capture-recv recover finishes it), .wav or .flac (16- or 24-bit captures). The file must not exist. A full or failing disk stops the copy loudly (the status line shows REC STOPPED, capture-send exits 4) and never the stream. Default: no local copy.",
        valueName: "PATH"))
    var record: String?

    @Option(name: .long, help: ArgumentHelp(
        "Cut the --record copy into files of this length (like 1h, 15m, 10s; 1 s to 24 h) at UTC boundaries of the capture's timeline, counted from each UTC midnight, as capture-recv --segment does; each file is named PATH's name with the UTC time of its first sample (take.caf: take_20261128T041500Z.caf). Default: one file.",
        valueName: "DURATION"))
    var recordSegment: String?

    func validate() throws {
        if recordSegment != nil, record == nil { throw ValidationError("--record-segment goes with --record PATH") }
        _ = try settings()
    }

    /// The local copy's settings; nil without --record.
    func settings() throws -> LocalCopySettings? {
        guard let record else { return nil }
        let range = Int64(SendRanges.recordSegment.range.lowerBound)...Int64(SendRanges.recordSegment.range.upperBound)
        let segment = try recordSegment.map { Duration.seconds(try DurationText.seconds($0, option: "--record-segment", range: range)) }
        do throws(LocalCopyError) {
            return try LocalCopySettings(path: record, segmentLength: segment)
        } catch {
            throw ValidationError(error.message(naming: CommandLineSettingNames()))
        }
    }
}
