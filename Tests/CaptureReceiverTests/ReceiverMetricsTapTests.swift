import CaptureConsole
import CaptureMetrics
@testable import CaptureReceiver
import CaptureWire
import Foundation
import NIOCore
import NIOEmbedded
import XCTest

/// The metrics tap between the frame codec and the session: what it counts, and its ack latency
/// sample (the first audio message after an Ack, timed until an Ack covers it).
final class ReceiverMetricsTapTests: XCTestCase {
    private func audio(_ sequence: UInt64) -> WireMessage {
        .audioData(.with {
            $0.sequence = sequence
            $0.firstSampleTime = Int64(sequence - 1) * 480
            $0.packetCount = 480
            $0.frameCount = 480
        })
    }

    private func ack(_ sequence: UInt64) -> WireMessage {
        .ack(.with {
            $0.durableSequence = sequence
            $0.durableSampleTime = Int64(sequence) * 480
        })
    }

    private func lines(_ metrics: ReceiverMetrics) -> Set<String> {
        Set(metrics.exposition().split(separator: "\n").map(String.init))
    }

    func testAckLatencyIsSampledOncePerAckFromTheFirstAudioItCovers() throws {
        let metrics = ReceiverMetrics()
        let channel = EmbeddedChannel(handler: ReceiverMetricsTap(metrics: metrics))
        defer { _ = try? channel.finish() }

        try channel.writeInbound(audio(1))
        try channel.writeInbound(audio(2))
        Thread.sleep(forTimeInterval: 0.03)
        try channel.writeOutbound(ack(1))
        XCTAssertTrue(lines(metrics).contains("capture_ack_latency_seconds_count 1"), metrics.exposition())
        XCTAssertTrue(lines(metrics).contains(#"capture_ack_latency_seconds_bucket{le="0.025"} 0"#), "timed from the audio's arrival: \(metrics.exposition())")
        XCTAssertTrue(lines(metrics).contains(#"capture_ack_latency_seconds_bucket{le="10.0"} 1"#), metrics.exposition())

        // Audio 2 arrived before that Ack without being covered by it: not a sample.
        try channel.writeOutbound(ack(2))
        XCTAssertTrue(lines(metrics).contains("capture_ack_latency_seconds_count 1"), metrics.exposition())

        // Audio 3 is the first after the Ack; an Ack that does not reach it is no sample either.
        try channel.writeInbound(audio(3))
        try channel.writeInbound(audio(4))
        try channel.writeOutbound(ack(2))
        XCTAssertTrue(lines(metrics).contains("capture_ack_latency_seconds_count 1"), metrics.exposition())
        try channel.writeOutbound(ack(4))
        XCTAssertTrue(lines(metrics).contains("capture_ack_latency_seconds_count 2"), metrics.exposition())
        XCTAssertTrue(lines(metrics).contains("capture_acks_sent_total 4"), metrics.exposition())
        XCTAssertTrue(lines(metrics).contains("capture_received_packets_total 1920"), metrics.exposition())

        // What passes the tap is unchanged.
        XCTAssertEqual(try channel.readInbound(as: WireMessage.self).map(\.type), .audioData)
        XCTAssertEqual(try channel.readOutbound(as: WireMessage.self).map(\.type), .ack)
    }
}
