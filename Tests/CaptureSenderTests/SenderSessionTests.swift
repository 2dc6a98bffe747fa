import CaptureCodecs
@testable import CaptureSender
import CaptureSecurity
import CaptureWire
import Foundation
import XCTest

/// `SenderSession`, the sender's side of a connection as a pure state machine: table tests.
final class SenderSessionTests: XCTestCase {
    private static let noCertificate = CertificateRefusal(peerName: "the receiver", authority: .certificateAuthority, reason: .noCertificate)

    private typealias Action = SenderSession.Action

    private let hello = Capture_V1_Hello.with { $0.protocolVersion = 1; $0.streamName = "table" }

    /// PCM entry `sequence` of `bytes` bytes (4-byte frames) on a contiguous timeline.
    private func entry(_ sequence: UInt64, bytes: Int = 400) -> LoggedPacket {
        let frames = bytes / 4
        return LoggedPacket(sequence: sequence, content: .audio(EncodedPackets(
            payload: [UInt8](repeating: UInt8(sequence), count: bytes), packetCount: frames, packetSizes: [],
            firstSampleTime: Int64(sequence - 1) * Int64(frames), frameCount: frames)))
    }

    /// The log through entry `last` (of 100 frames each, as `entry` makes them), ended at `end` when given.
    private func position(_ last: UInt64, endAt end: Int64? = nil) -> PacketLogPosition {
        PacketLogPosition(
            appended: StreamPosition(lastSequence: last, endSampleTime: end ?? Int64(last) * 100),
            end: end.map { StreamEnd(position: StreamPosition(lastSequence: last, endSampleTime: $0), remainderFrames: 0, reason: "duration") })
    }

    private func accepted(next: UInt64, sampleTime: Int64 = 0) -> WireMessage {
        .helloAccepted(.with { $0.nextSequence = next; $0.nextSampleTime = sampleTime; $0.heartbeatIntervalMs = 5_000; $0.maxFrameBytes = 1 << 20; $0.fileName = "f.caf" })
    }

    private func ack(_ sequence: UInt64, sampleTime: Int64) -> WireMessage {
        .ack(.with { $0.durableSequence = sequence; $0.durableSampleTime = sampleTime })
    }

    /// Each row: an event and the actions it must give.
    private func run(_ session: inout SenderSession, _ steps: [(SenderSession.Event, [Action], UInt)]) {
        for (event, expected, line) in steps {
            XCTAssertEqual(session.handle(event), expected, line: line)
        }
    }

    /// The Hello's start time never traps, whatever start a damaged spool gives: out of Int64 it is
    /// clamped, and the receiver refuses it naming the field (PROTOCOL.md §6.1.4).
    func testTheHellosStartTimeIsConvertedWithoutTrapping() {
        XCTAssertEqual(StreamSender.unixNanoseconds(1_767_225_600.5), 1_767_225_600_500_000_000)
        XCTAssertEqual(StreamSender.unixNanoseconds(1e300), .max)
        XCTAssertEqual(StreamSender.unixNanoseconds(-1e300), .min)
        XCTAssertEqual(StreamSender.unixNanoseconds(.infinity), .max)
        XCTAssertEqual(StreamSender.unixNanoseconds(.nan), .min)
        XCTAssertEqual(StreamSender.unixNanoseconds(9_223_372_036.854_775_807), .max, "2^63 ns rounds up to 2^63 as a Double")
    }

    /// What a receiver says about where its recording ends (`Error.held_until_sample_time`) is
    /// believed only as far as it can be true: the lost audio never starts before sample 0 (a lying
    /// receiver's negative value would make the continuation's Hello invalid and the sender retry
    /// for ever), and a receiver that claims to hold as much as the sender holds, or more, lost nothing.
    func testTheLostRangeTrustsTheReceiverOnlyAsFarAsItCanBeTrue() {
        let rows: [(held: Int64?, oldest: Int64, lost: Range<Int64>?)] = [
            (nil, 96_000, nil),
            (0, 96_000, 0..<96_000),
            (48_000, 96_000, 48_000..<96_000),
            (96_000, 96_000, nil),
            (Int64.max, 96_000, nil),
            (-1, 96_000, 0..<96_000),
            (Int64.min, 96_000, 0..<96_000),
            (Int64.min, 0, nil),
        ]
        for row in rows {
            XCTAssertEqual(StreamSender.lostRange(receiverHoldsUntil: row.held, oldestHeld: row.oldest), row.lost, "\(String(describing: row.held)) against \(row.oldest)")
        }
    }

