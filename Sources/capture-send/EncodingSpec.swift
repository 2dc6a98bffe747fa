import ArgumentParser
import CaptureCodecs
import CaptureCore

/// One encoding as the command line asks for it: the main receiver's from `--codec`, `--bitrate`,
/// `--frame-ms`, `--complexity`, `--vbr/--cvbr/--cbr` and `--application`; a backup's from the same,
/// changed by the `codec=`, `bitrate=`, `frame-ms=`, `complexity=`, `bitrate-mode=` and
/// `application=` settings after its address (`--also HOST:PORT,codec=opus,bitrate=64k`).
/// Destinations with equal specs share one encoder and one stream.
struct EncodingSpec: Equatable {
    var codec: CodecKind
    var bitrate: Int
    var frameDuration: OpusFrameDuration
    var complexity: Int
    var bitrateMode: OpusBitrateMode
    var application: OpusApplication

    /// The keys a backup may set after its address.
    static let keys = ["codec", "bitrate", "frame-ms", "complexity", "bitrate-mode", "application"]

    /// This spec with the backup setting `key=value` applied; `option` names the --also value in errors.
    func applying(key: String, value: String, option: String) throws(ValidationError) -> EncodingSpec {
        var spec = self
        switch key {
        case "codec":
            guard let codec = CodecKind(rawValue: value) else { throw ValidationError("\(option): codec=\(value) is not pcm or opus") }
            spec.codec = codec
        case "bitrate":
            do throws(EncoderError) { spec.bitrate = try OpusEncoderSettings.parseBitrate(value) } catch {
                throw ValidationError("\(option): bitrate=\(value): \(error)")
            }
        case "frame-ms":
            do throws(EncoderError) { spec.frameDuration = try OpusFrameDuration(parsing: value) } catch {
                throw ValidationError("\(option): frame-ms=\(value): \(error)")
            }
        case "complexity":
            guard let complexity = Int(value), (0...10).contains(complexity) else { throw ValidationError("\(option): complexity=\(value) is not 0 to 10") }
            spec.complexity = complexity
        case "bitrate-mode":
            guard let mode = OpusBitrateMode(rawValue: value) else { throw ValidationError("\(option): bitrate-mode=\(value) is not vbr, cvbr or cbr") }
            spec.bitrateMode = mode
        case "application":
            guard let application = OpusApplication(rawValue: value) else {
                throw ValidationError("\(option): application=\(value) is not \(OpusApplication.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            spec.application = application
        default:
            throw ValidationError("\(option): unknown setting '\(key)'")
        }
        return spec
    }

    /// An encoder for `input` with this spec.
    func makeEncoder(for input: StreamFormat) throws(EncoderError) -> any AudioEncoder {
        switch codec {
        case .pcm:
            return try AudioEncoders.pcm(for: input)
        case .opus:
            return try AudioEncoders.opus(for: input, settings: OpusEncoderSettings(
                bitrate: bitrate, frameDuration: frameDuration, complexity: complexity, bitrateMode: bitrateMode, application: application))
        }
    }
}
