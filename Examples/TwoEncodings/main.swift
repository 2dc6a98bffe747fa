// Embeds CaptureStreamer with two encodings of one capture: a tone goes as PCM (lossless) to the
// main receiver and as Opus 64 kb/s to a second receiver, each a stream of its own on the same
// timeline, linked by the capture's id. Prints what happens.
//
//     capture-two-encodings-example MAIN_HOST:PORT OPUS_HOST:PORT
//
// Built by `make test`, which also runs it against two real capture-recv.
import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureSources
import Foundation
import Logging

func receiver(_ text: String) -> CaptureStreamer.Receiver? {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return nil }
    return CaptureStreamer.Receiver(host: String(text[..<colon]), port: port)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let main = receiver(arguments[0]), let thin = receiver(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: capture-two-encodings-example MAIN_HOST:PORT OPUS_HOST:PORT\n".utf8))
    exit(64)
}
do {
    let source = try AudioSources.open(.tone(.init(frequency: 440, levelDBFS: -12, sampleRate: 48_000, channels: 2, sample: .s16, duration: .seconds(3), paced: true))).source
    // One encoder per encoding; destinations that share an encoder share its stream.
    let lossless = try AudioEncoders.pcm(for: source.format)
    let live = try AudioEncoders.opus(for: source.format, settings: OpusEncoderSettings(bitrate: 64_000))
    var configuration = CaptureStreamer.Configuration(streamName: "two-encodings", receiver: main)
    configuration.spoolRoot = nil  // keep unacknowledged audio in memory only
    let streamer = try CaptureStreamer(
        source: source,
        destinations: [.init(receiver: main, encoder: lossless), .init(receiver: thin, encoder: live)],
        configuration: configuration, logger: Logger(label: "example"))
    for encoded in streamer.encodings {
        print("stream \(encoded.streamName): \(encoded.label), \(encoded.description.format)")
    }
    try streamer.start()
    var succeeded = false
    for await event in streamer.events {
        switch event {
        case .link(let role, let receiver, let state): print("\(role) \(receiver): \(state)")
        case .delivered(let role, let receiver, let summary): print("\(role) \(receiver) has it all: \(summary.fileName), \(summary.totalFrames) frames")
        case .deliveryFailed(let role, let receiver, let error): print("\(role) \(receiver) failed: \(error)")
        case .captureEnded(let result): print("capture ended: \(result)")
        case .finished(let outcome): succeeded = outcome.links.allSatisfy { if case .success = $0.result { true } else { false } }
        case .progress, .storage, .localCopyStopped: break
        }
    }
    streamer.dispose()
    exit(succeeded ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("capture-two-encodings-example: \(error)\n".utf8))
    exit(1)
}