    func testAWholeStreamFromHelloToEndAccepted() {
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(3))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(accepted(next: 1), writable: true, log: position(3)), [.accepted(accepted(next: 1).helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            // Events while a fetch is outstanding ask for nothing more.
            (.sendable(writable: true, log: position(3)), [], #line),
            (.fetched([entry(1), entry(2), entry(3)], writable: true, log: position(3)), [
                .send(entry(1).wireMessage), .send(entry(2).wireMessage), .send(entry(3).wireMessage), .markSent(through: 3), .flush,
            ], #line),
            (.sendable(writable: true, log: position(4)), [.fetch(from: 4, maxCount: 32)], #line),
            // The last entry comes, and the stream has ended: EndOfStream follows it at once.
            (.fetched([entry(4)], writable: true, log: position(4, endAt: 400)), [
                .send(entry(4).wireMessage), .markSent(through: 4),
                .send(.endOfStream(.with { $0.lastSequence = 4; $0.endSampleTime = 400; $0.reason = "duration" })), .flush,
            ], #line),
            (.received(ack(4, sampleTime: 400), writable: true, log: position(4, endAt: 400)), [.acknowledge(through: 4)], #line),
            (.received(.endAccepted(.with { $0.fileName = "f.caf"; $0.totalFrames = 400; $0.totalPackets = 400; $0.lastSequence = 4; $0.endSampleTime = 400 }),
                       writable: true, log: position(4, endAt: 400)), [
                .acknowledge(through: 4), .complete(.delivered(StreamSummary(fileName: "f.caf", totalFrames: 400, totalPackets: 400))), .close,
            ], #line),
            // Completed: nothing more happens.
            (.readIdle, [], #line),
        ])
    }

    /// A marker goes out as a Marker frame, in its sequence's place, only to a receiver that lists
    /// frame type 10 in HelloAccepted; to one that does not (it predates markers) nothing from the
    /// marker on is sent, and the connection ends in a retryable failure that names what to do.
    func testAMarkerGoesOnlyToAReceiverThatAcceptsMarkers() {
        let marker = LoggedPacket(sequence: 2, content: .marker(sampleTime: 100, label: "goal"))
        let markersAccepted = WireMessage.helloAccepted(.with {
            $0.nextSequence = 1; $0.heartbeatIntervalMs = 5_000; $0.maxFrameBytes = 1 << 20; $0.fileName = "f.caf"; $0.acceptedFrameTypes = [10]
        })
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(2))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(markersAccepted, writable: true, log: position(2)), [.accepted(markersAccepted.helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            (.fetched([entry(1), marker], writable: true, log: position(2)), [
                .send(entry(1).wireMessage),
                .send(.marker(.with { $0.sequence = 2; $0.sampleTime = 100; $0.label = "goal" })),
                .markSent(through: 2), .flush,
            ], #line),
        ])

        var older = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(2))
        run(&older, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(accepted(next: 1), writable: true, log: position(2)), [.accepted(accepted(next: 1).helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            (.fetched([entry(1), marker], writable: true, log: position(2)), [
                .send(entry(1).wireMessage),
                .complete(.interrupted(.receiverPredatesFrameType(.marker, sequence: 2), retry: true, streamed: true)), .close,
            ], #line),
            (.sendable(writable: true, log: position(2)), [], #line),
        ])
        XCTAssertTrue(SenderError.receiverPredatesFrameType(.marker, sequence: 2).description.contains("upgrade capture-recv"))
    }

    func testAFilledGapGoesOnlyToAReceiverThatListsIt() {
        let filled = LoggedPacket(sequence: 2, content: .filledGap(position: 100, sampleTime: 40, length: 960, reason: "paused"))
        func acceptedListing(_ types: [UInt32]) -> WireMessage {
            .helloAccepted(.with {
                $0.nextSequence = 1; $0.heartbeatIntervalMs = 5_000; $0.maxFrameBytes = 1 << 20; $0.fileName = "f.caf"; $0.acceptedFrameTypes = types
            })
        }
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(2))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(acceptedListing([10, 11]), writable: true, log: position(2)), [.accepted(acceptedListing([10, 11]).helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            (.fetched([entry(1), filled], writable: true, log: position(2)), [
                .send(entry(1).wireMessage),
                .send(.filledGap(.with { $0.sequence = 2; $0.sampleTime = 40; $0.lengthFrames = 960; $0.reason = "paused" })),
                .markSent(through: 2), .flush,
            ], #line),
        ])

        // A receiver of markers only predates filled gaps.
        var older = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(2))
        run(&older, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(acceptedListing([10]), writable: true, log: position(2)), [.accepted(acceptedListing([10]).helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            (.fetched([entry(1), filled], writable: true, log: position(2)), [
                .send(entry(1).wireMessage),
                .complete(.interrupted(.receiverPredatesFrameType(.filledGap, sequence: 2), retry: true, streamed: true)), .close,
            ], #line),
        ])
        XCTAssertEqual(
            SenderError.receiverPredatesFrameType(.filledGap, sequence: 2).description,
            "the stream holds a gap carried as encoded silence (sequence 2) but the receiver does not accept such gaps (frame type 11) (it predates them): upgrade capture-recv; the audio from there on is kept in the spool and delivered once the receiver accepts them")
    }

    func testTheWindowBoundsWhatIsInFlightAndAnAckOpensIt() {
        var session = SenderSession(hello: hello, windowBytes: 1_000, oldestHeld: 1, log: position(5))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(accepted(next: 1), writable: true, log: position(5)), [.accepted(accepted(next: 1).helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            // 400 + 400 + 400 bytes: the third crosses the 1000-byte window, then sending stops.
            (.fetched([entry(1), entry(2), entry(3), entry(4)], writable: true, log: position(5)), [
                .send(entry(1).wireMessage), .send(entry(2).wireMessage), .send(entry(3).wireMessage), .markSent(through: 3), .flush,
            ], #line),
            (.sendable(writable: true, log: position(5)), [], #line),
            (.received(ack(2, sampleTime: 200), writable: true, log: position(5)), [.acknowledge(through: 2), .fetch(from: 4, maxCount: 32)], #line),
            // A channel that cannot take more asks for nothing.
            (.fetched([entry(4)], writable: false, log: position(5)), [.send(entry(4).wireMessage), .markSent(through: 4), .flush], #line),
            (.sendable(writable: false, log: position(5)), [], #line),
        ])
    }

    func testAResumeStartsAtTheReceiversPointAndReleasesWhatItHolds() {
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 3, log: position(9))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(accepted(next: 6, sampleTime: 500), writable: true, log: position(9)), [
                .acknowledge(through: 5), .accepted(accepted(next: 6, sampleTime: 500).helloAccepted!), .fetch(from: 6, maxCount: 32),
            ], #line),
            // Entries that do not start at the resume point are not sent (nothing came: wait).
            (.fetched([entry(5)], writable: true, log: position(9)), [], #line),
        ])
        XCTAssertEqual(session.nextSequence, 6)
    }

    func testASpoolThatCannotBeReadEndsTheConnectionForGoodWithWhatItMeans() {
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(3))
        _ = session.handle(.channelActive)
        _ = session.handle(.received(accepted(next: 1), writable: true, log: position(3)))
        let actions = session.handle(.fetchFailed(from: 1, reason: "spool: segment 1 is gone"))
        XCTAssertEqual(actions, [
            .complete(.interrupted(.spoolUnreadable(firstSequence: 1, reason: "spool: segment 1 is gone"), retry: false, streamed: true)), .close,
        ])
        XCTAssertTrue(SenderError.spoolUnreadable(firstSequence: 1, reason: "spool: segment 1 is gone").description.contains("cannot be delivered"))
    }

    func testHowConnectionsEnd() {
        struct Row { let events: [SenderSession.Event]; let outcome: ConnectionOutcome?; let line: UInt }
        let accept = SenderSession.Event.received(accepted(next: 1), writable: true, log: position(1))
        let rows: [Row] = [
            Row(events: [.channelActive, .received(.error(.with { $0.code = .sequenceGap; $0.fatal = true; $0.message = "gone" }), writable: true, log: position(1))],
                outcome: .cannotResume(.refused(code: "sequenceGap", message: "gone"), receiverHoldsUntil: nil), line: #line),
            Row(events: [.channelActive, .received(.error(.with { $0.code = .sequenceGap; $0.fatal = true; $0.message = "lost"; $0.heldUntilSampleTime = 0 }), writable: true, log: position(1))],
                outcome: .cannotResume(.refused(code: "sequenceGap", message: "lost"), receiverHoldsUntil: 0), line: #line),
            Row(events: [.channelActive, accept, .received(.error(.with { $0.code = .sequenceGap; $0.fatal = true; $0.message = "resend" }), writable: true, log: position(1))],
                outcome: .interrupted(.refused(code: "sequenceGap", message: "resend"), retry: true, streamed: true), line: #line),
            Row(events: [.channelActive, .received(.error(.with { $0.code = .rateLimited; $0.fatal = true; $0.message = "slow"; $0.retryAfterMs = 2_500 }), writable: true, log: position(1))],
                outcome: .interrupted(.rateLimited(message: "slow", retryAfter: 2.5), retry: true, streamed: false), line: #line),
            Row(events: [.channelActive, .received(.error(.with { $0.code = .authenticationFailed; $0.fatal = true; $0.message = "no" }), writable: true, log: position(1))],
                outcome: .interrupted(.refused(code: "authenticationFailed", message: "no"), retry: false, streamed: false), line: #line),
            Row(events: [.channelActive, .readIdle],
                outcome: .interrupted(.timedOut("no data from the receiver for too long; the connection is considered dead"), retry: true, streamed: false), line: #line),
            Row(events: [.channelActive, .channelInactive(plainTCP: true)],
                outcome: .interrupted(.connectionLost(.closedBeforeAccepting), retry: true, streamed: false), line: #line),
            Row(events: [.channelActive, accept, .channelInactive(plainTCP: true)],
                outcome: .interrupted(.connectionLost(.closed), retry: true, streamed: true), line: #line),
            Row(events: [.channelActive, .transportFailed(.tls(.receiverCertificateRefused(Self.noCertificate)), retry: false), .channelInactive(plainTCP: false)],
                outcome: .interrupted(.tls(.receiverCertificateRefused(Self.noCertificate)), retry: false, streamed: false), line: #line),
            // A non-fatal error is a warning only.
            Row(events: [.channelActive, accept, .received(.error(.with { $0.code = .storageFailed; $0.fatal = false; $0.message = "slow disk" }), writable: true, log: position(1))],
                outcome: nil, line: #line),
        ]
        for row in rows {
            var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(1))
            var outcomes: [ConnectionOutcome] = []
            for event in row.events {
                for case .complete(let outcome) in session.handle(event) { outcomes.append(outcome) }
            }
            XCTAssertEqual(outcomes, row.outcome.map { [$0] } ?? [], "exactly one outcome, the first", line: row.line)
        }
    }

    /// A background session sends one entry at a time while the foreground is caught up (the next
    /// after its acknowledgement), nothing while it is behind, and as its window allows once the
    /// foreground has finished.
    func testABackgroundSessionSendsOneEntryAtATimeWhileTheForegroundIsLive() {
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(6), pacing: SendPacing(bitsPerSecond: nil, background: true))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            // Accepted before the first look at the foreground: nothing is asked for.
            (.received(accepted(next: 1), writable: true, log: position(6)), [.accepted(accepted(next: 1).helloAccepted!)], #line),
            (.paced(now: 1, foreground: .behind, writable: true, log: position(6)), [], #line),
            (.paced(now: 2, foreground: .caughtUp, writable: true, log: position(6)), [.fetch(from: 1, maxCount: 32)], #line),
            (.fetched([entry(1), entry(2), entry(3)], writable: true, log: position(6)), [.send(entry(1).wireMessage), .markSent(through: 1), .flush], #line),
            (.paced(now: 3, foreground: .caughtUp, writable: true, log: position(6)), [], #line),
            (.received(ack(1, sampleTime: 100), writable: true, log: position(6)), [.acknowledge(through: 1), .fetch(from: 2, maxCount: 32)], #line),
            (.fetched([entry(2), entry(3)], writable: true, log: position(6)), [.send(entry(2).wireMessage), .markSent(through: 2), .flush], #line),
            // The foreground falls behind: the entry in flight is acknowledged, nothing new goes.
            (.paced(now: 4, foreground: .behind, writable: true, log: position(6)), [], #line),
            (.received(ack(2, sampleTime: 200), writable: true, log: position(6)), [.acknowledge(through: 2)], #line),
            // The foreground has finished: the window's worth goes at once.
            (.paced(now: 5, foreground: .finished, writable: true, log: position(6)), [.fetch(from: 3, maxCount: 32)], #line),
            (.fetched([entry(3), entry(4), entry(5), entry(6)], writable: true, log: position(6)), [
                .send(entry(3).wireMessage), .send(entry(4).wireMessage), .send(entry(5).wireMessage), .send(entry(6).wireMessage), .markSent(through: 6), .flush,
            ], #line),
        ])
    }

    /// A rate-limited session sends while the bucket is above zero and waits for ticks to refill it.
    func testARateLimitedSessionWaitsForTheBucket() {
        // 8,000 bits/s: 1,000 bytes/s, a 250-byte bucket; entries of 400 bytes.
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(4), pacing: SendPacing(bitsPerSecond: 8_000, background: false))
        run(&session, [
            (.channelActive, [.send(.hello(hello)), .flush], #line),
            (.received(accepted(next: 1), writable: true, log: position(4)), [.accepted(accepted(next: 1).helloAccepted!), .fetch(from: 1, maxCount: 32)], #line),
            (.fetched([entry(1), entry(2)], writable: true, log: position(4)), [.send(entry(1).wireMessage), .markSent(through: 1), .flush], #line),
            (.paced(now: 1_000_000_000, foreground: .finished, writable: true, log: position(4)), [], #line),
            // 0.1 s refills 100 bytes: -150 → -50.
            (.paced(now: 1_100_000_000, foreground: .finished, writable: true, log: position(4)), [], #line),
            // 0.1 s more: +50, above zero.
            (.paced(now: 1_200_000_000, foreground: .finished, writable: true, log: position(4)), [.fetch(from: 2, maxCount: 32)], #line),
            (.fetched([entry(2), entry(3)], writable: true, log: position(4)), [.send(entry(2).wireMessage), .markSent(through: 2), .flush], #line),
        ])
    }

    func testAHeartbeatGoesOutWhenTheLinkIsIdle() {
        var session = SenderSession(hello: hello, windowBytes: 1 << 20, oldestHeld: 1, log: position(0))
        _ = session.handle(.channelActive)
        XCTAssertEqual(session.handle(.writeIdle(unixNanoseconds: 42)), [.send(.heartbeat(.with { $0.sentUnixNs = 42 })), .flush])
    }
}

private extension WireMessage {
    var helloAccepted: Capture_V1_HelloAccepted? {
        if case .helloAccepted(let accepted) = self { return accepted }
        return nil
    }
}
