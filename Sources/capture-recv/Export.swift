import ArgumentParser
import CaptureCLISupport
import CaptureCore
import CaptureExport

extension ExportFormat: ExpressibleByArgument {}

/// `capture-recv export FILE.caf… --to wav|rf64|flac|ogg [--out DIR]`.
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export finished recordings as Broadcast Wave (wav, rf64), FLAC or Ogg Opus, with their true times.",
        discussion: """
            wav and rf64 are Broadcast Wave: a bext chunk with the UTC date and time of the first sample and \
            its TimeReference (samples since UTC midnight), gap markers as cue points with labels, the channel \
            mask. rf64 is for recordings beyond 4 GiB. flac carries the times as Vorbis comments (at most 24 \
            bits: 32-bit and float recordings become 24-bit). ogg remuxes an Opus recording without \
            re-encoding (pre-skip = priming, the end trimmed by granule position), so ffmpeg and browsers play \
            it sample-exact, multichannel Opus included. Opus recordings exported to wav, rf64 or flac are \
            decoded to 24-bit 48 kHz. Each export is named after its recording (.wav, .rf64.wav, .flac, .opus) \
            and written beside it, or into --out. A file that cannot be exported (damaged, unfinished, not \
            a recording) does not stop the others: the exports go on, and the command ends with one line \
            per failed file on standard error and exit status 1. See docs/RECORDINGS.md.
            """
    )

    @Argument(help: ArgumentHelp("Finished CAF recordings.", valueName: "FILE.caf"))
    var files: [String]

    @Option(name: .long, help: ArgumentHelp("The format: wav, rf64, flac or ogg.", valueName: "FORMAT"))
    var to: ExportFormat

    @Option(name: .long, help: ArgumentHelp("Folder for the exports. (default: beside each recording)", valueName: "DIR"))
    var out: String?

    @Flag(name: .long, help: "Replace exports that exist already. (default: refuse)")
    var force = false

    /// Exports every file, printing each export's path as it is written; a file that fails does not
    /// stop the others. At the end, one line per failed file on standard error and exit status 1.
    func run() throws {
        var failures: [String] = []
        for file in files {
            do throws(ExportError) {
                print(try RecordingExporter.export(cafPath: file, as: to, outputDirectory: out, replacing: force))
            } catch {
                failures.append(error.message(naming: CommandLineSettingNames()))
            }
        }
        guard !failures.isEmpty else { return }
        for failure in failures { StandardStreams.writeError("capture-recv: \(failure)\n") }
        throw ExitCode.failure
    }
}
