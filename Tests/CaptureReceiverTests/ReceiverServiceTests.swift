import CaptureCore
import CaptureService
import CaptureWire
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import XCTest

@testable import CaptureReceiver

/// The receiver as a swift-service-lifecycle `Service` over `NIOAsyncChannel`: it takes in
/// connections while it runs, and a graceful shutdown (or the task's cancellation) tells every
/// sender, closes the listening socket and ends `run()`.
final class ReceiverServiceTests: XCTestCase {
    private let quiet = Logger(label: "receiver-service-tests", factory: { _ in SwiftLogNoOpLogHandler() })
    private var output: URL!
    private var clients: MultiThreadedEventLoopGroup!

    override func setUp() {
        output = FileManager.default.temporaryDirectory.appendingPathComponent("receiver-service-\(UUID().uuidString)")
        clients = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    override func tearDown() async throws {
        try await clients.shutdownGracefully()
        try? FileManager.default.removeItem(at: output)
    }

    private func startServer() async throws -> (CaptureReceiverServer, AsyncStream<SocketAddress>) {
        let (announced, announce) = AsyncStream<SocketAddress>.makeStream()
        let server = try await CaptureReceiverServer.start(
            configuration: ReceiverConfiguration(outputDirectory: output.path, host: "127.0.0.1", port: 0), logger: quiet
        ) { address in
            announce.yield(address)
            announce.finish()
        }
        return (server, announced)
    }

    /// A sender's connection that has sent its preamble and the Hello of a stream of its own.
    private func connectAndStream(to address: SocketAddress) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        let channel = try await ClientBootstrap(group: clients).connect(to: address) { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
        let hello = WirePreamble.bytes() + (try WireMessage.hello(.with {
            $0.protocolVersion = 1
            $0.streamID = UUID().wireBytes
            $0.streamName = "field-unit"
            $0.format = Capture_V1_StreamFormat(StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        }).encode())
        try await channel.channel.writeAndFlush(ByteBuffer(bytes: hello))
        return channel
    }

    /// Every frame the receiver sends on `connection` until it closes it; `whenAccepted` runs once
    /// HelloAccepted has arrived.
    private static func framesUntilClosed(
        _ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, whenAccepted: @Sendable () async -> Void = {}
    ) async throws -> [WireMessageType] {
        try await connection.executeThenClose { inbound, _ in
            var decoder = FrameDecoder(role: .sender)
            var messages: [WireMessage] = []
            var toldAccepted = false
            for try await buffer in inbound {
                messages += try decoder.decode(Array(buffer.readableBytesView))
                if !toldAccepted, messages.contains(where: { $0.type == .helloAccepted }) {
                    toldAccepted = true
                    await whenAccepted()
                }
            }
            try decoder.finish()
            XCTAssertEqual(errorCodes(messages), [.shuttingDown], "\(messages)")
            return messages.map(\.type)
        }
    }

    private static func errorCodes(_ messages: [WireMessage]) -> [Capture_V1_Error.Code] {
        messages.compactMap { message in
            if case .error(let error) = message { return error.code }
            return nil
        }
    }

    func testAGracefulShutdownTellsTheConnectedSenderAndClosesTheListener() async throws {
        let (server, announced) = try await startServer()
        let group = SignalledServiceRunner.serviceGroup([server], signals: [], maximumGracefulShutdownDuration: .seconds(60), logger: quiet)
        let running = Task { try await group.run() }
        var announcements = announced.makeAsyncIterator()
        let address = await announcements.next()
        XCTAssertEqual(address, server.localAddress, "run() announces the address it serves")

        let connection = try await connectAndStream(to: server.localAddress)
        // Once the stream is accepted, a graceful shutdown tells its sender why it ends.
        let messages = try await Self.framesUntilClosed(connection) { await group.triggerGracefulShutdown() }
        XCTAssertEqual(messages, [.helloAccepted, .error])
        try await running.value

        do {
            let late = try await connectAndStream(to: server.localAddress)
            try? await late.channel.close()
            XCTFail("the listening socket must be closed once run() has returned")
        } catch {
            XCTAssertTrue("\(error)".contains("refused") || error is NIOConnectionError, "\(error)")
        }
    }

    func testCancellingTheRunStopsTheServerAllTheSame() async throws {
        let (server, announced) = try await startServer()
        let running = Task { try await server.run() }
        var announcements = announced.makeAsyncIterator()
        _ = await announcements.next()
        let connection = try await connectAndStream(to: server.localAddress)
        let messages = try await Self.framesUntilClosed(connection) { running.cancel() }
        XCTAssertEqual(messages, [.helloAccepted, .error])
        try await running.value
        let stoppedAgain = await server.shutDown()
        XCTAssertTrue(stoppedAgain, "a second shutdown is the first one's result")
    }

    func testEveryStreamOfManyIsToldWhenTheRunIsCancelled() async throws {
        // Forty streams at once, each accepted while run() runs, each told when the run is cancelled.
        let (server, announced) = try await startServer()
        let running = Task { try await server.run() }
        var announcements = announced.makeAsyncIterator()
        _ = await announcements.next()
        var connections: [NIOAsyncChannel<ByteBuffer, ByteBuffer>] = []
        for _ in 0..<40 { connections.append(try await connectAndStream(to: server.localAddress)) }
        let (accepted, acceptance) = AsyncStream<Void>.makeStream()
        try await withThrowingTaskGroup(of: [WireMessageType].self) { readers in
            for connection in connections {
                readers.addTask { try await Self.framesUntilClosed(connection) { acceptance.yield() } }
            }
            // Every stream accepted, then the run cancelled: each sender is told.
            var count = 0
            for await _ in accepted {
                count += 1
                if count == connections.count { break }
            }
            running.cancel()
            for try await messages in readers { XCTAssertEqual(messages, [.helloAccepted, .error]) }
        }
        try await running.value
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: output.path).filter { $0.hasSuffix(".caf") }.count, 40)
    }
}
