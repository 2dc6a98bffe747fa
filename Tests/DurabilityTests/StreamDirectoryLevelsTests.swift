import CaptureCodecs
import CaptureCore
@testable import CaptureReceiver
import CaptureSender
import CaptureWire
import Foundation
import Logging
import NIOCore
import XCTest

/// A tone streamed from the sender's pipeline over loopback to a real receiver: the receiver's
/// stream directory lists it with the levels the sender measured (ToneSource's level is the sine's
/// peak, −12 dBFS, so its RMS is −15.01 dBFS), its durable seconds, its file, and the events.
final class StreamDirectoryLevelsTests: XCTestCase {
    private func stream(encoder makeEncoder: (StreamFormat) throws -> any AudioEncoder, name: String) async throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("directory-levels-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let logger = Logger(label: "test")
        let server = try await CaptureReceiverServer.start(
            configuration: ReceiverConfiguration(outputDirectory: output.path, host: "127.0.0.1", port: 0), logger: logger)
        // The receiver serves while its run() runs; cancelling the run shuts it down.
        let serving = Task { try await server.run() }
        do {
            try await stream(to: server, output: output, encoder: makeEncoder, name: name, logger: logger)
        } catch {
            serving.cancel()
            try? await serving.value
            throw error
        }
        serving.cancel()
        try await serving.value
    }

    /// One tone through a real sender to `server`, and what its directory shows.
    private func stream(
        to server: CaptureReceiverServer, output: URL, encoder makeEncoder: (StreamFormat) throws -> any AudioEncoder, name: String, logger: Logger
    ) async throws {
        let events = server.directory.events()

        let source = try ToneSource(settings: .init(frequency: 1_000, levelDBFS: -12, channels: 2, duration: .seconds(2), paced: false))
        let encoder = try makeEncoder(source.format)
        let log = PacketLog(producerIsRealTime: false)
        let pipeline = try CapturePipeline(source: source, encoder: encoder, configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(100)), log: log)
        let description = StreamDescription(
            format: encoder.outputFormat, magicCookie: encoder.magicCookie, primingFrames: encoder.primingFrames,
            startTime: Date(timeIntervalSince1970: 1_767_225_600))
        let streamID = UUID()
        let sender = StreamSender(
            configuration: SenderConfiguration(host: "127.0.0.1", port: try XCTUnwrap(server.localAddress.port), streamName: name, streamID: streamID),
            description: description, log: log, logger: logger)
        try pipeline.start()
        Thread.detachNewThread { _ = pipeline.waitAndFinish() }
        guard case .success = await sender.run() else { return XCTFail("the stream was not delivered") }

        let row = try XCTUnwrap(server.directory.snapshot(of: streamID))
        XCTAssertEqual(row.name, name)
        XCTAssertEqual(row.state, .finished)
        XCTAssertEqual(row.started, Date(timeIntervalSince1970: 1_767_225_600))
        XCTAssertGreaterThanOrEqual(row.secondsOnDisk, 2)
        XCTAssertEqual(row.secondsAcknowledged, row.secondsOnDisk)
        XCTAssertTrue(FileManager.default.fileExists(atPath: output.appendingPathComponent(row.file).path), row.file)
        XCTAssertFalse(row.file.hasPrefix("/"), "relative to --out")
        let levels = try XCTUnwrap(row.levels, "the sender's levels reach the directory")
        // An Opus stream's last AudioData (the encoder's flushed tail) has no newly captured audio
        // and so no levels: the latest shown are still the tone's.
        for channel in 0..<2 {
            XCTAssertEqual(levels.peakDBFS[channel], -12, accuracy: 0.5)
            XCTAssertEqual(levels.rmsDBFS[channel], -15.01, accuracy: 0.5)
        }

        var names: [String] = []
        var levelsSeen: [StreamLevelsUpdate] = []
        for try await event in events {
            names.append(event.name)
            if case .levels(let update) = event { levelsSeen.append(update) }
            if event.name == "closed" { break }
        }
        XCTAssertEqual(names.first, "opened")
        XCTAssertEqual(names.last, "closed")
        XCTAssertFalse(levelsSeen.isEmpty, "levels events")
        for update in levelsSeen {
            XCTAssertEqual(update.levels.rmsDBFS[0], -15.01, accuracy: 0.5)
        }
    }

    func testAPCMToneReadsItsLevelsInTheDirectory() async throws {
        try await stream(encoder: { try PCMEncoder(inputFormat: $0) }, name: "pcm-tone")
    }

    func testAnOpusToneReadsTheSameLevelsInTheDirectory() async throws {
        try await stream(encoder: { try OpusEncoder(inputFormat: $0) }, name: "opus-tone")
    }
}
