import ArgumentParser
import CaptureCLISupport
import CaptureSecurity
import CaptureSender
import Foundation
import Logging

/// capture-send's backup receivers: `--also HOST:PORT[,KEY=VALUE...]` (repeatable) and
/// `--also-give-up DURATION`.
struct BackupOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Also send the whole capture to this backup receiver (repeat for more). It gets its own acknowledgements, reconnects and resumes; audio leaves the spool only once every receiver of its encoding has it. TLS and token settings are those of the main receiver unless given after a comma: pin=SHA256, ca=PEM, cert=PEM, key=PEM, token-file=FILE (for example --also backup.example:7373,pin=AB:CD:...). Its encoding is the main receiver's unless changed after a comma: codec=pcm|opus, bitrate=, frame-ms=, complexity=, bitrate-mode=vbr|cvbr|cbr, application= (for example --also backup.example:7373,codec=opus,bitrate=64k): a different encoding is a stream of its own (its own stream id and spool, named STREAM-ENCODING), encoded from the same capture, on the same timeline, and linked to the others by the capture's id. max-rate=BITS (200k, 1.5M; default: no limit) caps what this receiver is sent. priority=background (default: foreground) makes it lossless-later: it is sent only while every foreground receiver is caught up (one capture buffer at a time while they are live, so keep --buffer-seconds small on a thin link), it is never given up, its own spool keeps its audio across restarts, it gives way first when --spool-max runs out, and the first Ctrl-C waits for the foreground receivers only and leaves it in the spool for capture-send spool deliver or the next run (for example --also archive.example:7373,codec=pcm,priority=background). Default: no backup.",
        valueName: "HOST:PORT[,KEY=VALUE...]"))
    var also: [String] = []

    @Option(name: .long, help: ArgumentHelp(
        "How long a backup receiver may lack audio without making progress (unreachable, or connected but acknowledging nothing new) before it is dropped (its audio no longer kept in the spool; capture-send then exits 4 naming it): like 1h, 30m, 90s or 1h30m. A backup so far behind that keeping its audio would cost the main receiver audio (--spool-max) or hold up a --no-pace source is dropped at once.",
        valueName: "DURATION"))
    var alsoGiveUp = "1h"

    func validate() throws {
        _ = try DurationText.seconds(alsoGiveUp, option: "--also-give-up", range: 1...(7 * 86_400))
        for spec in also { _ = try BackupReceiverSpec(parsing: spec) }
    }

    /// --also-give-up.
    var giveUpAfter: Duration {
        .seconds((try? DurationText.seconds(alsoGiveUp, option: "--also-give-up", range: 1...(7 * 86_400))) ?? 3_600)
    }

    /// The backup receivers, with the main receiver's TLS and token settings where a spec names none.
    func receivers(main security: SenderSecurityOptions, logger: Logger) throws(CLIError) -> [CaptureStreamer.Receiver] {
        var receivers: [CaptureStreamer.Receiver] = []
        for text in also {
            let spec: BackupReceiverSpec
            do { spec = try BackupReceiverSpec(parsing: text) } catch { throw CLIError("\(error)") }
            var options = security
            if let pin = spec.pin {
                options.pin = pin
                options.ca = nil
            }
            if let ca = spec.ca {
                options.ca = ca
                options.pin = nil
            }
            if let cert = spec.cert { options.cert = cert }
            if let key = spec.key { options.key = key }
            if let tokenFile = spec.tokenFile { options.tokenFile = tokenFile }
            do { try options.validate() } catch { throw CLIError("--also \(spec.address): \(error)") }
            receivers.append(CaptureStreamer.Receiver(
                host: spec.address.host, port: spec.address.port, tls: try options.tlsConfiguration(),
                authToken: try options.authToken(logger: logger), identity: try options.destination(for: spec.address)))
        }
        return receivers
    }

    /// Each backup's priority and rate limit, in the order of `--also`.
    func pacing() throws(CLIError) -> [(CaptureStreamer.Priority, Int?)] {
        var result: [(CaptureStreamer.Priority, Int?)] = []
        for text in also {
            do throws(ValidationError) {
                let spec = try BackupReceiverSpec(parsing: text)
                result.append((spec.priority, spec.maxBitsPerSecond))
            } catch {
                throw CLIError("\(error)")
            }
        }
        return result
    }

    /// Each backup's encoding, in the order of `--also`: the main's, changed by its settings.
    func encodings(main: EncodingSpec) throws(CLIError) -> [EncodingSpec] {
        var specs: [EncodingSpec] = []
        for text in also {
            do throws(ValidationError) {
                specs.append(try BackupReceiverSpec(parsing: text).encoding(from: main))
            } catch {
                throw CLIError("\(error)")
            }
        }
        return specs
    }
}

