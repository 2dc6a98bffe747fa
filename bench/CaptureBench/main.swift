// capture-bench: captures FRAMES frames from an ALSA PCM through CaptureQueue into a callback that
// discards them, the library's path without encoding or network. Used by bench/bench-alsa-capture.sh
// against arecord on the same PCM.
//
//   capture-bench DEVICE RATE CHANNELS FRAMES [BUFFER_SECONDS] [BUFFERS]
import CaptureALSA
import CaptureCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one line to standard error.
func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 5, let rate = Int(arguments[2]), let channels = Int(arguments[3]), let frames = Int64(arguments[4]) else {
    printError("usage: capture-bench DEVICE RATE CHANNELS FRAMES [BUFFER_SECONDS] [BUFFERS]")
    exit(2)
}
let bufferSeconds = arguments.count > 5 ? Double(arguments[5]) ?? 0.5 : 0.5
guard bufferSeconds.isFinite, bufferSeconds > 0, bufferSeconds <= 10 else {
    printError("capture-bench: BUFFER_SECONDS must be above 0 and at most 10, not \(arguments[5])")
    exit(2)
}
let bufferDuration: Duration = .seconds(bufferSeconds)
let buffers = arguments.count > 6 ? Int(arguments[6]) ?? 3 : 3
ALSALibraryOutput.silenceDiagnostics()
do {
    let format = StreamFormat.linearPCM(sampleRate: Double(rate), channels: channels, sample: .s16)
    let period = BufferSizing.framesPerBuffer(format: format, duration: bufferDuration)
    let device = try ALSASource(device: arguments[1], requested: format, periodFrames: period, bufferCount: buffers, strictFormat: true)
    let queue = try CaptureQueue(
        source: DurationLimitedSource(device, frames: frames),
        configuration: .init(bufferCount: buffers, bufferDuration: bufferDuration)
    ) { _ in }
    try queue.start()
    let completion = queue.waitForCompletion()
    let statistics = queue.statistics
    queue.dispose()
    let ending: String
    switch completion {
    case .endOfStream: ending = "endOfStream"
    case .stopped: ending = "stopped"
    case .failed(let error): ending = "failed: " + error.description
    }
    print("completion=" + ending + " captured=" + String(statistics.framesCaptured) + " lost=" + String(statistics.framesLost)
        + " overruns=" + String(statistics.overruns))
} catch {
    printError("capture-bench: \(error)")
    exit(1)
}
