import CaptureWire
import XCTest

/// The sender's protocol rules: handshake, resume point, in-flight tracking, acks, end of stream.
final class SenderStreamStateTests: XCTestCase {
    private func streaming(oldestHeld: UInt64 = 1, nextNew: UInt64 = 1, accepted next: UInt64 = 1) throws -> SenderStreamState {
        var state = SenderStreamState(oldestHeldSequence: oldestHeld, nextNewSequence: nextNew)
        try state.helloSent()
        _ = try state.receive(.helloAccepted(WireFixtures.helloAccepted(next: next)))
        return state
    }

    func testNothingIsExpectedBeforeHelloIsSent() {
        var state = SenderStreamState()
        XCTAssertThrowsError(try state.receive(.helloAccepted(WireFixtures.helloAccepted()))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage)
        }
    }

    func testHelloAcceptedOrErrorAfterHello() throws {
        var state = SenderStreamState()
        try state.helloSent()
        XCTAssertEqual(state.phase, .awaitingHelloAccepted)
        XCTAssertEqual(try state.receive(.heartbeat(WireFixtures.heartbeat())), .heartbeat)
        var ackFirst = state
        XCTAssertThrowsError(try ackFirst.receive(.ack(WireFixtures.ack(0, sampleTime: 0)))) { error in
            XCTAssertEqual(error as? WireError, .unexpectedMessage(.ack, expecting: "HelloAccepted or Error"))
        }
        var refused = state
        let busy = { var e = Capture_V1_Error(); e.code = .streamBusy; e.fatal = true; return e }()
        XCTAssertEqual(try refused.receive(.error(busy)), .peerError(busy))
        XCTAssertEqual(refused.phase, .closed)
        let accepted = WireFixtures.helloAccepted()
        XCTAssertEqual(try state.receive(.helloAccepted(accepted)), .accepted(accepted))
        XCTAssertEqual(state.phase, .streaming)
        XCTAssertEqual(state.nextSequenceToSend, 1)
    }

    func testResumePointMustLieWithinWhatTheSenderHolds() throws {
        var state = SenderStreamState(oldestHeldSequence: 42, nextNewSequence: 60)
        try state.helloSent()
        XCTAssertThrowsError(try state.receive(.helloAccepted(WireFixtures.helloAccepted(next: 41, sampleTime: 19_200)))) { error in
            XCTAssertEqual(error as? WireError, .cannotResume(requested: 41, oldestHeld: 42, heldUntilSampleTime: 19_200))
            XCTAssertEqual((error as? WireError)?.errorFrame.heldUntilSampleTime, 19_200, "the Error names where the receiver's recording ends")
        }
        var beyond = SenderStreamState(oldestHeldSequence: 42, nextNewSequence: 60)
        try beyond.helloSent()
        XCTAssertThrowsError(try beyond.receive(.helloAccepted(WireFixtures.helloAccepted(next: 61)))) { error in
            XCTAssertEqual(error as? WireError, .resumeBeyondSent(requested: 61, nextUnsent: 60))
        }
        let resumed = try streaming(oldestHeld: 42, nextNew: 60, accepted: 50)
        XCTAssertEqual(resumed.nextSequenceToSend, 50)
        XCTAssertEqual(resumed.acknowledgedSequence, 49)
        XCTAssertEqual(resumed.inFlightCount, 0)
    }

    func testAcksAdvanceIgnoreStaleAndRefuseBeyondSent() throws {
        var state = try streaming()
        for sequence: UInt64 in 1...5 { try state.sent(sequence: sequence) }
        XCTAssertEqual(state.inFlightCount, 5)
        let ack3 = WireFixtures.ack(3, sampleTime: 12)
        XCTAssertEqual(try state.receive(.ack(ack3)), .acknowledged(ack3))
        XCTAssertEqual(state.acknowledgedSequence, 3)
        XCTAssertEqual(state.inFlightCount, 2)
        let ack2 = WireFixtures.ack(2, sampleTime: 8)
        XCTAssertEqual(try state.receive(.ack(ack2)), .staleAck(ack2))
        XCTAssertEqual(try state.receive(.ack(ack3)), .staleAck(ack3))
        XCTAssertEqual(state.acknowledgedSequence, 3)
        XCTAssertThrowsError(try state.receive(.ack(WireFixtures.ack(6, sampleTime: 24)))) { error in
            XCTAssertEqual(error as? WireError, .ackBeyondSent(acknowledged: 6, highestSent: 5))
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
        XCTAssertEqual(state.phase, .closed)
    }

    func testSequencesMustBeSentInOrder() throws {
        var state = try streaming()
        try state.sent(sequence: 1)
        XCTAssertThrowsError(try state.sent(sequence: 3)) { error in
            XCTAssertEqual((error as? WireError)?.code, .internal)
        }
    }

    func testEndOfStreamThenEndAccepted() throws {
        var state = try streaming()
        for sequence: UInt64 in 1...3 { try state.sent(sequence: sequence) }
        var premature = state
        XCTAssertThrowsError(try premature.receive(.endAccepted(WireFixtures.endAccepted()))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage)
        }
        var wrongLast = state
        XCTAssertThrowsError(try wrongLast.endOfStreamSent(lastSequence: 2, endSampleTime: 488))
        try state.endOfStreamSent(lastSequence: 3, endSampleTime: 488)
        XCTAssertEqual(state.phase, .awaitingEndAccepted)
        XCTAssertThrowsError(try state.sent(sequence: 4))
    }

    func testAcksContinueUntilEndAccepted() throws {
        var state = try streaming()
        for sequence: UInt64 in 1...3 { try state.sent(sequence: sequence) }
        try state.endOfStreamSent(lastSequence: 3, endSampleTime: 488)
        let ack = WireFixtures.ack(3, sampleTime: 488)
        XCTAssertEqual(try state.receive(.ack(ack)), .acknowledged(ack))
        let end = WireFixtures.endAccepted()
        XCTAssertEqual(try state.receive(.endAccepted(end)), .endAccepted(end))
        XCTAssertEqual(state.phase, .ended)
        XCTAssertEqual(state.inFlightCount, 0)
    }

    /// Issue 19, item 3: an EndAccepted that does not repeat the EndOfStream this sender sent
    /// (a receiver that answered without reading the stream's end) releases nothing: it is a
    /// protocol violation. Table: (last sequence, end sample) confirmed.
    func testEndAcceptedMustNameTheEndThatWasSent() throws {
        let cases: [(last: UInt64, end: Int64, counts: Bool)] = [
            (3, 488, true), (0, 0, false), (2, 488, false), (3, 484, false), (4, 488, false), (3, 0, false),
        ]
        for row in cases {
            var state = try streaming()
            for sequence: UInt64 in 1...3 { try state.sent(sequence: sequence) }
            try state.endOfStreamSent(lastSequence: 3, endSampleTime: 488)
            var end = WireFixtures.endAccepted()
            end.lastSequence = row.last
            end.endSampleTime = row.end
            if row.counts {
                XCTAssertEqual(try state.receive(.endAccepted(end)), .endAccepted(end), "\(row)")
                XCTAssertEqual(state.acknowledgedSequence, 3)
            } else {
                XCTAssertThrowsError(try state.receive(.endAccepted(end)), "\(row)") { error in
                    XCTAssertEqual((error as? WireError)?.code, .invalidMessage, "\(row)")
                    XCTAssertTrue("\(error)".contains("the confirmation does not count"), "\(error)")
                }
                XCTAssertEqual(state.acknowledgedSequence, 0, "nothing is released: \(row)")
                XCTAssertEqual(state.phase, .closed)
            }
        }
    }

    /// Issue 19, item 1: a stream that ended may get EndAccepted as the answer to its Hello (the
    /// receiver finished it; the confirmation was lost with the connection). It counts only for a
    /// stream that has ended, and only when it names that end.
    func testEndAcceptedAnswersTheHelloOfAStreamThatEnded() throws {
        var ended = SenderStreamState(oldestHeldSequence: 1, nextNewSequence: 4, endedBefore: StreamEnd(position: StreamPosition(lastSequence: 3, endSampleTime: 488)))
        try ended.helloSent()
        XCTAssertEqual(try ended.receive(.endAccepted(WireFixtures.endAccepted())), .endAccepted(WireFixtures.endAccepted()))
        XCTAssertEqual(ended.phase, .ended)
        XCTAssertEqual(ended.acknowledgedSequence, 3)

        var other = SenderStreamState(oldestHeldSequence: 1, nextNewSequence: 4, endedBefore: StreamEnd(position: StreamPosition(lastSequence: 3, endSampleTime: 500)))
        try other.helloSent()
        XCTAssertThrowsError(try other.receive(.endAccepted(WireFixtures.endAccepted()))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }

        var live = SenderStreamState(oldestHeldSequence: 1, nextNewSequence: 4)
        try live.helloSent()
        XCTAssertThrowsError(try live.receive(.endAccepted(WireFixtures.endAccepted()))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage, "a stream still capturing has not ended")
        }
        XCTAssertEqual(live.acknowledgedSequence, 0)
    }
}