/// One `--also` value: HOST:PORT, then comma-separated settings that differ from the main receiver's.
struct BackupReceiverSpec: Equatable {
    /// A spec to check encoding values against while parsing.
    private static let defaultSpec = EncodingSpec(codec: .pcm, bitrate: 128_000, frameDuration: .ms20, complexity: 10, bitrateMode: .vbr, application: .audio)

    var address: HostAndPort
    var pin: String?
    var ca: String?
    var cert: String?
    var key: String?
    var tokenFile: String?
    /// `max-rate=`: the most this receiver is sent, in bits per second; nil for no limit.
    var maxBitsPerSecond: Int?
    /// `priority=`: foreground (live, the default) or background (lossless later).
    var priority: CaptureStreamer.Priority = .foreground
    /// Encoding settings (`codec=opus`, `bitrate=64k`...), in the order given; none: the main's encoding.
    var encodingSettings: [(key: String, value: String)] = []

    static func == (left: BackupReceiverSpec, right: BackupReceiverSpec) -> Bool {
        left.address == right.address && left.pin == right.pin && left.ca == right.ca && left.cert == right.cert && left.key == right.key
            && left.tokenFile == right.tokenFile && left.maxBitsPerSecond == right.maxBitsPerSecond && left.priority == right.priority
            && left.encodingSettings.map(\.key) == right.encodingSettings.map(\.key)
            && left.encodingSettings.map(\.value) == right.encodingSettings.map(\.value)
    }

    /// The backup's encoding: `main` with its settings applied.
    func encoding(from main: EncodingSpec) throws(ValidationError) -> EncodingSpec {
        var spec = main
        for setting in encodingSettings { spec = try spec.applying(key: setting.key, value: setting.value, option: "--also \(address)") }
        return spec
    }

    init(parsing text: String) throws(ValidationError) {
        var parts = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let first = parts.removeFirst()
        do {
            address = try HostAndPort.remoteAddress(first)
        } catch {
            throw ValidationError("--also \(text): \(first) is not HOST:PORT (\(error))")
        }
        for part in parts {
            guard let equals = part.firstIndex(of: "="), !part[part.index(after: equals)...].isEmpty else {
                throw ValidationError("--also \(text): '\(part)' is not KEY=VALUE; the keys are \(Self.keys)")
            }
            let value = String(part[part.index(after: equals)...])
            switch part[..<equals] {
            case "pin": pin = value
            case "ca": ca = value
            case "cert": cert = value
            case "key": key = value
            case "token-file": tokenFile = value
            case "max-rate": maxBitsPerSecond = try Self.parseRate(value, option: "--also \(text)")
            case "priority":
                guard let priority = CaptureStreamer.Priority(rawValue: value) else {
                    throw ValidationError("--also \(text): priority=\(value) is not foreground or background")
                }
                self.priority = priority
            case let key where EncodingSpec.keys.contains(String(key)):
                // Checked here against any spec (the values are what matters); applied to the main's later.
                _ = try Self.defaultSpec.applying(key: String(key), value: value, option: "--also \(text)")
                encodingSettings.append((String(key), value))
            default:
                throw ValidationError("--also \(text): unknown setting '\(part[..<equals])'; the keys are \(Self.keys)")
            }
        }
        if pin != nil, ca != nil {
            throw ValidationError("--also \(text): give either pin= or ca=, not both")
        }
    }

    /// Every key an --also value may set, for error messages.
    static var keys: String {
        (["pin", "ca", "cert", "key", "token-file", "max-rate", "priority"] + EncodingSpec.keys).joined(separator: ", ")
    }

    /// `max-rate=`: bits per second as 200000, 200k, 1.5M or 1G, within `SendRanges.alsoMaxRate`.
    static func parseRate(_ text: String, option: String) throws(ValidationError) -> Int {
        let range = SendRanges.alsoMaxRate
        guard let bits = range.value(text).flatMap({ Int(exactly: $0) }) else {
            throw ValidationError("\(option): max-rate=\(text) is not a rate of \(range.rangeText); write it as 200000, 200k, 1.5M or 1G")
        }
        return bits
    }
}
