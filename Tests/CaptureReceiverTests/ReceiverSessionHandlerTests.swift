@testable import CaptureReceiver
import CaptureCore
import CaptureWire
import CaptureWireNIO
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// The session handler as an I/O shell, in an EmbeddedChannel with scripted storage: the paths
/// that used to need timed real processes — a close while the file opens, a finish failing after
/// the sender left, a shutdown during a resume, backpressure on and off — step by step.
final class ReceiverSessionHandlerTests: XCTestCase {
    // MARK: - Scripted storage

    /// A stream file whose operations wait until the test completes them.
    final class ScriptedFile: StreamFile, @unchecked Sendable {
        let path: String
        let events: StreamWriterEvents
        private let lock = NSLock()
        private var _writes: [AudioWrite] = []
        private var _finish: (@Sendable (Result<FinishedFile, StorageError>) -> Void)?
        private var _detach: (finalizing: Bool, completion: @Sendable () -> Void)?

        init(path: String, events: StreamWriterEvents) {
            self.path = path
            self.events = events
        }

        var writes: [AudioWrite] { lock.withLock { _writes } }
        var pendingFinish: (@Sendable (Result<FinishedFile, StorageError>) -> Void)? { lock.withLock { _finish } }
        var pendingDetach: (finalizing: Bool, completion: @Sendable () -> Void)? { lock.withLock { _detach } }

