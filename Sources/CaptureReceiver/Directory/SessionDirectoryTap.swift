import CaptureCore
import CaptureWire
import Foundation

/// The session handler's one hook into the stream directory: it subscribes to the session's domain
/// events (`.streamAccepted`, `.streamReleased`) and the facts its actions carry (Acks sent,
/// audio, gaps and markers written) and reports them to the directory. It changes nothing it sees
/// and reads nothing from the session: every fact comes with the action. Used on the connection's
/// event loop only.
final class SessionDirectoryTap {
    private let feed: any StreamDirectoryFeed
    private let outputDirectory: String
    private var recorder: (any StreamActivityRecorder)?

    init(feed: any StreamDirectoryFeed, outputDirectory: String) {
        self.feed = feed
        self.outputDirectory = outputDirectory
    }

    /// Reports what `action` means for the stream, before the handler performs it.
    /// It runs for every action, each piece of audio included, so it takes the action alone.
    func observe(_ action: ReceiverSessionAction, peer: @autoclosure () -> String) {
        switch action {
        case .write(let audio):
            recorder?.audioReceived(endSampleTime: audio.endSampleTime, levels: audio.levels)
        case .send(.ack(let ack)):
            // The session states in an Ack the position that just became durable.
            recorder?.positionsChanged(durableSampleTime: ack.durableSampleTime, acknowledgedSampleTime: ack.durableSampleTime)
        case .recordGap(let gap):
            recorder?.gapRecorded(sampleTime: gap.sampleTime, lengthFrames: Int64(clamping: gap.lengthFrames), reason: gap.reason)
        case .recordFilledGap(let gap):
            recorder?.gapRecorded(sampleTime: gap.sampleTime, lengthFrames: Int64(clamping: gap.lengthFrames), reason: gap.reason)
        case .recordMarker(let marker):
            recorder?.markerRecorded(sampleTime: marker.sampleTime, label: marker.label)
        case .streamAccepted(let accepted):
            let hello = accepted.hello
            recorder = feed.streamOpened(StreamOpening(
                id: hello.streamID, name: hello.message.streamName, peer: peer(), format: hello.format,
                started: Date(timeIntervalSince1970: Double(hello.message.startTimeUnixNs) / 1e9),
                startSampleTime: hello.message.startSampleTime, file: relativePath(accepted.filePath), resumed: accepted.resumed,
                durableSampleTime: accepted.durableSampleTime, capture: hello.capture))
        case .streamReleased(let released):
            guard let recorder else { return }
            recorder.positionsChanged(durableSampleTime: released.durableSampleTime, acknowledgedSampleTime: nil)
            recorder.connectionEnded(resumable: released.resumable)
            self.recorder = nil
        default:
            break
        }
    }

    /// `path` relative to the output folder (unchanged when it lies elsewhere).
    private func relativePath(_ path: String) -> String {
        let folder = outputDirectory.hasSuffix("/") ? outputDirectory : outputDirectory + "/"
        if path.hasPrefix(folder) { return String(path.dropFirst(folder.count)) }
        let standardFolder = (outputDirectory as NSString).standardizingPath + "/"
        let standardPath = (path as NSString).standardizingPath
        if standardPath.hasPrefix(standardFolder) { return String(standardPath.dropFirst(standardFolder.count)) }
        return path
    }
}
