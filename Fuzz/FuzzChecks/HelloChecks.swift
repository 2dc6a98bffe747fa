import CAF
import CaptureReceiver
import CaptureWire
import Foundation

/// Fuzz target 4: arbitrary bytes as a Hello's body, driven through the receiver's whole accept path:
/// decoding (protobuf) and validation, the receiver's session deciding and opening the stream, the
/// stream's first file named by a template and created in a temporary folder (on tmpfs when there
/// is one), a second file of the same natural name (a clash), and with segments the segment clock's
/// first boundary, the segment file made there, and the clock at the end of the stream's timeline.
///
/// The input picks the receiver's configuration with the last byte of its stream id (any 16 bytes
/// are a valid id): bit 0 segments on, bits 1–2 the name template, bits 3–4 the segment length.
///
/// Invariants: a Hello that validates has a 16-byte id that round-trips through its UUID, a
/// supported format, a resume secret of an allowed size, a continuation the rules allow, and
/// numbers within PROTOCOL.md §6.1.4 (so the timeline's end, its times and its boundaries are far
/// inside Int64: nothing is clamped); validating it again gives the same result. The session asks
/// to open it and answers HelloAccepted at the new stream's resume point. Files are created inside
/// the output folder under sanitized names; a taken name never fails (the clash gets another name,
/// and says which it wanted); a segment boundary lies after the position it follows, within one
/// segment's frames.
public enum HelloChecks {
    /// Name templates the input chooses from.
    static let templates: [FileNameTemplate] = [
        .standard,
        (try? FileNameTemplate("{stream}")) ?? .standard,
        (try? FileNameTemplate("{stream}/%Y/%m/%d/{host}_{stream_id}_%H%M%S")) ?? .standard,
        (try? FileNameTemplate("{stream}_%H%M%S")) ?? .standard,
    ]
    /// Segment lengths the input chooses from.
    static let segmentLengths: [Duration] = [.seconds(1), .seconds(10), .seconds(420), .seconds(3_600)]

    /// The output folder of this process: on tmpfs when there is one, so creating files is cheap.
    static let root: String = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let path = (base as NSString).appendingPathComponent("capture-fuzz-hello-\(getpid())")
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    public static func check(_ data: Data) {
        guard let hello = try? Capture_V1_Hello(serializedBytes: data) else { return }
        guard let validated = try? ValidatedHello(hello) else { return }
        checkValidated(hello, validated)
        accept(hello, validated)
    }

    private static func checkValidated(_ hello: Capture_V1_Hello, _ validated: ValidatedHello) {
        precondition(validated.streamID.wireBytes == hello.streamID, "the stream id does not round-trip")
        precondition((try? validated.format.validate()) != nil, "a validated Hello carries an invalid format")
        precondition(hello.resumeSecret.isEmpty || WireProtocol.resumeSecretLengths.contains(hello.resumeSecret.count))
        if hello.hasContinues {
            precondition(hello.continues.firstSequence >= 1 && hello.continues.firstSequence <= WireProtocol.maximumSequence)
            precondition(hello.continues.streamID != hello.streamID)
        }
        precondition((0...WireProtocol.latestStartTimeUnixNanoseconds).contains(hello.startTimeUnixNs))
        precondition((0...WireProtocol.maximumStartSampleTime).contains(hello.startSampleTime))
        precondition(hello.resumeFromSequence <= WireProtocol.maximumSequence)
        precondition(validated.timelineEnd > hello.startSampleTime && validated.timelineEnd < 1 << 54, "the timeline ends far inside Int64")
        let resume = StreamPosition.beginning(of: validated)
        precondition(resume.nextSequence >= 1 && resume.nextSampleTime >= 0)
        precondition((try? ValidatedHello(hello)) == validated, "validation is not deterministic")
    }

    /// The receiver's accept path for a valid Hello, in a folder of its own that is removed after.
    private static func accept(_ hello: Capture_V1_Hello, _ validated: ValidatedHello) {
        let choice = hello.streamID.last ?? 0
        var configuration = ReceiverConfiguration(outputDirectory: (root as NSString).appendingPathComponent("out"))
        configuration.nameTemplate = templates[Int(choice >> 1) & 3]
        configuration.segmentLength = choice & 1 == 1 ? segmentLengths[Int(choice >> 3) & 3] : nil
        try? FileManager.default.createDirectory(atPath: configuration.outputDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: configuration.outputDirectory) }

