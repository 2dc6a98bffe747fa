import CAF
import CaptureCore
import CaptureWire
import Foundation

/// Creates a stream's recording files: its first file, and with `--segment` each next segment. It
/// knows everything a file records about its stream (format, magic cookie, channel layout, the
/// `info` entries) and names the file with the receiver's `FileNameTemplate`, creating its folders,
/// never outside the output folder. A name clash never stops a stream (docs/RECORDINGS.md, "Names"):
/// when the natural name is taken the file gets `-2`... `-9`, then a name carrying the stream id,
/// which no other stream can make, then that name with its first sample (the stream's own files);
/// such a file's `info` chunk records its `intended file name`.
///
/// Every file's `info` chunk says where it lies in its stream, so it can be placed in time without
/// any other file (docs/RECORDINGS.md): `first sample time` (UTC of its first valid sample),
/// `first valid sample` (that sample's index within the stream), `first sample` (the stream
/// position of its first frame, pre-roll included), `source host` and `clock synchronized`
/// (whether the sender's clock was disciplined when it stamped the stream's start).
public struct RecordingFileMaker: Sendable {
    /// The stream's Hello.
    public let hello: ValidatedHello
    /// The receiver's output folder (`--out`): every file lies inside it.
    public let outputDirectory: String
    /// How files are named (`--name-template`).
    public let template: FileNameTemplate
    /// Audio each file's writer gathers before writing it (`ReceiverConfiguration.fileWriteBehind`).
    let writeBehind: Int
    /// Whether each file's writer keeps its descriptor (`ReceiverConfiguration.holdsFileDescriptors`).
    let holdsDescriptor: Bool
    /// Entries every file of the stream has (title, source, application, stream id...).
    let commonInfo: [(key: String, value: String)]
    /// The stream's start time (ns): the time of its first valid sample.
    public let streamStart: Int64
    /// The position of the stream's first valid sample (start sample time + priming).
    public let streamOrigin: Int64
    /// The stream's sample rate.
    public let sampleRate: Double

    /// How many names end in a number before a taken name falls back to one carrying the stream
    /// id: the natural name, then `-2` to `-9`.
    public static let numberedNames = 9

    /// The most files of the stream itself one name with its first sample can have before creating
    /// gives up (only a stream's own files carry its id, one per crash while cutting a segment).
    static let ownNameAttempts = 1_000

    /// The maker of an accepted stream's files (`start`: the stream's start for `recorded date`;
    /// `peer`: the connection's address for `source`).
    public init(hello: ValidatedHello, start: Date, peer: String, configuration: ReceiverConfiguration) {
        self.hello = hello
        outputDirectory = configuration.outputDirectory
        template = configuration.nameTemplate
        writeBehind = configuration.fileWriteBehind
        holdsDescriptor = configuration.holdsFileDescriptors
        let message = hello.message
        // A CAF `info` string holds no NUL: removed as scalars (a NUL followed by a combining mark
        // is one Character, which replacing the string "\0" missed: every file creation of such a
        // stream failed, Fuzz/regressions/hello/nul-with-combining-mark-in-source-host).
        func withoutNUL(_ text: String) -> String { String(String.UnicodeScalarView(text.unicodeScalars.filter { $0 != "\0" })) }
        let source = withoutNUL(message.sourceHost.isEmpty ? peer : "\(message.sourceHost) (\(peer))")
        let clock: String
        switch message.clock.clockSynchronization {
        case .synchronized: clock = "yes"
        case .unsynchronized: clock = "no"
        case .unknown: clock = "unknown"
        }
        commonInfo = [
            ("title", withoutNUL(message.streamName)),
            ("recorded date", Self.isoTime(start)),
            ("source", source),
            ("source host", withoutNUL(message.sourceHost)),
            ("clock synchronized", clock),
            ("encoding application", withoutNUL((message.application.isEmpty ? "unknown sender" : message.application) + ", \(configuration.applicationName)")),
            ("stream id", hello.streamID.uuidString.lowercased()),
        ] + (hello.capture.map { [("capture id", $0.id.uuidString.lowercased()), ("capture encoding", $0.encoding)] } ?? [])
        streamStart = message.startTimeUnixNs
        streamOrigin = message.startSampleTime + Int64(message.primingFrames)
        sampleRate = hello.format.sampleRate
    }

    /// UTC time (ns since 1970) of the valid sample at `position`: the segment clock's time, exact
    /// in integers (so a file that begins on a boundary is named for that boundary's second), and
    /// clamped to Int64, which a stream whose Hello was validated never needs: its times stay before
    /// 2200 (PROTOCOL.md §6.1.4).
    public func time(ofPosition position: Int64) -> Int64 {
        segmentClock(length: .seconds(1)).time(ofPosition: position)
    }

    /// The stream's segment clock (`--segment`): boundaries of its timeline from its start.
    public func segmentClock(length: Duration) -> SegmentClock {
        SegmentClock(length: length, startTime: streamStart, origin: streamOrigin, sampleRate: sampleRate)
    }

