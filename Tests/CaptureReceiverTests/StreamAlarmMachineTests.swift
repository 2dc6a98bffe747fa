import CaptureCore
@testable import CaptureReceiver
import CaptureWire
import Foundation
import XCTest

/// The alarm machine as tables: events at given seconds in, the alarms raised and cleared out.
final class StreamAlarmMachineTests: XCTestCase {
    private let start = Date(timeIntervalSince1970: 1_800_000_000)

    private func levels(peak: Double, shortTerm: Double? = nil) -> AudioLevels {
        let linear = pow(10, peak / 20)
        return AudioLevels(
            linearPeaks: [linear, linear], linearRMS: [linear / 2, linear / 2],
            loudness: shortTerm.map { Loudness(momentaryLUFS: $0, shortTermLUFS: $0, truePeakDBTP: [peak, peak]) })
    }

    /// Runs `events` (seconds after the start, event) and returns each transition as
    /// "SECONDS KIND raised|cleared".
    private func run(_ events: [(Double, StreamAlarmMachine.Event)], conditions: StreamAlarmConditions = .init()) -> [String] {
        var machine = StreamAlarmMachine(conditions: conditions, startedAt: start)
        var out: [String] = []
        for (seconds, event) in events {
            for transition in machine.handle(event, at: start.addingTimeInterval(seconds)) {
                out.append("\(Self.format(seconds)) \(transition.kind.rawValue) \(transition.change.rawValue)")
            }
        }
        return out
    }

    private static func format(_ seconds: Double) -> String { String(format: "%g", seconds) }

    /// AudioData every half second from `from` to `to` (exclusive), all at `peak`.
    private func audio(from: Double, to: Double, peak: Double, shortTerm: Double? = nil) -> [(Double, StreamAlarmMachine.Event)] {
        stride(from: from, to: to, by: 0.5).map { ($0, .audio(levels: levels(peak: peak, shortTerm: shortTerm))) }
    }

    func testSilenceRaisesAfterItsDurationAndClearsPastTheHysteresis() {
        let events = audio(from: 0, to: 5, peak: -20) + audio(from: 5, to: 20, peak: -90) + audio(from: 20, to: 25, peak: -20)
        XCTAssertEqual(run(events), ["15 silence raised", "22 silence cleared"], "10 s of silence from 5 s; 2 s of sound from 20 s")
    }

    func testSilenceBrokenByOneLoudBufferStartsAgain() {
        let events = audio(from: 0, to: 8, peak: -90) + [(8, .audio(levels: levels(peak: -30)))] + audio(from: 8.5, to: 20, peak: -90)
        XCTAssertEqual(run(events), ["18.5 silence raised"])
    }

    func testALevelHoveringAtTheThresholdDoesNotFlap() {
        // Raised after 10 s below -60; then between -61 and -58 (inside the 3 dB hysteresis): stays raised.
        var events = audio(from: 0, to: 10.5, peak: -70)
        for (index, seconds) in stride(from: 10.5, to: 40, by: 0.5).enumerated() {
            events.append((seconds, .audio(levels: levels(peak: index % 2 == 0 ? -58.5 : -61))))
        }
        XCTAssertEqual(run(events), ["10 silence raised"])
    }

    func testClippingRaisesOnMoreThanNBuffersInTheWindowAndClearsWhenTheWindowIsClean() {
        var events = audio(from: 0, to: 2, peak: 0) // 4 clipped buffers at 0, 0.5, 1, 1.5
        events += audio(from: 2, to: 12, peak: -6)
        events += stride(from: 12, to: 14, by: 1.0).map { ($0, StreamAlarmMachine.Event.tick) }
        XCTAssertEqual(run(events), ["1.5 clipping raised", "11.5 clipping cleared"])
        XCTAssertEqual(run(audio(from: 0, to: 1.5, peak: 0) + audio(from: 1.5, to: 12, peak: -6)), [], "3 clipped buffers are allowed")
    }

    func testLoudnessOutsideItsRangeRaisesAndClearsInsideTheHysteresis() {
        let events = audio(from: 0, to: 5, peak: -10, shortTerm: -20) + audio(from: 5, to: 17, peak: -1, shortTerm: -3)
            + audio(from: 17, to: 19, peak: -10, shortTerm: -6.5) + audio(from: 19, to: 23, peak: -10, shortTerm: -20)
        // Too loud from 5 s: raised at 15; -6.5 LUFS is inside the range but within 3 LU of it: kept; cleared 2 s after 19.
        XCTAssertEqual(run(events), ["15 loudness raised", "21 loudness cleared"])
        XCTAssertEqual(run(audio(from: 0, to: 30, peak: -10)), [], "no loudness measured, no loudness alarm")
    }

    func testLinkDownRaisesAfterItsDurationAndClearsOnReconnect() {
        let events: [(Double, StreamAlarmMachine.Event)] = [(1, .connection(.reconnecting))]
            + stride(from: 2, to: 33, by: 1.0).map { ($0, .tick) }
            + [(40, .connection(.live)), (41, .audio(levels: nil))]
        XCTAssertEqual(run(events), ["31 link-down raised", "40 link-down cleared"])
    }

