// Embeds CaptureStreamer: streams a tone (or an audio file) to capture-recv and prints what happens.
//
//     capture-streamer-example HOST:PORT [FILE] [--also BACKUP_HOST:PORT]
//
// Built by `make test`, which also runs it against a real capture-recv.
import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureSources
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

func receiver(_ text: String) -> CaptureStreamer.Receiver? {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return nil }
    return CaptureStreamer.Receiver(host: String(text[..<colon]), port: port)
}

/// Writes one line to standard output at once (not buffered), so that whoever reads the events
/// through a pipe sees each as it happens.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

var arguments = Array(CommandLine.arguments.dropFirst())
var backups: [CaptureStreamer.Receiver] = []
if let also = arguments.firstIndex(of: "--also"), also + 1 < arguments.count, let backup = receiver(arguments[also + 1]) {
    backups.append(backup)
    arguments.removeSubrange(also...(also + 1))
}
guard let first = arguments.first, let main = receiver(first) else {
    FileHandle.standardError.write(Data("usage: capture-streamer-example HOST:PORT [FILE] [--also HOST:PORT]\n".utf8))
    exit(64)
}
do {
    // The source factory capture-send uses: a file, or three seconds of tone.
    let source = try AudioSources.open(arguments.count > 1
        ? .file(path: arguments[1], paced: true, duration: nil)
        : .tone(.init(frequency: 440, levelDBFS: -12, sampleRate: 48_000, channels: 2, sample: .s16, duration: .seconds(3), paced: true))).source
    var configuration = CaptureStreamer.Configuration(streamName: "example", receiver: main)
    configuration.backups = backups
    configuration.spoolRoot = nil  // keep unacknowledged audio in memory only
    let logger = Logger(label: "example")
    let streamer = try CaptureStreamer(
        source: source, encoder: try PCMEncoder(inputFormat: source.format), configuration: configuration, logger: logger)
    // The streamer is a Service: SIGTERM or SIGINT stops capture, and what was captured is still
    // delivered before the group ends.
    let group = ServiceGroup(configuration: ServiceGroupConfiguration(
        services: [.init(service: streamer, successTerminationBehavior: .gracefullyShutdownGroup)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    let running = Task { try await group.run() }
    var succeeded = false
    for await event in streamer.events {
        switch event {
        case .link(let role, let receiver, let state): say("\(role) \(receiver): \(state)")
        case .progress(let status): say(String(format: "captured %.1f s, acknowledged by all %.1f s", status.secondsCaptured, Double(status.log.acknowledgedEndSampleTime) / status.outputSampleRate))
        case .storage(let warning): say("storage: \(warning)")
        case .captureEnded(let result): say("capture ended: \(result)")
        case .delivered(let role, let receiver, let summary): say("\(role) \(receiver) has it all: \(summary.fileName), \(summary.totalFrames) frames")
        case .deliveryFailed(let role, let receiver, let error): say("\(role) \(receiver) failed: \(error)")
        case .localCopyStopped(let reason): say("the local copy stopped: \(reason)")
        case .finished(let outcome): succeeded = outcome.links.allSatisfy { if case .success = $0.result { true } else { false } }
        }
    }
    try await running.value
    streamer.dispose()
    exit(succeeded ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("capture-streamer-example: \(error)\n".utf8))
    exit(1)
}
