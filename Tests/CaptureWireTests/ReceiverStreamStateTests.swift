import CaptureCore
import CaptureWire
import Foundation
import XCTest

/// The receiver's protocol rules: handshake order, Hello checks, sequences, sample times, sizes, end.
final class ReceiverStreamStateTests: XCTestCase {
    private func streaming(
        format: StreamFormat = WireFixtures.pcmFormat, resume: StreamPosition? = nil, resumeFrom: UInt64 = 0
    ) throws -> ReceiverStreamState {
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        guard case .decideOnHello(let hello) = try state.receive(.hello(WireFixtures.hello(format: format, resumeFrom: resumeFrom))) else {
            throw UnexpectedAction(description: "the fixture Hello was not accepted")
        }
        try state.accept(resumingAt: resume ?? .beginning(of: hello))
        return state
    }

    private func assertError(
        _ expected: WireError, file: StaticString = #filePath, line: UInt = #line,
        _ body: () throws -> Void
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual(error as? WireError, expected, file: file, line: line)
        }
    }

    // MARK: Handshake

    func testHandshakeInOrder() throws {
        var state = ReceiverStreamState()
        XCTAssertEqual(state.phase, .awaitingPreamble)
        try state.receivePreamble(version: 1)
        XCTAssertEqual(state.phase, .awaitingHello)
        let action = try state.receive(.hello(WireFixtures.hello()))
        guard case .decideOnHello(let hello) = action else { return XCTFail("\(action)") }
        XCTAssertEqual(hello.streamID, WireFixtures.streamID)
        XCTAssertEqual(hello.format, WireFixtures.pcmFormat)
        XCTAssertEqual(state.phase, .awaitingDecision)
        try state.accept(resumingAt: .beginning(of: hello))
        XCTAssertEqual(state.phase, .streaming)
        XCTAssertEqual(state.nextSequence, 1)
        XCTAssertEqual(state.nextSampleTime, 0)
    }

    func testAnythingButHelloFirstIsUnexpected() throws {
        for message: WireMessage in [.audioData(WireFixtures.pcmAudio()), .heartbeat(WireFixtures.heartbeat()),
                                     .endOfStream(WireFixtures.endOfStream()), .ack(WireFixtures.ack(1, sampleTime: 4))] {
            var state = ReceiverStreamState()
            try state.receivePreamble(version: 1)
            assertError(.unexpectedMessage(message.type, expecting: "Hello")) { _ = try state.receive(message) }
            XCTAssertEqual(state.phase, .closed)
        }
    }

    func testOnlyHeartbeatWhileTheReceiverDecides() throws {
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        _ = try state.receive(.hello(WireFixtures.hello()))
        XCTAssertEqual(try state.receive(.heartbeat(WireFixtures.heartbeat())), .heartbeat)
        XCTAssertThrowsError(try state.receive(.audioData(WireFixtures.pcmAudio()))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage)
        }
    }

    func testSecondHelloIsUnexpected() throws {
        var state = try streaming()
        XCTAssertThrowsError(try state.receive(.hello(WireFixtures.hello()))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage)
        }
    }

    func testErrorsAreFinal() throws {
        var state = try streaming()
        assertError(.sequenceGap(expected: 1, received: 2)) { _ = try state.receive(.gap(WireFixtures.gap())) }
        assertError(.sequenceGap(expected: 1, received: 2)) { _ = try state.receive(.audioData(WireFixtures.pcmAudio())) }
    }

    // MARK: Hello checks

    func testHelloOfAnotherProtocolVersion() throws {
        var hello = WireFixtures.hello()
        hello.protocolVersion = 2
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        assertError(.unsupportedVersion(received: 2, supported: 1)) { _ = try state.receive(.hello(hello)) }
    }

    /// A resume secret is empty or 16-64 bytes; a continuation names another stream and starts at the
    /// oldest sequence the sender holds, never near the end of the counter (PROTOCOL.md §6.1, §8.1).
    func testResumeSecretAndContinuationRules() throws {
        let other = Data(repeating: 9, count: 16)
        let cases: [(secret: Int, continues: (id: Data, first: UInt64)?, resumeFrom: UInt64, valid: Bool)] = [
            (0, nil, 0, true), (16, nil, 0, true), (64, nil, 0, true), (15, nil, 0, false), (65, nil, 0, false),
            (32, (other, 501), 501, true),
            (32, (other, 1), 0, true),
            (32, (other, 501), 500, false),  // not the oldest sequence it holds
            (32, (Data(repeating: 9, count: 15), 501), 501, false),
            (32, (WireFixtures.hello().streamID, 501), 501, false),  // itself
            (32, (other, UInt64.max), UInt64.max, false),  // would overflow the sequence counter
            (32, (other, WireProtocol.maximumSequence), WireProtocol.maximumSequence, true),
        ]
        for row in cases {
            var hello = WireFixtures.hello()
            hello.resumeSecret = Data(repeating: 1, count: row.secret)
            hello.resumeFromSequence = row.resumeFrom
            if let continues = row.continues {
                hello.continues = .with { $0.streamID = continues.id; $0.firstSequence = continues.first }
            }
            if row.valid {
                XCTAssertNoThrow(try ValidatedHello(hello), "\(row)")
            } else {
                XCTAssertThrowsError(try ValidatedHello(hello), "\(row)") { error in
                    XCTAssertEqual((error as? WireError)?.code, .invalidMessage, "\(row)")
                }
            }
        }
        var continuing = WireFixtures.hello()
        continuing.resumeFromSequence = 501
        continuing.startSampleTime = 96_000
        continuing.continues = .with { $0.streamID = other; $0.firstSequence = 501 }
        XCTAssertEqual(StreamPosition.beginning(of: try ValidatedHello(continuing)), StreamPosition(nextSequence: 501, nextSampleTime: 96_000))

        // The audio a continuation reports lost lies before its first frame (PROTOCOL.md §8.2).
        for (lostFrom, valid) in [(Int64(0), true), (95_999, true), (96_000, false), (-1, false), (Int64.max, false), (Int64.min, false)] {
            var lost = continuing
            lost.continues.lostFromSampleTime = lostFrom
            if valid {
                XCTAssertNoThrow(try ValidatedHello(lost), "\(lostFrom)")
            } else {
                XCTAssertThrowsError(try ValidatedHello(lost), "\(lostFrom)") { error in
                    XCTAssertEqual(error as? WireError, .invalidField(
                        message: .hello, field: "continues.lost_from_sample_time",
                        reason: "\(lostFrom); the lost audio lies before the stream's first frame (start_sample_time 96000) and at or after sample 0"))
                }
            }
        }
    }

    /// Every number in a Hello is bounded before anything downstream uses it (PROTOCOL.md §6.1.4):
    /// the ends of each range are accepted, one past them refused with INVALID_MESSAGE naming the
    /// field. The values at Int64's ends stopped the receiver (issue 27, item 1).
    func testEveryNumberInAHelloIsBounded() throws {
        let latest = WireProtocol.latestStartTimeUnixNanoseconds
        let maximumSample = WireProtocol.maximumStartSampleTime
        let cases: [(field: String, change: (inout Capture_V1_Hello) -> Void, valid: Bool, line: UInt)] = [
            ("start_time_unix_ns", { $0.startTimeUnixNs = 0 }, true, #line),
            ("start_time_unix_ns", { $0.startTimeUnixNs = latest }, true, #line),
            ("start_time_unix_ns", { $0.startTimeUnixNs = latest + 1 }, false, #line),
            ("start_time_unix_ns", { $0.startTimeUnixNs = -1 }, false, #line),
            ("start_time_unix_ns", { $0.startTimeUnixNs = .max }, false, #line),
            ("start_time_unix_ns", { $0.startTimeUnixNs = .min }, false, #line),
            ("start_sample_time", { $0.startSampleTime = maximumSample }, true, #line),
            ("start_sample_time", { $0.startSampleTime = maximumSample + 1 }, false, #line),
            ("start_sample_time", { $0.startSampleTime = .max }, false, #line),
            ("start_sample_time", { $0.startSampleTime = .min }, false, #line),
            ("resume_from_sequence", { $0.resumeFromSequence = WireProtocol.maximumSequence }, true, #line),
            ("resume_from_sequence", { $0.resumeFromSequence = WireProtocol.maximumSequence + 1 }, false, #line),
            ("resume_from_sequence", { $0.resumeFromSequence = .max }, false, #line),
            ("source_host", { $0.sourceHost = String(repeating: "h", count: 255) }, true, #line),
            ("source_host", { $0.sourceHost = String(repeating: "h", count: 256) }, false, #line),
            ("application", { $0.application = String(repeating: "a", count: 255) }, true, #line),
            ("application", { $0.application = String(repeating: "a", count: 256) }, false, #line),
        ]
        for row in cases {
            var hello = WireFixtures.hello()
            row.change(&hello)
            if row.valid {
                XCTAssertNoThrow(try ValidatedHello(hello), row.field, line: row.line)
            } else {
                XCTAssertThrowsError(try ValidatedHello(hello), row.field, line: row.line) { error in
                    XCTAssertEqual((error as? WireError)?.code, .invalidMessage, line: row.line)
                    XCTAssertTrue("\(error)".hasPrefix("invalid Hello.\(row.field): "), "\(error)", line: row.line)
                }
            }
        }
        var hello = WireFixtures.hello()
        hello.startTimeUnixNs = .max
        XCTAssertThrowsError(try ValidatedHello(hello)) { error in
            XCTAssertEqual("\(error)", "invalid Hello.start_time_unix_ns: 9223372036854775807 is not a time from 1970-01-01 to 2100-01-01T00:00:00Z (0 to 4102444800000000000 ns)")
        }
    }

    /// A stream's sample timeline ends 100 years (at its sample rate) after its Hello's start sample
    /// time: audio or a gap that would carry it further is refused, so every time and position
    /// computed from it (segment boundaries, file start times) stays far inside Int64.
    func testTheSampleTimelineEndsAHundredYearsAfterTheStart() throws {
        let end = WireProtocol.maximumTimelineSeconds * 48_000
        var hello = WireFixtures.hello()
        hello.startSampleTime = WireProtocol.maximumStartSampleTime
        XCTAssertEqual(try ValidatedHello(hello).timelineEnd, WireProtocol.maximumStartSampleTime + end)
        var state = try streaming()
        XCTAssertEqual(state.hello?.timelineEnd, end)
        let toTheEnd = WireFixtures.gap(sequence: 1, sampleTime: 0, length: UInt64(end - 4))
        XCTAssertEqual(try state.receive(.gap(toTheEnd)), .recordGap(toTheEnd))
        let last = WireFixtures.pcmAudio(sequence: 2, firstSampleTime: end - 4)
        XCTAssertEqual(try state.receive(.audioData(last)), .writeAudio(last))
        XCTAssertEqual(state.nextSampleTime, end)
        XCTAssertThrowsError(try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 3, firstSampleTime: end)))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
            XCTAssertEqual("\(error)", "invalid AudioData.frame_count: 4 frames would carry the stream past the end of its sample timeline (100 years after its start)")
        }
        var other = try streaming()
        XCTAssertThrowsError(try other.receive(.gap(WireFixtures.gap(sequence: 1, sampleTime: 0, length: UInt64(end + 1))))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
        var huge = try streaming()
        XCTAssertThrowsError(try huge.receive(.gap(WireFixtures.gap(sequence: 1, sampleTime: 0, length: .max)))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
    }

    /// A channel layout must describe exactly the format's channels (PROTOCOL.md §6.1.3).
    func testChannelLayoutRules() throws {
        struct Row { let channels: UInt32; let tag: UInt32; let bitmap: UInt32; let valid: Bool; let line: UInt }
        let rows: [Row] = [
            Row(channels: 2, tag: 0x10000, bitmap: 0x3, valid: true, line: #line),
            Row(channels: 6, tag: 0x10000, bitmap: 0x3F, valid: true, line: #line),  // 5.1
            Row(channels: 6, tag: 0x10000, bitmap: 0x60F, valid: true, line: #line),  // 5.1 (side)
            Row(channels: 6, tag: 0x10000, bitmap: 0x1F, valid: false, line: #line),  // 5 bits for 6 channels
            Row(channels: 2, tag: 0x10000, bitmap: 0, valid: false, line: #line),
            Row(channels: 1, tag: 0x10000, bitmap: 1 << 18, valid: false, line: #line),  // no such channel
            Row(channels: 6, tag: (121 << 16) | 6, bitmap: 0, valid: true, line: #line),  // kAudioChannelLayoutTag_MPEG_5_1_A
            Row(channels: 2, tag: (121 << 16) | 6, bitmap: 0, valid: false, line: #line),  // a 6-channel tag on stereo
            Row(channels: 2, tag: 0, bitmap: 0, valid: false, line: #line),  // channel descriptions: not carried
            Row(channels: 2, tag: (101 << 16) | 2, bitmap: 3, valid: false, line: #line),  // a tag takes no bitmap
        ]
        for row in rows {
            var hello = WireFixtures.hello()
            hello.format.channelsPerFrame = row.channels
            hello.format.bytesPerFrame = row.channels * 2
            hello.format.bytesPerPacket = row.channels * 2
            hello.channelLayout = .with { $0.tag = row.tag; $0.bitmap = row.bitmap }
            if row.valid {
                let validated = try ValidatedHello(hello)
                XCTAssertEqual(validated.channelLayout, ChannelLayout(tag: row.tag, bitmap: row.bitmap), line: row.line)
            } else {
                XCTAssertThrowsError(try ValidatedHello(hello), line: row.line) { error in
                    XCTAssertEqual((error as? WireError)?.code, .invalidMessage, line: row.line)
                }
            }
        }
        XCTAssertNil(try ValidatedHello(WireFixtures.hello()).channelLayout, "no layout given")
        XCTAssertEqual(Capture_V1_ClockState.unsynchronized.clockSynchronization, .unsynchronized)
        XCTAssertEqual(Capture_V1_ClockState(rawValue: 9)?.clockSynchronization, .unknown, "a future value reads as unknown")
    }

    /// A capture link names the capture by a 16-byte id and the encoding by a short printable label
    /// (PROTOCOL.md §6.1.5); without one, the stream names no capture.
    func testCaptureLinkRules() throws {
        let id = UUID(uuidString: "0b1d6c5e-97a4-4d1f-9e0c-3f2a8b6d4c21")!
        let rows: [(captureID: Data, encoding: String, valid: Bool, line: UInt)] = [
            (id.wireBytes, "opus-64k-20ms", true, #line),
            (id.wireBytes, "p", true, #line),
            (id.wireBytes, String(repeating: "x", count: 64), true, #line),
            (id.wireBytes, String(repeating: "x", count: 65), false, #line),
            (id.wireBytes, "", false, #line),
            (id.wireBytes, "opus 64k", false, #line),
            (id.wireBytes, "opus-é", false, #line),
            (Data(repeating: 1, count: 15), "pcm-s16-48000", false, #line),
            (Data(), "pcm-s16-48000", false, #line),
        ]
        for row in rows {
            var hello = WireFixtures.hello()
            hello.capture = .with { $0.captureID = row.captureID; $0.encoding = row.encoding }
            if row.valid {
                let validated = try ValidatedHello(hello)
                XCTAssertEqual(validated.capture, ValidatedHello.CaptureOfStream(id: id, encoding: row.encoding), line: row.line)
            } else {
                XCTAssertThrowsError(try ValidatedHello(hello), line: row.line) { error in
                    XCTAssertEqual((error as? WireError)?.code, .invalidMessage, line: row.line)
                }
            }
        }
        XCTAssertNil(try ValidatedHello(WireFixtures.hello()).capture, "no capture named")
    }

    func testStreamIDMustBe16Bytes() throws {
        var hello = WireFixtures.hello()
        hello.streamID = Data(repeating: 7, count: 15)
        XCTAssertThrowsError(try ValidatedHello(hello)) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
            XCTAssertTrue(String(describing: error).contains("stream_id: 15 bytes"))
        }
    }

    func testStreamNameLengthLimit() throws {
        var hello = WireFixtures.hello()
        hello.streamName = String(repeating: "é", count: 128)  // 256 UTF-8 bytes
        XCTAssertThrowsError(try ValidatedHello(hello)) { error in
            XCTAssertEqual(
                error as? WireError,
                .invalidField(message: .hello, field: "stream_name", reason: "256 bytes exceeds the limit of 255 bytes"))
        }
        hello.streamName = String(repeating: "é", count: 127)
        XCTAssertNoThrow(try ValidatedHello(hello))
    }

    func testMissingAndInvalidFormats() throws {
        var hello = WireFixtures.hello()
        hello.clearFormat()
        XCTAssertThrowsError(try ValidatedHello(hello)) { XCTAssertEqual($0 as? WireError, .missingFormat) }
        hello = WireFixtures.hello()
        hello.format.bitsPerChannel = 12
        XCTAssertThrowsError(try ValidatedHello(hello)) { error in
            XCTAssertEqual(error as? WireError, .badFormat(.unsupportedPCM(bits: 12, flags: 0x0C)))
            XCTAssertEqual((error as? WireError)?.code, .badFormat)
        }
    }

    func testPCMHelloWithMagicCookieIsRefused() throws {
        var hello = WireFixtures.hello()
        hello.magicCookie = Data([1, 2, 3])
        XCTAssertThrowsError(try ValidatedHello(hello)) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
    }

    // MARK: Resume

    func testResumeBeforeTheSendersOldestHeldSequenceIsRefused() throws {
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        _ = try state.receive(.hello(WireFixtures.hello(resumeFrom: 42)))
        assertError(.cannotResume(requested: 40, oldestHeld: 42, heldUntilSampleTime: 156)) {
            try state.accept(resumingAt: StreamPosition(nextSequence: 40, nextSampleTime: 156))
        }
    }

    func testResumeContinuesAtTheReceiversPoint() throws {
        var state = try streaming(resume: StreamPosition(nextSequence: 45, nextSampleTime: 176), resumeFrom: 42)
        // 42..44 are resent: duplicates, ignored (and acked again by the caller).
        for sequence: UInt64 in 42...44 {
            XCTAssertEqual(
                try state.receive(.audioData(WireFixtures.pcmAudio(sequence: sequence, firstSampleTime: Int64(sequence - 1) * 4))),
                .ignoreDuplicate(sequence: sequence))
        }
        let next = WireFixtures.pcmAudio(sequence: 45, firstSampleTime: 176)
        XCTAssertEqual(try state.receive(.audioData(next)), .writeAudio(next))
        XCTAssertEqual(state.nextSampleTime, 180)
    }

    // MARK: Sequences and sample times

    func testNextDuplicateAndGap() throws {
        var state = try streaming()
        let first = WireFixtures.pcmAudio(sequence: 1, firstSampleTime: 0)
        XCTAssertEqual(try state.receive(.audioData(first)), .writeAudio(first))
        XCTAssertEqual(try state.receive(.audioData(first)), .ignoreDuplicate(sequence: 1))
        XCTAssertEqual(state.highestReceivedSequence, 1)
        assertError(.sequenceGap(expected: 2, received: 3)) {
            _ = try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 3, firstSampleTime: 4)))
        }
        XCTAssertEqual(state.phase, .closed)
    }

    func testSequenceZeroIsInvalid() throws {
        var state = try streaming()
        XCTAssertThrowsError(try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 0)))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
    }

    func testSampleTimeMustContinueTheTimeline() throws {
        var state = try streaming()
        _ = try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 1, firstSampleTime: 0)))
        assertError(.sampleTimeMismatch(sequence: 2, expected: 4, received: 5)) {
            _ = try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 2, firstSampleTime: 5)))
        }
    }

    func testGapAdvancesTheTimeline() throws {
        var state = try streaming()
        _ = try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 1, firstSampleTime: 0)))
        let gap = WireFixtures.gap(sequence: 2, sampleTime: 4, length: 480)
        XCTAssertEqual(try state.receive(.gap(gap)), .recordGap(gap))
        XCTAssertEqual(state.nextSampleTime, 484)
        let after = WireFixtures.pcmAudio(sequence: 3, firstSampleTime: 484)
        XCTAssertEqual(try state.receive(.audioData(after)), .writeAudio(after))
        XCTAssertEqual(try state.receive(.gap(gap)), .ignoreDuplicate(sequence: 2))
    }

    func testGapAtTheWrongTimeOrEmpty() throws {
        var state = try streaming()
        assertError(.sampleTimeMismatch(sequence: 1, expected: 0, received: 4)) {
            _ = try state.receive(.gap(WireFixtures.gap(sequence: 1, sampleTime: 4)))
        }
        var other = try streaming()
        XCTAssertThrowsError(try other.receive(.gap(WireFixtures.gap(sequence: 1, sampleTime: 0, length: 0)))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
    }

    /// A gap cannot carry the stream beyond the time that passed since its start (plus an hour for
    /// a clock running ahead): one 76-byte Gap of 2^40 frames used to make the receiver write silence
    /// until the disk was full. Table: (seconds since the start on the receiver's clock, gap seconds, accepted).
    func testAGapIsHeldToTheTimeThatPassedSinceTheStreamsStart() throws {
        let rate = Int64(WireFixtures.pcmFormat.sampleRate)
        let hour = ReceiverStreamState.gapClockMargin
        let cases: [(elapsed: Int64, gapSeconds: Int64, accepted: Bool)] = [
            (10, 5, true),  // a device lost for 5 s in a 10 s old stream
            (10, hour, true),  // a sender clock up to an hour ahead
            (10, hour + 20, false),
            (0, hour + 1, false),
            (-600, hour, true),  // a start time in the future (a clock ahead) counts as no time passed
            (-600, hour + 1, false),
            (86_400, 86_000, true),  // a day-long outage a day into the stream
        ]
        for row in cases {
            var state = try streaming()
            let now = WireFixtures.startUnixNs + row.elapsed * 1_000_000_000
            let gap = WireFixtures.gap(sequence: 1, sampleTime: 0, length: UInt64(row.gapSeconds * rate - 1))
            if row.accepted {
                XCTAssertEqual(try state.receive(.gap(gap), atUnixNanoseconds: now), .recordGap(gap), "\(row)")
            } else {
                XCTAssertThrowsError(try state.receive(.gap(gap), atUnixNanoseconds: now), "\(row)") { error in
                    XCTAssertEqual((error as? WireError)?.code, .invalidMessage, "\(row)")
                    XCTAssertTrue("\(error)".contains("a gap cannot be longer than the time that passed"), "\(error)")
                }
            }
        }
        // The 2^40-frame gap of the trial, three seconds into a stream.
        var state = try streaming()
        XCTAssertThrowsError(try state.receive(.gap(WireFixtures.gap(sequence: 1, sampleTime: 0, length: 1 << 40)), atUnixNanoseconds: WireFixtures.startUnixNs + 3_000_000_000))
        XCTAssertEqual(state.phase, .closed)
    }

    // MARK: Sizes

    func testPCMPayloadMustBePacketCountTimesBytesPerFrame() throws {
        var state = try streaming()
        var audio = WireFixtures.pcmAudio()
        audio.payload.removeLast()
        assertError(.payloadSizeMismatch(sequence: 1, expectedBytes: 16, receivedBytes: 15)) {
            _ = try state.receive(.audioData(audio))
        }
    }

    func testPCMFrameCountMustMatchPackets() throws {
        var state = try streaming()
        var audio = WireFixtures.pcmAudio()
        audio.frameCount = 0
        assertError(.frameCountMismatch(sequence: 1, expected: 4, received: 0)) { _ = try state.receive(.audioData(audio)) }
    }

    func testPCMWithPacketSizesIsInvalid() throws {
        var state = try streaming()
        var audio = WireFixtures.pcmAudio()
        audio.packetSizes = [4, 4, 4, 4]
        XCTAssertThrowsError(try state.receive(.audioData(audio))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
    }

    func testVBRPacketSizesCountAndSum() throws {
        let resume = StreamPosition(nextSequence: 7, nextSampleTime: 17_280)
        var state = try streaming(format: WireFixtures.opusFormat, resume: resume)
        let valid = WireFixtures.vbrAudio()
        XCTAssertEqual(try state.receive(.audioData(valid)), .writeAudio(valid))
        XCTAssertEqual(state.nextSampleTime, 17_280 + 2880)

        var countWrong = try streaming(format: WireFixtures.opusFormat, resume: resume)
        var audio = WireFixtures.vbrAudio()
        audio.packetSizes = [5, 7]
        assertError(.packetSizeCountMismatch(sequence: 7, packetCount: 3, sizeCount: 2)) {
            _ = try countWrong.receive(.audioData(audio))
        }

        var sumWrong = try streaming(format: WireFixtures.opusFormat, resume: resume)
        audio = WireFixtures.vbrAudio()
        audio.packetSizes = [5, 3, 5]
        assertError(.packetSizesSumMismatch(sequence: 7, sizesSum: 13, payloadBytes: 12)) {
            _ = try sumWrong.receive(.audioData(audio))
        }
    }

    // MARK: End of stream

    func testEndOfStreamChecksLastSequenceAndEndTime() throws {
        var state = try streaming()
        _ = try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 1, firstSampleTime: 0)))
        _ = try state.receive(.gap(WireFixtures.gap(sequence: 2, sampleTime: 4, length: 480)))
        _ = try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 3, firstSampleTime: 484)))

        var early = state
        assertError(.endOfStreamSequenceMismatch(lastReceived: 3, claimed: 4)) {
            _ = try early.receive(.endOfStream(WireFixtures.endOfStream(last: 4, endSampleTime: 488)))
        }
        var wrongTime = state
        assertError(.endOfStreamSampleTimeMismatch(expected: 488, claimed: 500)) {
            _ = try wrongTime.receive(.endOfStream(WireFixtures.endOfStream(last: 3, endSampleTime: 500)))
        }
        let end = WireFixtures.endOfStream(last: 3, endSampleTime: 488)
        XCTAssertEqual(try state.receive(.endOfStream(end)), .finishStream(end))
        XCTAssertEqual(state.phase, .ended)
        XCTAssertEqual(try state.receive(.heartbeat(WireFixtures.heartbeat())), .heartbeat)
        XCTAssertThrowsError(try state.receive(.audioData(WireFixtures.pcmAudio(sequence: 4, firstSampleTime: 488)))) { error in
            XCTAssertEqual((error as? WireError)?.code, .unexpectedMessage)
        }
    }

    func testRemainderFramesOnlyForVBRAndBelowAPacket() throws {
        var pcm = try streaming()
        var end = WireFixtures.endOfStream(last: 0, endSampleTime: 0)
        end.remainderFrames = 10
        XCTAssertThrowsError(try pcm.receive(.endOfStream(end))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }
        var opus = try streaming(format: WireFixtures.opusFormat, resume: StreamPosition(nextSequence: 7, nextSampleTime: 17_280))
        _ = try opus.receive(.audioData(WireFixtures.vbrAudio()))
        var opusEnd = WireFixtures.endOfStream(last: 7, endSampleTime: 17_280 + 2_880)
        opusEnd.remainderFrames = 312
        XCTAssertEqual(try opus.receive(.endOfStream(opusEnd)), .finishStream(opusEnd))
    }

    func testOpusInputThatCannotBeAStreamIsAnInvalidMessage() throws {
        // Hello: frames per packet, priming, and the OpusHead.
        func refuses(_ change: (inout Capture_V1_Hello) -> Void, _ what: String) {
            var hello = WireFixtures.hello(format: WireFixtures.opusFormat)
            change(&hello)
            XCTAssertThrowsError(try ValidatedHello(hello), what) { error in
                XCTAssertEqual((error as? WireError)?.code, .invalidMessage, what)
            }
        }
        func head(channels: UInt8, family: UInt8 = 0, tail: [UInt8] = []) -> Data {
            Data(Array("OpusHead".utf8) + [1, channels, 0x38, 0x01, 0x80, 0xBB, 0, 0, 0, 0, family] + tail)
        }
        refuses({ $0.format.framesPerPacket = 7 }, "7 frames per packet")
        refuses({ $0.format.framesPerPacket = UInt32.max }, "2^32-1 frames per packet")
        refuses({ $0.format.framesPerPacket = 5_880 }, "more than 120 ms")
        refuses({ $0.primingFrames = 1 << 31 }, "priming of 2^31")
        refuses({ $0.format = Capture_V1_StreamFormat(StreamFormat.opus(channels: 6, framesPerPacket: 960)) }, "6 channels without a cookie")
        refuses({ $0.magicCookie = Data("OpusTags".utf8) + Data(count: 11) }, "not an OpusHead")
        refuses({ $0.magicCookie = head(channels: 1) }, "1 channel in the head, 2 in the format")
        refuses({
            $0.format = Capture_V1_StreamFormat(StreamFormat.opus(channels: 6, framesPerPacket: 960))
            $0.magicCookie = head(channels: 6, family: 1, tail: [4, 2, 0, 4, 1, 2, 3, 9])
        }, "a mapping to stream 9 of 6")
        var good = WireFixtures.hello(format: WireFixtures.opusFormat)
        good.magicCookie = head(channels: 2)
        good.primingFrames = 312
        XCTAssertNoThrow(try ValidatedHello(good))
        good.format = Capture_V1_StreamFormat(StreamFormat.opus(channels: 6, framesPerPacket: 960))
        good.magicCookie = head(channels: 6, family: 1, tail: [4, 2, 0, 4, 1, 2, 3, 5])
        XCTAssertNoThrow(try ValidatedHello(good), "5.1 with its mapping")

        // AudioData: an empty packet.
        var empty = try streaming(format: WireFixtures.opusFormat, resume: StreamPosition(nextSequence: 7, nextSampleTime: 17_280))
        var audio = WireFixtures.vbrAudio()
        audio.packetSizes = [0, audio.packetSizes[0] + audio.packetSizes[1], audio.packetSizes[2]]
        XCTAssertThrowsError(try empty.receive(.audioData(audio))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
        }

        // EndOfStream: priming and remainder longer than the audio.
        var short = try streaming(format: WireFixtures.opusFormat)
        var end = WireFixtures.endOfStream(last: 0, endSampleTime: 0)
        end.remainderFrames = 312
        XCTAssertThrowsError(try short.receive(.endOfStream(end))) { error in
            XCTAssertEqual((error as? WireError)?.code, .invalidMessage)
            XCTAssertTrue("\(error)".contains("exceed the stream's 0 frames"), "\(error)")
        }
    }

    func testFatalPeerErrorClosesAndNonFatalDoesNot() throws {
        var state = try streaming()
        var warning = Capture_V1_Error()
        warning.message = "disk almost full"
        XCTAssertEqual(try state.receive(.error(warning)), .peerError(warning))
        XCTAssertEqual(state.phase, .streaming)
        let fatal = WireError.sequenceGap(expected: 1, received: 2).errorFrame
        XCTAssertEqual(try state.receive(.error(fatal)), .peerError(fatal))
        XCTAssertEqual(state.phase, .closed)
    }
}

/// A test setup step did not get the action it needs.
struct UnexpectedAction: Error, CustomStringConvertible {
    let description: String
}