    func testNoAudioWhileConnected() {
        let events: [(Double, StreamAlarmMachine.Event)] = [(1, .audio(levels: nil))] + stride(from: 2, to: 13, by: 1.0).map { ($0, .tick) }
            + [(13.5, .audio(levels: nil))]
        XCTAssertEqual(run(events), ["11 no-audio raised", "13.5 no-audio cleared"])
        XCTAssertEqual(run([(1, .connection(.reconnecting))] + stride(from: 2, to: 20, by: 1.0).map { ($0, .tick) }), [], "not while reconnecting")
    }

    func testFinishingClearsEverythingRaised() {
        var events = audio(from: 0, to: 11, peak: -90)
        events.append((11, .connection(.reconnecting)))
        events += stride(from: 12, to: 42, by: 1.0).map { ($0, .tick) }
        events.append((42, .connection(.finished)))
        XCTAssertEqual(run(events), ["10 silence raised", "41 link-down raised", "42 silence cleared", "42 link-down cleared"])
    }

    func testConditionsAreSettable() {
        var conditions = StreamAlarmConditions()
        conditions.silenceBelowDBFS = -40
        conditions.silenceDuration = .seconds(2)
        conditions.clearDuration = .milliseconds(500)
        XCTAssertEqual(run(audio(from: 0, to: 3, peak: -50) + audio(from: 3, to: 4, peak: -30), conditions: conditions), ["2 silence raised", "3.5 silence cleared"])
    }

    /// Durations that are not whole seconds, as an override gives them: raised after exactly their
    /// time of table events, and the details say them with one decimal.
    func testFractionalDurationsRaiseAfterExactlyTheirTime() {
        var conditions = StreamAlarmConditions()
        conditions.silenceDuration = .milliseconds(500)
        conditions.noAudioDuration = .milliseconds(1_500)
        conditions.linkDownDuration = .milliseconds(2_500)
        XCTAssertEqual(run(audio(from: 0, to: 1, peak: -90), conditions: conditions), ["0.5 silence raised"])
        let quiet: [(Double, StreamAlarmMachine.Event)] = stride(from: 0.5, to: 2.5, by: 0.5).map { ($0, .tick) }
        XCTAssertEqual(run(quiet, conditions: conditions), ["1.5 no-audio raised"])
        let down: [(Double, StreamAlarmMachine.Event)] = [(1, .connection(.reconnecting))] + stride(from: 1.5, to: 5, by: 0.5).map { ($0, .tick) }
        XCTAssertEqual(run(down, conditions: conditions), ["3.5 link-down raised"])

        var machine = StreamAlarmMachine(conditions: conditions, startedAt: start)
        var details: [String] = []
        for (seconds, event) in audio(from: 0, to: 1, peak: -90) + [(1.5, .connection(.reconnecting)), (4, .tick)] {
            details += machine.handle(event, at: start.addingTimeInterval(seconds)).filter { $0.change == .raised }.map(\.detail)
        }
        XCTAssertEqual(details, [
            "every channel below -60.0 dBFS for 0.5 s (loudest peak -90.0 dBFS)", "reconnecting for more than 2.5 s",
        ])
    }

    func testRaisedAlarmsAreListedAndCarryWhatTheDeskReads() {
        var machine = StreamAlarmMachine(conditions: .init(), startedAt: start)
        var transitions: [StreamAlarmTransition] = []
        for seconds in stride(from: 0.0, to: 11, by: 0.5) {
            transitions += machine.handle(.audio(levels: levels(peak: -75)), at: start.addingTimeInterval(seconds))
        }
        XCTAssertEqual(machine.raised, [.silence])
        XCTAssertEqual(transitions, [StreamAlarmTransition(
            kind: .silence, change: .raised, since: start, detail: "every channel below -60.0 dBFS for 10 s (loudest peak -75.0 dBFS)")])
    }

    /// Alarms raised before a restart, given back when the stream resumes: each is raised again at
    /// once, and clears as its own condition says (link down at once: the stream is connected).
    func testRestoredAlarmsAreRaisedAgainAndClearAsUsual() {
        var machine = StreamAlarmMachine(conditions: .init(), startedAt: start)
        let restored = machine.restore([.noAudio, .silence, .linkDown, .clipping, .loudness], at: start)
        XCTAssertEqual(restored.map { "\($0.kind.rawValue) \($0.change.rawValue)" }, [
            "silence raised", "clipping raised", "loudness raised", "link-down raised", "link-down cleared", "no-audio raised",
        ])
        XCTAssertTrue(restored.allSatisfy { $0.change == .cleared || $0.detail == "raised before the receiver restarted, not cleared since" })
        XCTAssertEqual(machine.raised, [.silence, .clipping, .loudness, .noAudio])
        XCTAssertEqual(machine.restore([.silence], at: start), [], "an alarm already raised is not raised twice")
        var out: [String] = []
        for (seconds, event) in audio(from: 0.5, to: 12, peak: -20, shortTerm: -20) {
            for transition in machine.handle(event, at: start.addingTimeInterval(seconds)) {
                out.append("\(Self.format(seconds)) \(transition.kind.rawValue) \(transition.change.rawValue)")
            }
        }
        XCTAssertEqual(out, [
            "0.5 no-audio cleared", "2.5 silence cleared", "2.5 loudness cleared", "10 clipping cleared",
        ], "audio clears no audio; 2 s of sound and of loudness in range clear theirs; a clipping window without a clip clears clipping")
        var finished = StreamAlarmMachine(conditions: .init(), startedAt: start)
        _ = finished.handle(.connection(.finished), at: start)
        XCTAssertEqual(finished.restore([.silence], at: start), [], "a finished stream takes nothing back")
    }
}
