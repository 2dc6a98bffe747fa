@testable import CaptureReceiver
import CaptureCore
import CaptureWire
import Foundation
import XCTest

/// The stream directory as a table: what connections report in, what snapshots and the event feed
/// give out, and how it stays bounded (finished streams leave, slow subscribers are dropped).
final class StreamDirectoryTests: XCTestCase {
    /// A clock the test moves.
    final class TestClock: @unchecked Sendable {
        private let lock = NSLock()
        private var time = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
        var now: Date { lock.withLock { time } }
        func advance(_ seconds: TimeInterval) { lock.withLock { time += seconds } }
    }

    static let id = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()
    static let otherID = UUID(uuidString: "00000000-0000-4000-8000-000000000001") ?? UUID()
    static let stereo = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)

    private let clock = TestClock()

    private func directory(resumeWindow: Duration = .seconds(60), retention: Duration = .seconds(600), maximumFinished: Int = 1_000, bufferLimit: Int = 4_096) -> StreamDirectory {
        let clock = self.clock
        return StreamDirectory(
            settings: .init(resumeWindow: resumeWindow, finishedRetention: retention, maximumFinished: maximumFinished, subscriberBufferLimit: bufferLimit),
            now: { clock.now })
    }

    private func opening(_ id: UUID = id, name: String = "studio-a", resumed: Bool = false, durable: Int64 = 0) -> StreamOpening {
        StreamOpening(
            id: id, name: name, peer: "127.0.0.1:40000", format: Self.stereo, started: Date(timeIntervalSince1970: 1_767_225_600),
            startSampleTime: 0, file: "studio-a/20260101T000000Z-studio-a.caf", resumed: resumed, durableSampleTime: durable)
    }

    private func levels(peak: [UInt32], rms: [UInt32]) throws -> AudioLevels {
        var audio = Capture_V1_AudioData()
        audio.levels = .with {
            $0.peak = peak
            $0.rms = rms
        }
        guard case .valid(let levels) = AudioLevels.check(audio, channelCount: peak.count) else { throw XCTSkip("invalid test levels") }
        return levels
    }

    /// The events the subscriber has now, without waiting for more.
    private func drain(_ events: AsyncThrowingStream<StreamEvent, any Error>, count: Int) async throws -> [StreamEvent] {
        var iterator = events.makeAsyncIterator()
        var received: [StreamEvent] = []
        while received.count < count, let event = try await iterator.next() { received.append(event) }
        return received
    }

    /// A stream's timeline: each connection, gap, marker, pause, alarm and end, in order, with the
    /// stream time of gaps, markers and pauses; its JSON; and its bound.
    func testTheTimelineListsConnectionsGapsMarkersPausesAlarmsAndTheEnd() throws {
        let clock = self.clock
        var conditions = StreamAlarmConditions()
        conditions.noAudioDuration = .seconds(5)
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60), alarms: StreamAlarmPolicy(conditions: conditions)), now: { clock.now })
        let first = directory.streamOpened(opening())
        clock.advance(1)
        first.gapRecorded(sampleTime: 48_000, lengthFrames: 24_000, reason: "overrun")
        first.markerRecorded(sampleTime: 72_000, label: "intro")
        first.gapRecorded(sampleTime: 96_000, lengthFrames: 96_000, reason: "paused")
        first.markerRecorded(sampleTime: 192_000, label: "")
        first.connectionEnded(resumable: true)
        clock.advance(1)
        let second = directory.streamOpened(opening(resumed: true))
        clock.advance(6)
        directory.sweep()
        second.audioReceived(endSampleTime: 240_000, levels: nil)
        second.connectionEnded(resumable: false)
        let timeline = try XCTUnwrap(directory.timeline(of: Self.id))
        XCTAssertEqual(timeline.entries.map(\.kind), [.opened, .gap, .marker, .pause, .marker, .reconnecting, .resumed, .alarmRaised, .alarmCleared, .finished])
        XCTAssertEqual(timeline.entries.map(\.detail), [
            "from 127.0.0.1:40000 into studio-a/20260101T000000Z-studio-a.caf", "0.500 s, overrun", "intro", "2.000 s", "marker",
            "the connection was lost; the file waits for the sender to resume it",
            "resumed from 127.0.0.1:40000 into studio-a/20260101T000000Z-studio-a.caf",
            "no-audio: connected, no audio for 5 s", "no-audio: audio arrives again", "the stream ended",
        ])
        XCTAssertEqual(timeline.entries.map(\.streamSeconds), [nil, 1, 1.5, 2, 4, nil, nil, nil, nil, nil])
        XCTAssertEqual(timeline.dropped, 0)
        XCTAssertNil(directory.timeline(of: Self.otherID))
        let json = String(decoding: try StreamEvent.encoder.encode(timeline), as: UTF8.self)
        XCTAssertTrue(json.hasPrefix(#"{"dropped":0,"entries":[{"at":"2026-01-01T00:00:00.000Z","detail":"from 127.0.0.1:40000 into studio-a/20260101T000000Z-studio-a.caf","kind":"opened","stream_seconds":null},{"at":"2026-01-01T00:00:01.000Z","detail":"0.500 s, overrun","kind":"gap","stream_seconds":1}"#), json)
        XCTAssertTrue(json.hasSuffix(#""id":"6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b"}"#), json)

        // A unit that reconnects all day keeps its latest entries and says how many it let go.
        var bounded = StreamTimeline()
        for second in 0..<1_000 { bounded.append(StreamTimelineEntry(at: Date(timeIntervalSince1970: Double(second)), kind: .gap, detail: "\(second)")) }
        XCTAssertLessThanOrEqual(bounded.entries.count, StreamTimeline.limit)
        XCTAssertEqual(bounded.entries.last?.detail, "999")
        XCTAssertEqual(bounded.dropped + bounded.entries.count, 1_000)
    }

    func testAReportedStreamReadsBackAsItsRow() throws {
        let directory = directory()
        let recorder = directory.streamOpened(opening())
        clock.advance(2)
        recorder.audioReceived(endSampleTime: 48_000, levels: try levels(peak: [1200, 600], rms: [1501, 903]))
        recorder.positionsChanged(durableSampleTime: 24_000, acknowledgedSampleTime: 24_000)
        recorder.positionsChanged(durableSampleTime: 36_000, acknowledgedSampleTime: nil)
        recorder.gapRecorded(sampleTime: 48_000, lengthFrames: 4_800, reason: "overrun")
        XCTAssertEqual(directory.snapshot(), [StreamSnapshot(
            id: Self.id, name: "studio-a", peer: "127.0.0.1:40000", format: "s16 48000 Hz 2 ch", state: .live,
            started: Date(timeIntervalSince1970: 1_767_225_600), secondsOnDisk: 0.75, secondsAcknowledged: 0.5,
            lastAudioReceived: Date(timeIntervalSince1970: 1_767_225_602), gapCount: 1, gapSeconds: 0.1,
            file: "studio-a/20260101T000000Z-studio-a.caf", levels: StreamLevels(peakDBFS: [-12, -6], rmsDBFS: [-15.01, -9.03]))])
    }

    func testTheRowEncodesToTheDocumentedJSON() throws {
        let directory = directory()
        let recorder = directory.streamOpened(opening())
        recorder.audioReceived(endSampleTime: 48_000, levels: try levels(peak: [1200, 12_000], rms: [1501, 12_000]))
        let json = String(decoding: try StreamEvent.encoder.encode(directory.snapshot()), as: UTF8.self)
        XCTAssertEqual(json, """
            [{"alarms":[],"capture_id":null,"encoding":null,"file":"studio-a/20260101T000000Z-studio-a.caf","format":"s16 48000 Hz 2 ch","gap_count":0,"gap_seconds":0,\
            "id":"6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b","last_audio_received":"2026-01-01T00:00:00.000Z",\
            "levels":{"peak_dbfs":[-12,-120],"rms_dbfs":[-15.01,-120]},"name":"studio-a","peer":"127.0.0.1:40000",\
            "seconds_acknowledged":0,"seconds_on_disk":0,"started":"2026-01-01T00:00:00.000Z","state":"live"}]
            """)
        let decoded = try JSONDecoder().decode([StreamSnapshot].self, from: Data(json.utf8))
        XCTAssertEqual(decoded, directory.snapshot())
    }

    func testAStreamFromAnOlderSenderHasNoLevels() throws {
        let directory = directory()
        let recorder = directory.streamOpened(opening())
        recorder.audioReceived(endSampleTime: 4_800, levels: nil)
        let row = try XCTUnwrap(directory.snapshot(of: Self.id))
        XCTAssertNil(row.levels)
        XCTAssertNotNil(row.lastAudioReceived)
        let json = String(decoding: try StreamEvent.encoder.encode(row), as: UTF8.self)
        XCTAssertTrue(json.contains("\"levels\":null"), json)
    }

    func testALostConnectionReconnectsThenResumesThenFinishes() async throws {
        let directory = directory(resumeWindow: .seconds(60))
        let events = directory.events()
        let first = directory.streamOpened(opening())
        first.gapRecorded(sampleTime: 0, lengthFrames: 480, reason: "overrun")
        first.connectionEnded(resumable: true)
        XCTAssertEqual(directory.snapshot(of: Self.id)?.state, .reconnecting)
        let second = directory.streamOpened(opening(resumed: true, durable: 96_000))
        first.gapRecorded(sampleTime: 0, lengthFrames: 480, reason: "late report from the old connection")
        XCTAssertEqual(directory.snapshot(of: Self.id)?.state, .live)
        XCTAssertEqual(directory.snapshot(of: Self.id)?.gapCount, 1, "gaps count across connections; a stale connection changes nothing")
        XCTAssertEqual(directory.snapshot(of: Self.id)?.secondsOnDisk, 2)
        second.connectionEnded(resumable: false)
        let received = try await drain(events, count: 5)
        XCTAssertEqual(received.map(\.name), ["opened", "gap", "closed", "resumed", "closed"])
        guard case .closed(let lost) = received[2], case .closed(let done) = received[4], case .gap(let gap) = received[1] else {
            return XCTFail("\(received)")
        }
        XCTAssertEqual(lost.state, .reconnecting)
        XCTAssertEqual(done.state, .finished)
        XCTAssertEqual(gap, StreamGap(id: Self.id, atSeconds: 0, seconds: 0.01, reason: "overrun", gapCount: 1))
    }

    func testAReconnectingStreamFinishesWhenItsResumeWindowPasses() async throws {
        let directory = directory(resumeWindow: .seconds(60))
        let recorder = directory.streamOpened(opening())
        recorder.connectionEnded(resumable: true)
        let events = directory.events()
        clock.advance(59)
        directory.sweep()
        XCTAssertEqual(directory.snapshot(of: Self.id)?.state, .reconnecting)
        clock.advance(2)
        directory.sweep()
        XCTAssertEqual(directory.snapshot(of: Self.id)?.state, .finished)
        // Reconnecting for more than 30 s raised the link-down alarm; finishing cleared it.
        let received = try await drain(events, count: 3)
        XCTAssertEqual(received.map(\.name), ["alarm", "closed", "alarm"])
        guard case .alarm(let raised) = received[0], case .closed(let row) = received[1], case .alarm(let cleared) = received[2] else {
            return XCTFail("\(received)")
        }
        XCTAssertEqual(row.state, .finished)
        XCTAssertEqual(row.alarms, [.linkDown], "the row closed with the alarm still raised")
        XCTAssertEqual([raised.kind, cleared.kind], [.linkDown, .linkDown])
        XCTAssertEqual([raised.change, cleared.change], [.raised, .cleared])
        XCTAssertEqual(raised.since, Date(timeIntervalSince1970: 1_767_225_600), "since the connection ended")
        XCTAssertEqual(cleared.raised, [])
        XCTAssertEqual(directory.snapshot(of: Self.id)?.alarms, [])
    }

    func testSilenceRaisesAndClearsAnAlarmEventOnTheFeedAndTheObserver() async throws {
        let heard = AlarmLog()
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60)), now: { [clock = self.clock] in clock.now }, alarmObserver: { heard.append($0) })
        let recorder = directory.streamOpened(opening())
        let events = directory.events()
        for step in 0..<34 {
            clock.advance(0.5)
            // 1 s of tone, 12 s of silence, then 3.5 s of tone: cleared 2 s into it.
            let peak: UInt32 = step < 2 || step >= 26 ? 1_200 : 12_000
            recorder.audioReceived(endSampleTime: Int64(step + 1) * 24_000, levels: try levels(peak: [peak, peak], rms: [peak, peak]))
            if step == 24 { XCTAssertEqual(directory.snapshot(of: Self.id)?.alarms, [.silence]) }
        }
        // 34 levels events and the two alarms, in the order they happened.
        let all = try await drain(events, count: 36)
        XCTAssertEqual(all.firstIndex { $0.name == "alarm" }, 22, "raised with the AudioData 10 s into the silence")
        let received = all.filter { $0.name == "alarm" }
        XCTAssertEqual(received.count, 2)
        guard case .alarm(let raised) = received.first, case .alarm(let cleared) = received.last else { return XCTFail("\(all)") }
        XCTAssertEqual(raised.kind, .silence)
        XCTAssertEqual(raised.change, .raised)
        XCTAssertEqual(raised.name, "studio-a")
        XCTAssertEqual(raised.since, Date(timeIntervalSince1970: 1_767_225_600 + 1.5), "the first silent AudioData")
        XCTAssertEqual(raised.raised, [.silence])
        XCTAssertEqual(cleared.change, .cleared)
        XCTAssertEqual(heard.events, [raised, cleared], "the observer hears what the feed says")
        let json = String(decoding: try StreamEvent.alarm(raised).encodedPayload(), as: UTF8.self)
        XCTAssertEqual(json, """
            {"change":"raised","detail":"every channel below -60.0 dBFS for 10 s (loudest peak -120.0 dBFS)","id":"6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b",\
            "kind":"silence","name":"studio-a","raised":["silence"],"since":"2026-01-01T00:00:01.500Z"}
            """)
    }

    func testEachStreamGetsTheAlarmConditionsOfItsName() throws {
        var quick = StreamAlarmConditions()
        quick.silenceDuration = .seconds(2)
        let policy = StreamAlarmPolicy(
            conditions: quick, overrides: [StreamAlarmOverride(pattern: "studio-*", changes: [.off]), .init(pattern: "van-*", changes: [.set(.silenceDuration(.seconds(4)))])])
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60), alarms: policy), now: { [clock = self.clock] in clock.now })
        let names = ["studio-a", "van-1", "field-1"]
        let recorders = names.enumerated().map { index, name in
            directory.streamOpened(StreamOpening(
                id: UUID(uuidString: "00000000-0000-4000-8000-00000000000\(index + 2)") ?? UUID(), name: name, peer: "127.0.0.1:40000",
                format: Self.stereo, started: clock.now, startSampleTime: 0, file: "\(name).caf", resumed: false, durableSampleTime: 0))
        }
        var raisedAt: [String: Int] = [:]
        for step in 1...10 {
            clock.advance(0.5)
            for recorder in recorders {
                recorder.audioReceived(endSampleTime: Int64(step) * 24_000, levels: try levels(peak: [12_000, 12_000], rms: [12_000, 12_000]))
            }
            for row in directory.snapshot() where row.alarms == [.silence] && raisedAt[row.name] == nil { raisedAt[row.name] = step }
        }
        XCTAssertEqual(raisedAt, ["field-1": 5, "van-1": 9], "2 s and 4 s after the first silent AudioData at 0.5 s; none for studio-a")
    }

    func testAlarmsCanBeOff() throws {
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60), alarms: .off), now: { [clock = self.clock] in clock.now })
        let recorder = directory.streamOpened(opening())
        for step in 0..<40 {
            clock.advance(0.5)
            recorder.audioReceived(endSampleTime: Int64(step + 1) * 24_000, levels: try levels(peak: [12_000, 12_000], rms: [12_000, 12_000]))
        }
        directory.sweep()
        XCTAssertEqual(directory.snapshot(of: Self.id)?.alarms, [])
    }

    func testFinishedStreamsLeaveAfterTheirRetentionAndBeyondTheLimit() throws {
        let directory = directory(retention: .seconds(600), maximumFinished: 2)
        for index in 0..<4 {
            let id = UUID(uuidString: "00000000-0000-4000-8000-00000000000\(index)") ?? UUID()
            directory.streamOpened(opening(id, name: "s\(index)")).connectionEnded(resumable: false)
            clock.advance(1)
        }
        let live = directory.streamOpened(opening(Self.id))
        XCTAssertEqual(directory.snapshot().map(\.name), ["s2", "s3", "studio-a"], "the two newest finished streams stay")
        clock.advance(600)
        XCTAssertEqual(directory.snapshot().map(\.name), ["studio-a"], "finished streams leave after 10 minutes; live ones stay")
        live.connectionEnded(resumable: false)
        XCTAssertEqual(directory.count, 1)
    }

    func testLevelsEventsAreCoalescedToTenASecondPerStream() async throws {
        let directory = directory()
        let events = directory.events()
        let recorder = directory.streamOpened(opening())
        let other = directory.streamOpened(opening(Self.otherID, name: "studio-b"))
        let loud = try levels(peak: [600, 600], rms: [900, 900])
        for _ in 0..<25 {
            recorder.audioReceived(endSampleTime: 480, levels: loud)
            other.audioReceived(endSampleTime: 480, levels: loud)
            clock.advance(0.03)
        }
        recorder.connectionEnded(resumable: false)
        other.connectionEnded(resumable: false)
        let received = try await drain(events, count: 2 + 2 * 7 + 2)
        let levelEvents = received.filter { $0.name == "levels" }
        // 25 buffers 30 ms apart (0.72 s): an event at 0, 0.12, 0.24 ... 0.72 s, none closer than 0.1 s.
        XCTAssertEqual(levelEvents.filter { $0.streamID == Self.id }.count, 7)
        XCTAssertEqual(levelEvents.filter { $0.streamID == Self.otherID }.count, 7)
        XCTAssertEqual(received.last?.name, "closed")
        let payload = String(decoding: try levelEvents[0].encodedPayload(), as: UTF8.self)
        XCTAssertEqual(payload, #"{"id":"6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b","peak_dbfs":[-6,-6],"rms_dbfs":[-9,-9]}"#)
    }

    func testASubscriberThatDoesNotReadIsDroppedAndOthersGoOn() async throws {
        let directory = directory(bufferLimit: 8)
        let slow = directory.events()
        let reader = directory.events()
        var readerIterator = reader.makeAsyncIterator()
        let recorder = directory.streamOpened(opening())
        _ = try await readerIterator.next()
        for index in 0..<20 {
            recorder.gapRecorded(sampleTime: Int64(index) * 480, lengthFrames: 480, reason: "overrun")
            _ = try await readerIterator.next()
        }
        XCTAssertEqual(directory.subscriberCount, 1, "the slow subscriber is gone")
        var slowIterator = slow.makeAsyncIterator()
        var buffered = 0
        do {
            while try await slowIterator.next() != nil { buffered += 1 }
            XCTFail("the slow subscriber's sequence ends with an error")
        } catch let error as StreamEventFeedError {
            XCTAssertEqual(error, .fellBehind(unread: 8))
            XCTAssertEqual(error.description, "the stream event feed dropped this subscriber: it left 8 events unread; reconnect and take a fresh list of streams")
        }
        XCTAssertEqual(buffered, 8, "it keeps what was buffered, never more than the bound")
    }

    func testASubscriberThatStopsListeningIsRemoved() async throws {
        let directory = directory()
        do {
            let events = directory.events()
            XCTAssertEqual(directory.subscriberCount, 1)
            _ = events
        }
        directory.streamOpened(opening()).gapRecorded(sampleTime: 0, lengthFrames: 1, reason: "overrun")
        XCTAssertEqual(directory.subscriberCount, 0)
    }
}

/// The alarms an observer heard, in order.
private final class AlarmLog: @unchecked Sendable {
    private let lock = NSLock()
    private var heard: [StreamAlarmEvent] = []

    func append(_ event: StreamAlarmEvent) { lock.withLock { heard.append(event) } }
    var events: [StreamAlarmEvent] { lock.withLock { heard } }
}