        func write(_ audio: AudioWrite) { lock.withLock { _writes.append(audio) } }
        func recordGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String) {}
        func recordMarker(sequence: UInt64, sampleTime: Int64, label: String) {}
        func recordFilledGap(sequence: UInt64, sampleTime: Int64, length: Int64, reason: String) {}
        func finish(_ end: StreamEnd?, completion: @escaping @Sendable (Result<FinishedFile, StorageError>) -> Void) {
            lock.withLock { _finish = completion }
        }
        func detach(finalizing: Bool, completion: @escaping @Sendable () -> Void) {
            lock.withLock { _detach = (finalizing, completion) }
        }
    }

    /// Storage whose opens wait until the test completes them.
    final class ScriptedStorage: StreamStorage, @unchecked Sendable {
        struct Request {
            var hello: ValidatedHello
            var mayCreate: Bool
            var events: StreamWriterEvents
            var completion: @Sendable (Result<OpenedStreamFile, StorageError>) -> Void
        }
        private let lock = NSLock()
        private var _requests: [Request] = []
        var requests: [Request] { lock.withLock { _requests } }

        func open(
            _ hello: ValidatedHello, mayCreate: Bool, owner: StreamOwner, peer: String, events: StreamWriterEvents,
            completion: @escaping @Sendable (Result<OpenedStreamFile, StorageError>) -> Void
        ) {
            lock.withLock { _requests.append(Request(hello: hello, mayCreate: mayCreate, events: events, completion: completion)) }
        }

        /// Completes the last open with a scripted file at `path` (an unfinished one continued when `resumed`).
        func completeOpen(path: String, resume: StreamPosition, resumed: Bool = false) -> ScriptedFile? {
            guard let request = requests.last else { return nil }
            let file = ScriptedFile(path: path, events: request.events)
            request.completion(.success(OpenedStreamFile(file: file, resume: resume, resumed: resumed)))
            return file
        }

        /// Lets go of the opens' callbacks, as a real storage does once it has called back (they
        /// hold the handler).
        func letGoOfOpens() {
            lock.withLock { _requests.removeAll() }
        }

        /// Fails the last open.
        func failOpen(_ error: StorageError) {
            requests.last?.completion(.failure(error))
        }
    }

    /// Counts the reads that reach the head of the pipeline (the socket).
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = Any
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    // MARK: - Set-up

    static let stream = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()
    static let path = "/srv/rec/studio-a_20260101T000000Z.caf"

    private var registry = StreamRegistry()
    private var storage = ScriptedStorage()
    private var readCounter = ReadCounter()
    private var handler: ReceiverSessionHandler?

    private func makeChannel(resumeWindow: Duration = .seconds(86_400), logger: Logger = Logger(label: "test")) throws -> EmbeddedChannel {
        var configuration = ReceiverConfiguration(outputDirectory: "/srv/rec")
        configuration.resumeWindow = resumeWindow
        let handler = ReceiverSessionHandler(configuration: configuration, registry: registry, storage: storage, logger: logger)
        self.handler = handler
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([
            readCounter,
            ByteToMessageHandler(WireFrameDecoder(role: .receiver)),
            MessageToByteHandler(WireFrameEncoder()),
            handler,
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40_000)).wait()
        return channel
    }

    private func send(_ channel: EmbeddedChannel, _ bytes: [UInt8]) throws {
        try channel.writeInbound(ByteBuffer(bytes: bytes))
        channel.embeddedEventLoop.run()
    }

    private func hello() throws -> [UInt8] {
        WirePreamble.bytes() + (try WireMessage.hello(.with {
            $0.protocolVersion = 1
            $0.streamID = Self.stream.wireBytes
            $0.streamName = "studio-a"
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        }).encode())
    }

    /// 1 MiB of s16 stereo audio at `sequence`.
    private func bigAudio(_ sequence: UInt64) throws -> [UInt8] {
        let frames = 262_144
        return try WireMessage.audioData(.with {
            $0.sequence = sequence
            $0.firstSampleTime = Int64(sequence - 1) * Int64(frames)
            $0.packetCount = UInt32(frames)
            $0.frameCount = UInt32(frames)
            $0.payload = Data(count: frames * 4)
        }).encode()
    }

    /// Every frame the handler sent.
    private func sent(_ channel: EmbeddedChannel) throws -> [WireMessage] {
        var decoder = FrameDecoder(role: .sender)
        var messages: [WireMessage] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            messages += try decoder.decode(Array(buffer.readableBytesView))
        }
        return messages
    }

    private func types(_ messages: [WireMessage]) -> [WireMessageType] { messages.map(\.type) }

    /// Opens a stream through HelloAccepted.
    private func streaming(_ channel: EmbeddedChannel) throws -> ScriptedFile {
        try send(channel, try hello())
        let file = try XCTUnwrap(storage.completeOpen(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0)))
        channel.embeddedEventLoop.run()
        XCTAssertEqual(types(try sent(channel)), [.helloAccepted])
        return file
    }

    // MARK: - Tests

    func testACloseWhileTheFileOpensLeavesTheStreamResumable() throws {
        let channel = try makeChannel()
        try send(channel, try hello())
        XCTAssertEqual(storage.requests.count, 1)
        XCTAssertEqual(registry.activeStreamCount, 1, "reserved while its file opens")
        try channel.close().wait()
        channel.embeddedEventLoop.run()
        let file = try XCTUnwrap(storage.completeOpen(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0)))
        channel.embeddedEventLoop.run()
        let detach = try XCTUnwrap(file.pendingDetach, "the opened file is let go of at once")
        XCTAssertFalse(detach.finalizing)
        XCTAssertEqual(registry.activeStreamCount, 1, "still the session's until the file is closed")
        detach.completion()
        channel.embeddedEventLoop.run()
        XCTAssertEqual(registry.activeStreamCount, 0, "released: its sender can resume it on any connection")
        guard case .done(.resumable)? = handler?.sessionState else {
            return XCTFail("done, the stream left resumable: \(String(describing: handler?.sessionState))")
        }
    }

    func testAFinishFailingAfterTheSenderLeftKeepsTheFileResumable() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        try send(channel, try WireMessage.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 }).encode())
        let finish = try XCTUnwrap(file.pendingFinish)
        try channel.close().wait()
        channel.embeddedEventLoop.run()
        XCTAssertNil(file.pendingDetach, "the finish is under way")
        finish(.failure(.writeFailed("no space left on device")))
        channel.embeddedEventLoop.run()
        let detach = try XCTUnwrap(file.pendingDetach, "a failed finish lets go of the file, resumable")
        XCTAssertFalse(detach.finalizing)
        XCTAssertEqual(registry.activeStreamCount, 1, "the stream stays this connection's until its file is closed")
        detach.completion()
        channel.embeddedEventLoop.run()
        XCTAssertEqual(registry.activeStreamCount, 0)
    }

    func testAFinishedStreamIsAcceptedAndForgotten() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        try send(channel, try WireMessage.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 }).encode())
        try XCTUnwrap(file.pendingFinish)(.success(FinishedFile(path: Self.path, frames: 0, packets: 0, bytes: 0, gaps: 0)))
        channel.embeddedEventLoop.run()
        XCTAssertEqual(types(try sent(channel)), [.endAccepted])
        XCTAssertFalse(channel.isActive, "closed after EndAccepted")
        XCTAssertEqual(registry.activeStreamCount, 0)
        XCTAssertNil(file.pendingDetach, "finished, not released for a resume")
    }

    /// The handler holds itself (for storage callbacks) while its session has work left; once the
    /// session is over, whichever of the file and the connection ends last, nothing may keep it.
    func testTheHandlerIsLetGoOfOnceItsSessionIsOver() throws {
        // The connection closes after the file finished (EndAccepted, then the close).
        weak var finishedFirst: ReceiverSessionHandler?
        try {
            let channel = try makeChannel()
            let file = try streaming(channel)
            try send(channel, try WireMessage.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 }).encode())
            try XCTUnwrap(file.pendingFinish)(.success(FinishedFile(path: Self.path, frames: 0, packets: 0, bytes: 0, gaps: 0)))
            channel.embeddedEventLoop.run()
            XCTAssertFalse(channel.isActive)
            finishedFirst = handler
        }()
        handler = nil
        storage.letGoOfOpens()
        XCTAssertNil(finishedFirst, "the finished stream's handler is freed")

        // The file is let go of after the connection closed (the close came while it opened).
        weak var closedFirst: ReceiverSessionHandler?
        try {
            let channel = try makeChannel()
            try send(channel, try hello())
            try channel.close().wait()
            channel.embeddedEventLoop.run()
            let file = try XCTUnwrap(storage.completeOpen(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0)))
            channel.embeddedEventLoop.run()
            try XCTUnwrap(file.pendingDetach).completion()
            channel.embeddedEventLoop.run()
            closedFirst = handler
            guard case .done(.resumable)? = handler?.sessionState else {
                return XCTFail("done, resumable: \(String(describing: handler?.sessionState))")
            }
        }()
        handler = nil
        storage.letGoOfOpens()
        XCTAssertNil(closedFirst, "the handler of a stream left resumable is freed")
    }

    func testAShutdownDuringAResumeFinalizesTheFileAndKeepsItResumable() throws {
        let channel = try makeChannel()
        try send(channel, try hello())
        XCTAssertEqual(storage.requests.last?.mayCreate, true, "a sender that holds the stream's beginning may start it anew")
        handler?.shutDown()
        channel.embeddedEventLoop.run()
        let refusal = try sent(channel)
        guard case .error(let error)? = refusal.first else { return XCTFail("an Error frame: \(refusal)") }
        XCTAssertEqual(error.code, .shuttingDown)
        let file = try XCTUnwrap(storage.completeOpen(path: Self.path, resume: StreamPosition(nextSequence: 9, nextSampleTime: 99), resumed: true))
        channel.embeddedEventLoop.run()
        let detach = try XCTUnwrap(file.pendingDetach)
        XCTAssertTrue(detach.finalizing, "finalized for readers while the receiver is down")
        XCTAssertEqual(registry.activeStreamCount, 1)
        detach.completion()
        channel.embeddedEventLoop.run()
        XCTAssertEqual(registry.activeStreamCount, 0)
    }

    func testAStreamHeldElsewhereIsRefusedAsBusyAndGivenBack() throws {
        let channel = try makeChannel()
        try send(channel, try hello())
        storage.failOpen(.streamBusy("stream is being recorded by another receiver sharing /srv/rec"))
        channel.embeddedEventLoop.run()
        let refusal = try sent(channel)
        guard case .error(let error)? = refusal.first else { return XCTFail("an Error frame: \(refusal)") }
        XCTAssertEqual(error.code, .streamBusy, "a code the sender retries")
        XCTAssertTrue(error.message.contains("another receiver"), error.message)
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(registry.activeStreamCount, 0, "nothing of the stream stays reserved here")
    }

    func testReadsAreHeldBackWhileTheDiskIsBehindAndResumeOnceDurable() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        for sequence in UInt64(1)...8 { try send(channel, try bigAudio(sequence)) }
        let readsBefore = readCounter.reads
        channel.read()
        XCTAssertEqual(readCounter.reads, readsBefore + 1, "8 MiB not durable: still reading")
        try send(channel, try bigAudio(9))
        XCTAssertEqual(file.writes.count, 9)
        channel.read()
        channel.read()
        XCTAssertEqual(readCounter.reads, readsBefore + 1, "over 8 MiB not durable: reads are held back")
        file.events.durable(StreamPosition(lastSequence: 3, endSampleTime: 3 * 262_144))
        channel.embeddedEventLoop.run()
        XCTAssertEqual(readCounter.reads, readsBefore + 1, "6 MiB still not durable")
        file.events.durable(StreamPosition(lastSequence: 9, endSampleTime: 9 * 262_144))
        channel.embeddedEventLoop.run()
        XCTAssertEqual(readCounter.reads, readsBefore + 2, "all durable: the held read goes on")
        XCTAssertEqual(try sent(channel).map(\.type), [.ack, .ack])
        channel.read()
        XCTAssertEqual(readCounter.reads, readsBefore + 3)
    }

    func testAStorageFailureRefusesTheStreamAndKeepsItResumable() throws {
        let channel = try makeChannel()
        let file = try streaming(channel)
        file.events.failed(.writeFailed("disk full"), file.path)
        channel.embeddedEventLoop.run()
        let refusal = try sent(channel)
        guard case .error(let error)? = refusal.first else { return XCTFail("an Error frame: \(refusal)") }
        XCTAssertEqual(error.code, .storageFailed)
        XCTAssertFalse(channel.isActive)
        let detach = try XCTUnwrap(file.pendingDetach)
        XCTAssertFalse(detach.finalizing, "kept resumable at its last durable position")
        detach.completion()
        channel.embeddedEventLoop.run()
        XCTAssertEqual(registry.activeStreamCount, 0)
    }

    func testAFloodOfGapsIsLoggedAsOneLineThenASummaryNotALinePerGap() throws {
        let lines = CapturedLog()
        let channel = try makeChannel(logger: Logger(label: "test") { _ in lines })
        let file = try streaming(channel)
        for sequence in UInt64(1)...1_000 {
            try send(channel, try WireMessage.gap(.with {
                $0.sequence = sequence
                $0.sampleTime = Int64(sequence - 1) * 10
                $0.lengthFrames = 10
                $0.reason = "overrun"
            }).encode())
        }
        XCTAssertEqual(lines.messages.filter { $0.message == "gap in stream" }.count, 1, "the first gap, then nothing within the interval")
        _ = file
        try channel.close().wait()
        channel.embeddedEventLoop.run()
        let gaps = lines.messages.filter { $0.message == "gap in stream" }
        XCTAssertEqual(gaps.count, 2, "and one summary when the connection ends")
        XCTAssertEqual(gaps.last?.metadata["repeated"], "999 times since the last such line (the latest shown)")
        XCTAssertEqual(gaps.last?.metadata["sample"], "9990")
    }
}

/// Log lines a handler wrote, for tests.
final class CapturedLog: LogHandler, @unchecked Sendable {
    struct Line {
        var message: String
        var metadata: [String: String]
    }
    private let lock = NSLock()
    private var lines: [Line] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var messages: [Line] { lock.withLock { lines } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let line = Line(message: "\(event.message)", metadata: (event.metadata ?? [:]).mapValues { "\($0)" })
        lock.withLock { lines.append(line) }
    }
}
