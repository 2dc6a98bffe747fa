@testable import CaptureReceiver
import CaptureCore
import Foundation
import XCTest

/// The directory's `marker` event: a marker recorded in a stream reaches the event feed (SSE) with
/// its time and label, once per connection that records it; a stale connection reports nothing.
final class StreamMarkerEventTests: XCTestCase {
    private static let id = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()

    private func opening(resumed: Bool = false) -> StreamOpening {
        StreamOpening(
            id: Self.id, name: "field-a", peer: "127.0.0.1:40000", format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16),
            started: Date(timeIntervalSince1970: 1_767_225_600), startSampleTime: 0, file: "field-a.caf", resumed: resumed, durableSampleTime: 0)
    }

    func testAMarkerIsPublishedWithItsTimeAndLabel() async throws {
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60), finishedRetention: .seconds(600), maximumFinished: 10, subscriberBufferLimit: 64))
        let events = directory.events()
        let first = directory.streamOpened(opening())
        first.markerRecorded(sampleTime: 72_000, label: "interview starts")
        first.connectionEnded(resumable: true)
        let second = directory.streamOpened(opening(resumed: true))
        first.markerRecorded(sampleTime: 96_000, label: "late report from the old connection")
        second.markerRecorded(sampleTime: 96_000, label: "")
        var iterator = events.makeAsyncIterator()
        var received: [StreamEvent] = []
        while received.count < 5, let event = try await iterator.next() { received.append(event) }
        XCTAssertEqual(received.map(\.name), ["opened", "marker", "closed", "resumed", "marker"])
        XCTAssertEqual(received[1], .marker(StreamMarker(id: Self.id, atSeconds: 1.5, label: "interview starts")))
        XCTAssertEqual(received[4], .marker(StreamMarker(id: Self.id, atSeconds: 2, label: "")))
        XCTAssertEqual(received[1].streamID, Self.id)
        XCTAssertEqual(
            String(decoding: try received[1].encodedPayload(), as: UTF8.self),
            #"{"at_seconds":1.5,"id":"6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b","label":"interview starts"}"#)
    }
}
