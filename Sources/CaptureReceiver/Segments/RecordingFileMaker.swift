import CAF
import CaptureCore
import CaptureWire
import Foundation

/// Creates a stream's recording files: its first file, and with `--segment` each next segment. It
/// knows everything a file records about its stream (format, magic cookie, channel layout, the
/// `info` entries) and names the file with the receiver's `FileNameTemplate`, creating its folders,
/// never outside the output folder, and trying `-2`, `-3`... when a name is taken.
///
/// Every file's `info` chunk says where it lies in its stream, so it can be placed in time without
/// any other file (docs/RECORDINGS.md): `first sample time` (UTC of its first valid sample),
/// `first valid sample` (that sample's index within the stream), `first sample` (the stream
/// position of its first frame, pre-roll included), `source host` and `clock synchronized`
/// (whether the sender's clock was disciplined when it stamped the stream's start).
struct RecordingFileMaker: Sendable {
    let hello: ValidatedHello
    let outputDirectory: String
    let template: FileNameTemplate
    /// Entries every file of the stream has (title, source, application, stream id...).
    let commonInfo: [(key: String, value: String)]
    /// The stream's start time (ns): the time of its first valid sample.
    let streamStart: Int64
    /// The position of the stream's first valid sample (start sample time + priming).
    let streamOrigin: Int64
    let sampleRate: Double

    init(hello: ValidatedHello, start: Date, peer: String, configuration: ReceiverConfiguration) {
        self.hello = hello
        outputDirectory = configuration.outputDirectory
        template = configuration.nameTemplate
        let message = hello.message
        var source = message.sourceHost.isEmpty ? peer : "\(message.sourceHost) (\(peer))"
        source = source.replacingOccurrences(of: "\0", with: "")
        let clock: String
        switch message.clock.clockSynchronization {
        case .synchronized: clock = "yes"
        case .unsynchronized: clock = "no"
        case .unknown: clock = "unknown"
        }
        commonInfo = [
            ("title", message.streamName.replacingOccurrences(of: "\0", with: "")),
            ("recorded date", Self.isoTime(start)),
            ("source", source),
            ("source host", message.sourceHost.replacingOccurrences(of: "\0", with: "")),
            ("clock synchronized", clock),
            ("encoding application", (message.application.isEmpty ? "unknown sender" : message.application).replacingOccurrences(of: "\0", with: "") + ", \(configuration.applicationName)"),
            ("stream id", hello.streamID.uuidString.lowercased()),
        ]
        streamStart = message.startTimeUnixNs
        streamOrigin = message.startSampleTime + Int64(message.primingFrames)
        sampleRate = hello.format.sampleRate
    }

    /// UTC time (ns since 1970) of the valid sample at `position`, clamped to Int64 (which a stream
    /// whose Hello was validated never needs: its times stay before 2200, PROTOCOL.md §6.1.4).
    func time(ofPosition position: Int64) -> Int64 {
        let offset = (Double(position) - Double(streamOrigin)) / sampleRate * 1e9
        let time = Double(streamStart) + offset.rounded(.down)
        guard time.isFinite else { return streamStart }
        return time >= 0x1p63 ? .max : time <= -0x1p63 ? .min : Int64(time)
    }

    /// Creates a file whose first frame lies at stream position `firstFrame` and whose first valid
    /// sample at `firstValid` (the frames between are priming: a codec's look-ahead, or a segment's
    /// pre-roll), with `extraInfo` appended to the `info` chunk. Returns the open writer.
    func create(firstFrame: Int64, firstValid: Int64, extraInfo: [(key: String, value: String)] = []) throws(StorageError) -> CAFWriter {
        let start = time(ofPosition: firstValid)
        let info = commonInfo + [
            ("first sample time", Self.isoTime(start)),
            ("first valid sample", "\(firstValid - streamOrigin)"),
            ("first sample", "\(firstFrame)"),
        ] + extraInfo
        let fields = FileNameTemplate.Fields(stream: hello.message.streamName, streamID: hello.streamID, host: hello.message.sourceHost, start: start)
        let layout = hello.channelLayout
        for attempt in 1...100 {
            let relative = template.relativePath(fields, attempt: attempt)
            let path = (outputDirectory as NSString).appendingPathComponent(relative)
            try makeFolders(of: relative)
            do throws(CAFError) {
                return try CAFWriter(
                    path: path, format: hello.format, channelLayoutTag: layout?.tag, channelBitmap: layout?.bitmap ?? 0,
                    info: info, magicCookie: StreamFiles.storedCookie(hello),
                    primingFrames: Int(firstValid - firstFrame), synchronizing: false)
            } catch .fileExists {
                continue
            } catch {
                throw .cannotCreate("cannot create \(path): \(error.description)")
            }
        }
        throw .cannotCreate("cannot find a free file name for stream \(hello.message.streamName) in \(outputDirectory)")
    }

    /// Creates the folders a relative path names (each made durable in its parent, so a file created
    /// in it survives a crash once its own sync is done).
    private func makeFolders(of relative: String) throws(StorageError) {
        var folder = outputDirectory
        for component in relative.split(separator: "/").dropLast() {
            let next = (folder as NSString).appendingPathComponent(String(component))
            if mkdir(next, 0o755) == 0 {
                try? DurableFile.synchronizeDirectory(folder)
            } else if errno != EEXIST {
                throw .cannotCreate("cannot create the folder \(next): \(String(cString: strerror(errno)))")
            }
            folder = next
        }
    }

    /// `nanoseconds` since 1970 as ISO 8601 UTC with milliseconds (`2026-01-01T00:00:00.000Z`).
    static func isoTime(_ nanoseconds: Int64) -> String {
        let (seconds, remainder) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        let floorSeconds = remainder < 0 ? seconds - 1 : seconds
        let milliseconds = (remainder < 0 ? remainder + 1_000_000_000 : remainder) / 1_000_000
        return isoTime(seconds: floorSeconds, milliseconds: Int(milliseconds))
    }

    /// `date` as ISO 8601 UTC with milliseconds.
    static func isoTime(_ date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1_000).rounded(.down)
        guard milliseconds.isFinite, abs(milliseconds) < 0x1p62 else { return isoTime(seconds: 0, milliseconds: 0) }
        let (seconds, remainder) = Int64(milliseconds).quotientAndRemainder(dividingBy: 1_000)
        return isoTime(seconds: remainder < 0 ? seconds - 1 : seconds, milliseconds: Int(remainder < 0 ? remainder + 1_000 : remainder))
    }

    private static func isoTime(seconds: Int64, milliseconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "\(seconds)s" }
        let year = Int(parts.tm_year) + 1900
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), milliseconds)
    }
}