    /// Creates the stream's first file, beginning at `resume` (a new stream's start, or for a stream
    /// that continues another, where it continues): its first valid sample follows the codec's
    /// priming (a continuation keeps the stream's priming too).
    public func createFirstFile(at resume: StreamPosition, extraInfo: [(key: String, value: String)] = []) throws(StorageError) -> RecordingFile {
        try create(firstFrame: resume.nextSampleTime, firstValid: resume.nextSampleTime + Int64(hello.message.primingFrames), extraInfo: extraInfo)
    }

    /// The fields the template names a file from when its first valid sample is at `firstValid`.
    private func fields(firstValid: Int64) -> FileNameTemplate.Fields {
        FileNameTemplate.Fields(stream: hello.message.streamName, streamID: hello.streamID, host: hello.message.sourceHost, start: time(ofPosition: firstValid))
    }

    /// The template's name (relative to the output folder) of a file whose first valid sample is at
    /// `firstValid`: the name it gets unless that is taken.
    public func naturalPath(firstValid: Int64) -> String {
        template.relativePath(fields(firstValid: firstValid))
    }

    /// The `index`-th name tried for a file (0: the natural name): numbered names, then the stream
    /// id, then the stream id and the file's first frame.
    static func variant(_ index: Int, firstFrame: Int64) -> FileNameTemplate.NameVariant {
        switch index {
        case 0: return .natural
        case 1..<numberedNames: return .numbered(index + 1)
        case numberedNames: return .streamID
        default: return .streamIDAndFirstSample(firstFrame, attempt: index - numberedNames)
        }
    }

    /// Creates a file whose first frame lies at stream position `firstFrame` and whose first valid
    /// sample at `firstValid` (the frames between are priming: a codec's look-ahead, or a segment's
    /// pre-roll), with `extraInfo` appended to the `info` chunk. Returns the open writer, and how it
    /// was named when its natural name was taken.
    public func create(firstFrame: Int64, firstValid: Int64, extraInfo: [(key: String, value: String)] = []) throws(StorageError) -> RecordingFile {
        let fields = fields(firstValid: firstValid)
        let info = commonInfo + [
            ("first sample time", Self.isoTime(fields.start)),
            ("first valid sample", "\(firstValid - streamOrigin)"),
            ("first sample", "\(firstFrame)"),
        ] + extraInfo
        let layout = hello.channelLayout
        let natural = template.relativePath(fields)
        try makeFolders(of: natural)
        for index in 0..<(Self.numberedNames + Self.ownNameAttempts) {
            let variant = Self.variant(index, firstFrame: firstFrame)
            let relative = template.relativePath(fields, variant: variant)
            let path = (outputDirectory as NSString).appendingPathComponent(relative)
            do throws(CAFError) {
                let writer = try CAFWriter(
                    path: path, format: hello.format, channelLayoutTag: layout?.tag, channelBitmap: layout?.bitmap ?? 0,
                    info: variant == .natural ? info : info + [("intended file name", natural)], magicCookie: StreamFiles.storedCookie(hello),
                    primingFrames: Int(firstValid - firstFrame), synchronizing: false, writeBehind: writeBehind,
                    holdingDescriptor: holdsDescriptor)
                let naming = variant == .natural ? nil : FileNaming(intended: natural, used: relative, carriesStreamID: index >= Self.numberedNames)
                return RecordingFile(writer: writer, naming: naming)
            } catch .fileExists {
                continue
            } catch {
                throw .cannotCreate("cannot create \(path): \(error.description)")
            }
        }
        let last = template.relativePath(fields, variant: Self.variant(Self.numberedNames + Self.ownNameAttempts - 1, firstFrame: firstFrame))
        throw .cannotCreate("cannot name a file for stream \(hello.streamID): \(natural) and \(Self.ownNameAttempts) names carrying its id up to \(last) exist in \(outputDirectory); move those files away")
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

/// A file `RecordingFileMaker` created: its writer, and how it was named when its natural name was
/// taken.
public struct RecordingFile {
    /// The open file.
    public let writer: CAFWriter
    /// Nil when the file has its natural name.
    public let naming: FileNaming?
}

/// How a file was named because its natural name (the template's) was taken by another file.
public struct FileNaming: Sendable, Equatable {
    /// The natural name, relative to the output folder.
    public var intended: String
    /// The name the file got, relative to the output folder.
    public var used: String
    /// The numbered names were taken too, so the name carries the stream id.
    public var carriesStreamID: Bool

    public init(intended: String, used: String, carriesStreamID: Bool) {
        self.intended = intended
        self.used = used
        self.carriesStreamID = carriesStreamID
    }

    /// The log line that says what was done.
    var logLine: SessionLogLine {
        SessionLogLine(
            .notice,
            carriesStreamID
                ? "the file name is taken; the stream is recorded under a name that carries its stream id"
                : "the file name is taken; the file is recorded under the next free number",
            ["intended": intended, "file": used])
    }
}
