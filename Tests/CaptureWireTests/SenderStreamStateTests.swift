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
        XCTAssertThrowsError(try state.receive(.helloAccepted(WireFixtures.helloAccepted(next: 41)))) { error in
            XCTAssertEqual(error as? WireError, .cannotResume(requested: 41, oldestHeld: 42))
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
        XCTAssertThrowsError(try wrongLast.endOfStreamSent(lastSequence: 2))
        try state.endOfStreamSent(lastSequence: 3)
        XCTAssertEqual(state.phase, .awaitingEndAccepted)
        XCTAssertThrowsError(try state.sent(sequence: 4))
    }

    func testAcksContinueUntilEndAccepted() throws {
        var state = try streaming()
        for sequence: UInt64 in 1...3 { try state.sent(sequence: sequence) }
        try state.endOfStreamSent(lastSequence: 3)
        let ack = WireFixtures.ack(3, sampleTime: 488)
        XCTAssertEqual(try state.receive(.ack(ack)), .acknowledged(ack))
        let end = WireFixtures.endAccepted()
        XCTAssertEqual(try state.receive(.endAccepted(end)), .endAccepted(end))
        XCTAssertEqual(state.phase, .ended)
        XCTAssertEqual(state.inFlightCount, 0)
    }
}