        // The session decides and asks for the file.
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        precondition(session.handle(.messageReceived(.hello(hello))) == [.decide(validated)], "a valid Hello is put to the decision")
        guard case .openFile(let asked, let mayCreate)? = session.handle(.helloDecided(.accepted)).last, asked == validated else {
            preconditionFailure("an accepted Hello does not ask for its file")
        }
        guard mayCreate else {
            // The sender no longer holds the stream's beginning and no file here holds the stream.
            let refused = session.handle(.fileOpenFailed(.notResumable))
            precondition(refused.contains { if case .send(.error(let error)) = $0 { return error.code == .sequenceGap } else { return false } } && refused.last == .close,
                         "a stream nothing here can hold is refused with SEQUENCE_GAP: \(refused)")
            return
        }

        // Its first file, named by the template, then a second of the same natural name.
        let start = hello.startTimeUnixNs > 0 ? Date(timeIntervalSince1970: Double(hello.startTimeUnixNs) / 1e9) : Date()
        let maker = RecordingFileMaker(hello: validated, start: start, peer: "127.0.0.1:1", configuration: configuration)
        let resume = StreamPosition.beginning(of: validated)
        let first = create(maker) { () throws(StorageError) in try maker.createFirstFile(at: resume) }
        let firstValid = resume.nextSampleTime + Int64(hello.primingFrames)
        precondition(first.naming == nil, "the first file of an empty folder has its natural name")
        precondition(first.writer.path == (configuration.outputDirectory as NSString).appendingPathComponent(maker.naturalPath(firstValid: firstValid)))
        let clash = create(maker) { () throws(StorageError) in try maker.createFirstFile(at: resume) }
        precondition(clash.naming?.intended == maker.naturalPath(firstValid: firstValid), "a clash says which name it wanted")
        precondition(clash.naming?.used != clash.naming?.intended)

        let opened = session.handle(.fileOpened(path: first.writer.path, resume: resume, resumed: false, naming: first.naming))
        guard opened.count >= 2, case .send(.helloAccepted(let accepted)) = opened[1] else {
            preconditionFailure("an opened file is not answered with HelloAccepted: \(opened)")
        }
        precondition(accepted.nextSequence == resume.nextSequence && accepted.nextSampleTime == resume.nextSampleTime)

        // The segment clock: the first boundary, a file made there, and the timeline's end.
        if let length = configuration.segmentLength {
            let clock = maker.segmentClock(length: length)
            let frames = Int64(length.components.seconds) * clock.sampleRate
            let boundary = clock.nextBoundary(after: firstValid)
            precondition(boundary > firstValid && boundary - firstValid <= frames + 1, "a boundary lies within a segment after its position")
            // As a cut makes it: linear PCM begins on the boundary, Opus with up to 80 ms of pre-roll.
            let firstFrame = validated.format.isVariableBitRate ? max(boundary - 3_840, resume.nextSampleTime) : boundary
            create(maker) { () throws(StorageError) in try maker.create(firstFrame: firstFrame, firstValid: boundary) }.writer.close()
            let end = validated.timelineEnd
            let last = clock.nextBoundary(after: end)
            precondition(last > end && last - end <= frames + 1, "the timeline's end is far inside Int64: its boundary is not clamped")
            let time = clock.time(ofPosition: end)
            precondition(time > hello.startTimeUnixNs && time < WireProtocol.latestStartTimeUnixNanoseconds + (WireProtocol.maximumTimelineSeconds + 86_400) * 1_000_000_000)
            precondition(maker.time(ofPosition: end) == time)
        }
        first.writer.close()
        clash.writer.close()
    }

    /// Creates a file with `make`; a creation may fail only for a reason that is no clash and no
    /// overflow (none is expected in an empty tmpfs folder), and lands inside the output folder.
    private static func create(_ maker: RecordingFileMaker, _ make: () throws(StorageError) -> RecordingFile) -> RecordingFile {
        let file: RecordingFile
        do throws(StorageError) {
            file = try make()
        } catch {
            preconditionFailure("creating a file failed: \(error)")
        }
        let folder = maker.outputDirectory + "/"
        precondition(file.writer.path.hasPrefix(folder), "a file outside the output folder: \(file.writer.path)")
        let relative = file.writer.path.dropFirst(folder.count).split(separator: "/")
        precondition(!relative.isEmpty && relative.allSatisfy { !$0.hasPrefix(".") && $0 != ".." }, "an unsanitized name: \(relative)")
        if let naming = file.naming { precondition(naming.used == relative.joined(separator: "/")) }
        return file
    }
}
