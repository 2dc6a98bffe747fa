import CaptureCore
import CaptureWire
import Foundation
import XCTest

/// Markers in the receiver's protocol machine (PROTOCOL.md §6.10): each row a message after
/// AudioData 1 (frames 0..<4) and what the machine must do with it.
final class MarkerStateTests: XCTestCase {
    private enum Outcome: Equatable {
        case action(ReceiverAction)
        case error(WireError)
    }

    private func marker(_ sequence: UInt64, at sampleTime: Int64, _ label: String = "") -> Capture_V1_Marker {
        WireFixtures.marker(sequence: sequence, sampleTime: sampleTime, label: label)
    }

    func testEachMarkerRow() throws {
        let longest = String(repeating: "é", count: 127) + "x"  // 255 bytes
        let tooLong = longest + "y"
        let rows: [(message: Capture_V1_Marker, outcome: Outcome, nextSequence: UInt64, nextSampleTime: Int64, line: UInt)] = [
            (marker(2, at: 4, "goal"), .action(.recordMarker(marker(2, at: 4, "goal"))), 3, 4, #line),
            (marker(2, at: 4), .action(.recordMarker(marker(2, at: 4))), 3, 4, #line),
            (marker(2, at: 4, longest), .action(.recordMarker(marker(2, at: 4, longest))), 3, 4, #line),
            // A resend of what was received: ignored, the Ack goes again.
            (marker(1, at: 0, "late"), .action(.ignoreDuplicate(sequence: 1)), 2, 4, #line),
            (marker(3, at: 4), .error(.sequenceGap(expected: 2, received: 3)), 2, 4, #line),
            (marker(2, at: 3), .error(.sampleTimeMismatch(sequence: 2, expected: 4, received: 3)), 2, 4, #line),
            (marker(2, at: 5), .error(.sampleTimeMismatch(sequence: 2, expected: 4, received: 5)), 2, 4, #line),
            (marker(2, at: 4, tooLong), .error(.invalidField(
                message: .marker, field: "label", reason: "sequence 2's label has 256 bytes; at most 255 are allowed")), 2, 4, #line),
            (marker(2, at: 4, "a\u{0}b"), .error(.invalidField(
                message: .marker, field: "label", reason: "sequence 2's label contains a NUL character")), 2, 4, #line),
            (marker(0, at: 4), .error(.invalidField(message: .marker, field: "sequence", reason: "sequences start at 1")), 2, 4, #line),
        ]
        for row in rows {
            var state = try WireFixtures.streamingAfterFirstAudio()
            let outcome: Outcome
            do {
                outcome = .action(try state.receive(.marker(row.message)))
            } catch {
                outcome = .error(error)
            }
            XCTAssertEqual(outcome, row.outcome, line: row.line)
            if case .action = outcome {
                XCTAssertEqual(state.nextSequence, row.nextSequence, line: row.line)
                XCTAssertEqual(state.nextSampleTime, row.nextSampleTime, line: row.line)
            } else {
                XCTAssertEqual(state.phase, .closed, "an error ends the connection", line: row.line)
            }
        }
    }

    /// A marker takes a sequence and no frames: audio and the end follow it at the same sample.
    func testAMarkerTakesASequenceAndNoFrames() throws {
        var state = try WireFixtures.streamingAfterFirstAudio()
        XCTAssertEqual(try state.receive(.marker(marker(2, at: 4, "a"))), .recordMarker(marker(2, at: 4, "a")))
        XCTAssertEqual(try state.receive(.marker(marker(3, at: 4, "b"))), .recordMarker(marker(3, at: 4, "b")))
        XCTAssertEqual(try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 4, firstSampleTime: 4))),
                       .writeAudio(WireFixtures.pcmAudio(sequence: 4, firstSampleTime: 4)))
        XCTAssertEqual(try state.receive(.marker(marker(5, at: 8))), .recordMarker(marker(5, at: 8)))
        var end = Capture_V1_EndOfStream()
        end.lastSequence = 5
        end.endSampleTime = 8
        XCTAssertEqual(try state.receive(.endOfStream(end)), .finishStream(end))
    }

    /// Before HelloAccepted a marker is out of order, like audio.
    func testAMarkerBeforeTheStreamIsAcceptedIsUnexpected() throws {
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        _ = try state.receive(.hello(WireFixtures.hello()))
        XCTAssertThrowsError(try state.receive(.marker(marker(1, at: 0)))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage)
        }
    }
}
