import CaptureCore
import CaptureWire
import Foundation
import XCTest

/// Filled gaps in the receiver's protocol machine (PROTOCOL.md §6.11): each row a FilledGap after
/// AudioData 1 (frames 0..<4), and what the machine must do with it. A filled gap labels frames the
/// audio carries as encoded silence: it takes a sequence, starts at or before where the timeline
/// stands, and never moves it.
final class FilledGapStateTests: XCTestCase {
    private enum Outcome: Equatable {
        case action(ReceiverAction)
        case error(WireError)
    }

    private func filled(_ sequence: UInt64, at sampleTime: Int64, _ length: UInt64) -> Capture_V1_FilledGap {
        WireFixtures.filledGap(sequence: sequence, sampleTime: sampleTime, length: length)
    }

    /// 10 s after the stream's start on the receiver's clock.
    private let tenSecondsIn = WireFixtures.startUnixNs + 10_000_000_000

    func testEachFilledGapRow() throws {
        let anHourAndTenSeconds = UInt64(48_000 * (3_600 + 10))
        let rows: [(message: Capture_V1_FilledGap, outcome: Outcome, line: UInt)] = [
            // Where the timeline stands, over audio that follows.
            (filled(2, at: 4, 10), .action(.recordFilledGap(filled(2, at: 4, 10))), #line),
            // Over audio already received, and running on past it.
            (filled(2, at: 0, 4), .action(.recordFilledGap(filled(2, at: 0, 4))), #line),
            (filled(2, at: 2, 100), .action(.recordFilledGap(filled(2, at: 2, 100))), #line),
            // As long as the time that passed allows (an hour's margin for the clock).
            (filled(2, at: 4, anHourAndTenSeconds - 4), .action(.recordFilledGap(filled(2, at: 4, anHourAndTenSeconds - 4))), #line),
            (filled(2, at: 4, anHourAndTenSeconds), .error(.invalidField(
                message: .filledGap, field: "length_frames",
                reason: "a gap of \(anHourAndTenSeconds) frames would take the stream to 3610 s after its start, but only 10 s have passed since its start time; a gap cannot be longer than the time that passed (3600 s allowed for a clock running ahead)")), #line),
            // A resend: ignored, the Ack goes again.
            (filled(1, at: 0, 4), .action(.ignoreDuplicate(sequence: 1)), #line),
            (filled(3, at: 4, 4), .error(.sequenceGap(expected: 2, received: 3)), #line),
            (filled(2, at: 5, 1), .error(.invalidField(
                message: .filledGap, field: "sample_time",
                reason: "sequence 2 labels frames from 5 on, but the audio received ends at 4: a filled gap labels audio already sent")), #line),
            (filled(2, at: -1, 2), .error(.invalidField(
                message: .filledGap, field: "sample_time", reason: "sequence 2 labels frames from -1 on, before the stream's start (0)")), #line),
            (filled(2, at: 4, 0), .error(.invalidField(message: .filledGap, field: "length_frames", reason: "a gap covers at least one frame")), #line),
            (filled(0, at: 4, 1), .error(.invalidField(message: .filledGap, field: "sequence", reason: "sequences start at 1")), #line),
        ]
        for row in rows {
            var state = try WireFixtures.streamingAfterFirstAudio()
            let outcome: Outcome
            do {
                outcome = .action(try state.receive(.filledGap(row.message), atUnixNanoseconds: tenSecondsIn))
            } catch {
                outcome = .error(error)
            }
            XCTAssertEqual(outcome, row.outcome, line: row.line)
            if case .action(let action) = outcome {
                let took = if case .recordFilledGap = action { true } else { false }
                XCTAssertEqual(state.nextSequence, took ? 3 : 2, line: row.line)
                XCTAssertEqual(state.nextSampleTime, 4, "a filled gap never moves the timeline", line: row.line)
            } else {
                XCTAssertEqual(state.phase, .closed, "an error ends the connection", line: row.line)
            }
        }
    }

    /// Audio, markers and the end follow a filled gap where the timeline stood before it.
    func testAudioAndTheEndFollowAFilledGapWhereTheTimelineStood() throws {
        var state = try WireFixtures.streamingAfterFirstAudio()
        XCTAssertEqual(try state.receive(.filledGap(filled(2, at: 3, 5))), .recordFilledGap(filled(2, at: 3, 5)))
        XCTAssertEqual(try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 3, firstSampleTime: 4))),
                       .writeAudio(WireFixtures.pcmAudio(sequence: 3, firstSampleTime: 4)))
        XCTAssertEqual(try state.receive(.filledGap(filled(4, at: 8, 1))), .recordFilledGap(filled(4, at: 8, 1)))
        var end = Capture_V1_EndOfStream()
        end.lastSequence = 4
        end.endSampleTime = 8
        XCTAssertEqual(try state.receive(.endOfStream(end)), .finishStream(end))
    }
}
