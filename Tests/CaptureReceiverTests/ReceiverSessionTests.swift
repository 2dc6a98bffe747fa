@testable import CaptureReceiver
import CaptureCore
import CaptureWire
import Foundation
import XCTest

/// The receiver's session machine, event by event: every path a connection can take, including
/// the ones that used to need timed real processes (a close while the file opens, a finish failing
/// after the sender left, a shutdown during a resume, backpressure).
final class ReceiverSessionTests: XCTestCase {
    static let stream = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()
    static let path = "/srv/rec/studio-a_20260101T000000Z.caf"
    static let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)

    static var helloMessage: Capture_V1_Hello {
        .with {
            $0.protocolVersion = 1
            $0.streamID = stream.wireBytes
            $0.streamName = "studio-a"
            $0.format = Capture_V1_StreamFormat(format)
            $0.sourceHost = "field-1"
        }
    }

    static var hello: ValidatedHello {
        get throws { try ValidatedHello(helloMessage) }
    }

    /// `frames` s16 stereo frames at `sequence`, starting at `first`.
    static func audio(_ sequence: UInt64, first: Int64, frames: Int = 15) -> Capture_V1_AudioData {
        .with {
            $0.sequence = sequence
            $0.firstSampleTime = first
            $0.packetCount = UInt32(frames)
            $0.frameCount = UInt32(frames)
            $0.payload = Data(repeating: UInt8(sequence), count: frames * 4)
        }
    }

    static func write(_ sequence: UInt64, first: Int64, frames: Int = 15) -> ReceiverSessionAction {
        .write(AudioWrite(
            sequence: sequence, payload: Data(repeating: UInt8(sequence), count: frames * 4), packetSizes: [],
            frameCount: frames, endSampleTime: first + Int64(frames)))
    }

    static func ack(_ sequence: UInt64, _ sampleTime: Int64) -> ReceiverSessionAction {
        .send(.ack(.with { $0.durableSequence = sequence; $0.durableSampleTime = sampleTime }))
    }

    static func error(_ code: Capture_V1_Error.Code, _ message: String) -> ReceiverSessionAction {
        .send(.error(.with { $0.code = code; $0.message = message; $0.fatal = true }))
    }

    static let finished = FinishedFile(path: path, frames: 30, packets: 30, bytes: 120, gaps: 0)

    /// Drives a session through `steps`, checking each event's actions (log lines compared too).
    private func run(
        _ session: inout ReceiverSession, _ steps: [(ReceiverSessionEvent, [ReceiverSessionAction])],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        for (index, (event, expected)) in steps.enumerated() {
            let actions = session.handle(event)
            XCTAssertEqual(actions, expected, "step \(index + 1): \(event)", file: file, line: line)
        }
    }

    /// A session whose stream is open and streaming (handshake done).
    private func streamingSession(settings: ReceiverSession.Settings = .init()) throws -> ReceiverSession {
        var session = ReceiverSession(settings: settings)
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        _ = session.handle(.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false))
        XCTAssertEqual(session.state.readingPausedWhileStreaming, false)
        return session
    }

    private static let keptResumableLog = ReceiverSessionAction.log(.init(
        .warning, "connection lost before end of stream; the file stays open for the sender to resume",
        ["file": path, "resume-window-s": "86400"]))

    // MARK: - The whole life of a stream

    func testANewStreamFromHelloToEndAccepted() throws {
        var session = ReceiverSession()
        let hello = try Self.hello
        run(&session, [
            (.preambleReceived(version: 1), []),
            (.messageReceived(.hello(Self.helloMessage)), [.decide(hello)]),
            (.helloDecided(.accepted), [.openFile(hello, mayCreate: true)]),
            (.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false), [
                .cancelHandshakeTimeout,
                .send(.helloAccepted(.with {
                    $0.nextSequence = 1
                    $0.nextSampleTime = 0
                    $0.heartbeatIntervalMs = 5_000
                    $0.maxFrameBytes = UInt32(WireProtocol.defaultMaxFrameBytes)
                    $0.fileName = "studio-a_20260101T000000Z.caf"
                    $0.resumed = false
                    $0.acceptedFrameTypes = [10, 11]
                })),
                .streamAccepted(StreamAccepted(hello: hello, filePath: Self.path, resumed: false, durableSampleTime: 0)),
                .log(.init(.info, "stream opened", ["file": Self.path, "format": "\(Self.format)", "source": "field-1", "next-sequence": "1"])),
            ]),
            (.messageReceived(.audioData(Self.audio(1, first: 0))), [Self.write(1, first: 0)]),
            (.messageReceived(.audioData(Self.audio(2, first: 15))), [Self.write(2, first: 15)]),
            (.durable(StreamPosition(lastSequence: 2, endSampleTime: 30)), [Self.ack(2, 30)]),
            (.messageReceived(.endOfStream(.with { $0.lastSequence = 2; $0.endSampleTime = 30; $0.reason = "stopped" })), [
                .finishFile(StreamEnd(position: StreamPosition(lastSequence: 2, endSampleTime: 30), reason: "stopped")),
            ]),
            (.fileFinished(.success(Self.finished)), [
                .streamReleased(StreamReleased(streamID: Self.stream, durableSampleTime: 30, resumable: false)),
                .forgetStream(Self.stream),
                .log(.init(.notice, "stream closed", [
                    "path": Self.path, "frames": "30", "bytes": "120", "gaps": "0", "duration": "0.001 s", "reason": "stopped",
                ])),
                .send(.endAccepted(.with { $0.fileName = "studio-a_20260101T000000Z.caf"; $0.totalFrames = 30; $0.totalPackets = 30; $0.lastSequence = 2; $0.endSampleTime = 30 })),
                .close,
            ]),
            (.connectionClosed, []),
        ])
        XCTAssertTrue(session.isFinished)
    }

    /// A marker is recorded in its sequence's place and acknowledged like audio once durable; its
    /// resend after a reconnect is a duplicate that only repeats the Ack.
    func testAMarkerIsRecordedAndAcknowledgedInItsPlace() throws {
        var session = try streamingSession()
        let marker = Capture_V1_Marker.with { $0.sequence = 2; $0.sampleTime = 15; $0.label = "goal" }
        run(&session, [
            (.messageReceived(.audioData(Self.audio(1, first: 0))), [Self.write(1, first: 0)]),
            (.messageReceived(.marker(marker)), [
                .log(.init(.info, "marker in stream", ["sample": "15", "label": "goal"], repeatable: true)),
                .recordMarker(marker),
            ]),
            (.durable(StreamPosition(lastSequence: 1, endSampleTime: 15)), [Self.ack(1, 15)]),
            (.durable(StreamPosition(lastSequence: 2, endSampleTime: 15)), [Self.ack(2, 15)]),
            (.messageReceived(.marker(marker)), [Self.ack(2, 15)]),
            (.messageReceived(.audioData(Self.audio(3, first: 15))), [Self.write(3, first: 15)]),
        ])
    }

    func testAResumeReopensTheFileAndSaysSo() throws {
        var session = ReceiverSession()
        let hello = try Self.hello
        _ = session.handle(.preambleReceived(version: 1))
        XCTAssertEqual(session.handle(.messageReceived(.hello(Self.helloMessage))), [.decide(hello)])
        XCTAssertEqual(session.handle(.helloDecided(.accepted)), [.openFile(hello, mayCreate: true)])
        let actions = session.handle(.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 41, nextSampleTime: 600), resumed: true))
        guard case .send(.helloAccepted(let accepted)) = actions[1] else { return XCTFail("HelloAccepted expected: \(actions)") }
        XCTAssertEqual([accepted.nextSequence, UInt64(accepted.nextSampleTime)], [41, 600])
        XCTAssertTrue(accepted.resumed)
        XCTAssertEqual(session.lastDurable, StreamPosition(lastSequence: 40, endSampleTime: 600))
        XCTAssertEqual(session.handle(.messageReceived(.audioData(Self.audio(40, first: 585)))), [Self.ack(40, 600)], "a resend of what is durable is acknowledged again")
        XCTAssertEqual(session.handle(.messageReceived(.audioData(Self.audio(41, first: 600)))), [Self.write(41, first: 600)])
    }

    // MARK: - The connection ends first

    func testACloseWhileTheFileOpensReleasesTheFileOnceOpen() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        run(&session, [
            (.connectionClosed, []),
            (.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false), [.releaseFile(.keepResumable)]),
            (.fileReleased(.success(nil)), [Self.keptResumableLog, .forgetStream(Self.stream)]),
        ])
        XCTAssertTrue(session.isFinished)
    }

    func testACloseWhileTheFileOpensWithNoResumeWindowFinalizesIt() throws {
        var session = ReceiverSession(settings: .init(keepsInterruptedStreams: false, resumeWindow: .zero))
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        run(&session, [
            (.connectionClosed, []),
            (.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false), [
                .log(.init(.warning, "connection lost before end of stream; finalizing the file with what arrived", ["file": Self.path])),
                .releaseFile(.finalizeIncomplete),
            ]),
            (.fileReleased(.success(Self.finished)), [
                .log(.init(.notice, "stream closed (incomplete)", ["path": Self.path, "frames": "30", "bytes": "120", "gaps": "0"])),
                .forgetStream(Self.stream),
            ]),
        ])
        XCTAssertTrue(session.isFinished)
    }

    func testALostConnectionKeepsTheStreamResumable() throws {
        var session = try streamingSession()
        run(&session, [
            (.messageReceived(.audioData(Self.audio(1, first: 0))), [Self.write(1, first: 0)]),
            (.connectionClosed, [.releaseFile(.keepResumable)]),
            (.durable(StreamPosition(lastSequence: 1, endSampleTime: 15)), []),
            (.fileReleased(.success(nil)), [
                Self.keptResumableLog, .streamReleased(StreamReleased(streamID: Self.stream, durableSampleTime: 15, resumable: true)), .forgetStream(Self.stream),
            ]),
        ])
        XCTAssertTrue(session.isFinished)
    }

    func testAFinishFailingAfterTheSenderLeftKeepsTheFileResumable() throws {
        var session = try streamingSession()
        run(&session, [
            (.messageReceived(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 })), [.finishFile(StreamEnd(position: StreamPosition(lastSequence: 0, endSampleTime: 0)))]),
            (.connectionClosed, []),
            (.fileFinished(.failure(.writeFailed("no space left on device"))), [.releaseFile(.keepResumable)]),
            (.fileReleased(.success(nil)), [
                Self.keptResumableLog, .streamReleased(StreamReleased(streamID: Self.stream, durableSampleTime: 0, resumable: true)), .forgetStream(Self.stream),
            ]),
        ])
        XCTAssertTrue(session.isFinished)
    }

    func testAFinishFailingWhileConnectedRefusesAndKeepsTheFileResumable() throws {
        var session = try streamingSession()
        _ = session.handle(.messageReceived(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 })))
        let message = "could not finish studio-a_20260101T000000Z.caf: no space left on device"
        run(&session, [
            (.fileFinished(.failure(.writeFailed("no space left on device"))), [
                .log(.init(.warning, "refused: \(message)", ["code": "storageFailed"])),
                Self.error(.storageFailed, message),
                .close,
                .releaseFile(.keepResumable),
            ]),
        ])
    }

    func testAFinishAfterTheSenderLeftStillForgetsTheFinishedStream() throws {
        var session = try streamingSession()
        _ = session.handle(.messageReceived(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 })))
        _ = session.handle(.connectionClosed)
        let actions = session.handle(.fileFinished(.success(Self.finished)))
        XCTAssertEqual(actions.filter { if case .log = $0 { return false } else { return true } }, [.streamReleased(StreamReleased(streamID: Self.stream, durableSampleTime: 0, resumable: false)), .forgetStream(Self.stream)], "no EndAccepted to a closed connection")
        XCTAssertTrue(session.isFinished)
    }

    // MARK: - Shutdown

    func testAShutdownDuringAResumeFinalizesTheFileOnceOpenAndKeepsItResumable() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        let message = "the receiver is shutting down; reconnect later"
        run(&session, [
            (.shutdownRequested, [
                .log(.init(.warning, "refused: \(message)", ["code": "shuttingDown"])),
                Self.error(.shuttingDown, message),
                .close,
            ]),
            (.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 5, nextSampleTime: 60), resumed: true), [.releaseFile(.finalizeResumable)]),
            (.connectionClosed, []),
            (.fileReleased(.success(nil)), [
                .log(.init(.notice, "shutting down: file finalized; its sender can resume it in the same file after a restart", [
                    "file": Self.path, "resume-window-s": "86400",
                ])),
                .forgetStream(Self.stream),
            ]),
        ])
        XCTAssertTrue(session.isFinished)
    }

    func testAShutdownWhileStreamingLetsGoOfTheFileAtOnce() throws {
        var session = try streamingSession()
        let actions = session.handle(.shutdownRequested)
        XCTAssertEqual(Array(actions.suffix(3)), [Self.error(.shuttingDown, "the receiver is shutting down; reconnect later"), .close, .releaseFile(.finalizeResumable)])
        XCTAssertEqual(session.handle(.messageReceived(.audioData(Self.audio(1, first: 0)))), [], "nothing is read after the close")
    }

    // MARK: - Refusals and failures

    func testARefusedHelloSendsItsErrorAndReservesNothing() throws {
        /// Names the stream limit as capture-recv does: the session words the refusal with its naming.
        struct StreamLimitFlag: SettingNaming {
            func name(of setting: Setting) -> String { setting == .maximumStreams ? "--max-streams" : LibrarySettingNames().name(of: setting) }
        }
        var session = ReceiverSession(settingNames: StreamLimitFlag())
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        let message = "the receiver already records 4 streams; try again later or raise --max-streams"
        run(&session, [
            (.helloDecided(.refused(.tooManyStreams(maximumStreams: 4))), [
                .log(.init(.warning, "refused: \(message)", ["code": "tooManyStreams"])),
                Self.error(.tooManyStreams, message),
                .close,
            ]),
            (.connectionClosed, []),
        ])
        XCTAssertTrue(session.isFinished)
        XCTAssertNil(session.streamID)
    }

    func testADecisionArrivingAfterTheCloseGivesTheStreamBack() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        XCTAssertEqual(session.handle(.connectionClosed), [])
        XCTAssertEqual(session.handle(.helloDecided(.accepted)), [.forgetStream(Self.stream)])
        XCTAssertTrue(session.isFinished)
    }

    func testAResumeOfAStreamTheFolderDoesNotHoldMakesNoFile() throws {
        var session = ReceiverSession()
        var message = Self.helloMessage
        message.resumeFromSequence = 41
        _ = session.handle(.preambleReceived(version: 1))
        let hello = try ValidatedHello(message)
        _ = session.handle(.messageReceived(.hello(message)))
        XCTAssertEqual(session.handle(.helloDecided(.accepted)), [.openFile(hello, mayCreate: false)], "only an unfinished file may take it")
        let actions = session.handle(.fileOpenFailed(.notResumable))
        XCTAssertEqual(actions.first, .forgetStream(Self.stream))
        guard case .send(.error(let frame)) = actions.dropLast().last else { return XCTFail("an Error frame: \(actions)") }
        XCTAssertEqual(frame.code, .sequenceGap)
        XCTAssertFalse(frame.hasHeldUntilSampleTime, "a stream this receiver holds nothing of: no recording end to name")
        XCTAssertEqual(actions.last, .close)
        XCTAssertEqual(session.state, .done(.notOpened(hello)))
    }

    func testAFileThatCannotBeOpenedIsRefusedAndTheResumableStreamKept() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        let actions = session.handle(.fileOpenFailed(.cannotCreate("cannot reopen \(Self.path): permission denied")))
        let message = "the receiver cannot store the stream now: cannot reopen \(Self.path): permission denied; the sender keeps the audio and retries"
        XCTAssertEqual(actions, [
            .forgetStream(Self.stream),
            .log(.init(.error, "cannot store the stream; the sender keeps its audio and retries", ["error": "cannot reopen \(Self.path): permission denied"])),
            .log(.init(.warning, "refused: \(message)", ["code": "storageFailed"])),
            Self.error(.storageFailed, message),
            .close,
        ])
    }

    func testAResumeInAnotherFormatIsRefusedAsABadFormat() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        let actions = session.handle(.fileOpenFailed(.formatChanged("recorded as A but now sends B")))
        XCTAssertEqual(actions.first, .forgetStream(Self.stream))
        XCTAssertTrue(actions.contains(Self.error(.badFormat, "recorded as A but now sends B")))
    }

    func testAStreamAnotherReceiverHoldsIsRefusedAsBusy() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        let message = "stream X is being recorded by another receiver; try again later"
        XCTAssertEqual(session.handle(.fileOpenFailed(.streamBusy("stream X is being recorded by another receiver"))), [
            .forgetStream(Self.stream),
            .log(.init(.warning, "refused: \(message)", ["code": "streamBusy"])),
            Self.error(.streamBusy, message),
            .close,
        ])
        XCTAssertEqual(session.state, .done(.notOpened(try Self.hello)))
    }

    /// Issue 27, item 2: after a segment cut, a storage failure names the file that failed (the
    /// segment being written, or one that could not be begun), not the stream's first file; and a
    /// file named otherwise than its template says is logged with both names.
    func testAFailureAfterASegmentCutNamesTheFileThatFailed() throws {
        var session = try streamingSession()
        let naming = FileNaming(intended: "studio-a_20260101T000010Z.caf", used: "studio-a_20260101T000010Z+6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b.caf", carriesStreamID: true)
        let segment = "/srv/rec/" + naming.used
        XCTAssertEqual(session.handle(.segmentStarted(path: segment, naming: naming)), [
            .log(.init(.debug, "next segment file", ["file": segment])),
            .log(.init(.notice, "the file name is taken; the stream is recorded under a name that carries its stream id", [
                "intended": naming.intended, "file": naming.used,
            ])),
        ])
        XCTAssertEqual(session.currentFilePath, segment)
        XCTAssertEqual(session.filePath, Self.path, "HelloAccepted named the first file")
        var failing = session
        let message = "the receiver cannot write \(naming.used): disk full"
        XCTAssertEqual(failing.handle(.storageFailed(.writeFailed("disk full"))), [
            .log(.init(.error, "cannot write the stream", ["error": "disk full"])),
            .log(.init(.warning, "refused: \(message)", ["code": "storageFailed"])),
            Self.error(.storageFailed, message),
            .close,
            .releaseFile(.keepResumable),
        ])
        let next = "the receiver cannot write studio-a_20260101T000020Z.caf: cannot create /srv/rec/studio-a_20260101T000020Z.caf: no space"
        let actions = session.handle(.storageFailed(.cannotCreate("cannot create /srv/rec/studio-a_20260101T000020Z.caf: no space"), file: "/srv/rec/studio-a_20260101T000020Z.caf"))
        XCTAssertTrue(actions.contains(Self.error(.storageFailed, next)), "\(actions)")
    }

    func testAFileNamedAfterANumberIsLoggedWithItsIntendedName() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        let naming = FileNaming(intended: "studio-a_20260101T000000Z.caf", used: "studio-a_20260101T000000Z-2.caf", carriesStreamID: false)
        let actions = session.handle(.fileOpened(path: "/srv/rec/" + naming.used, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false, naming: naming))
        XCTAssertEqual(actions.last, .log(.init(.notice, "the file name is taken; the file is recorded under the next free number", [
            "intended": "studio-a_20260101T000000Z.caf", "file": "studio-a_20260101T000000Z-2.caf",
        ])))
    }

    /// Issue 27, item 5: a stream proven to continue another says so when it opens; one whose
    /// continued stream the receiver no longer knows is opened as a new stream, with a warning.
    func testWhatANewStreamContinuesIsLogged() throws {
        let continued = try XCTUnwrap(UUID(uuidString: "0A0B0C0D-0E0F-4011-8213-141516171819"))
        for (link, expected) in [
            (ContinuationLink.linked(continued, fileEnd: nil), ["continues": "0a0b0c0d-0e0f-4011-8213-141516171819"]),
            (ContinuationLink.unverified(continued), [:]),
        ] {
            var session = ReceiverSession()
            _ = session.handle(.preambleReceived(version: 1))
            _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
            _ = session.handle(.helloDecided(.accepted))
            let actions = session.handle(.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false, continuation: link))
            let opened = actions.compactMap { if case .log(let line) = $0, line.message == "stream opened" { return line } else { return nil } }.first
            XCTAssertEqual(opened?.metadata["continues"], expected["continues"], "\(link)")
            let warning = actions.compactMap { if case .log(let line) = $0, line.level == .warning { return line } else { return nil } }
            if case .unverified = link {
                XCTAssertEqual(warning, [.init(.warning, "the stream says it continues a stream this receiver no longer knows (its record expired, or it was recorded on other storage), so that cannot be proven: it is recorded as a new stream that continues nothing", ["continues": "0a0b0c0d-0e0f-4011-8213-141516171819"])])
            } else {
                XCTAssertEqual(warning, [])
            }
        }
    }

    /// Issue 28, item 5: a continuation's HelloAccepted says where the continued stream's finished
    /// file ends when the receiver knows it, so that the sender claims a join without a hole only
    /// when that is confirmed; otherwise the field is absent.
    func testAContinuationsAcceptanceNamesWhereTheContinuedFileEnds() throws {
        let continued = try XCTUnwrap(UUID(uuidString: "0A0B0C0D-0E0F-4011-8213-141516171819"))
        for (link, expected) in [
            (ContinuationLink.linked(continued, fileEnd: 96_000), Int64?.some(96_000)),
            (ContinuationLink.linked(continued, fileEnd: nil), nil),
            (ContinuationLink.unverified(continued), nil),
            (nil, nil),
        ] {
            var session = ReceiverSession()
            _ = session.handle(.preambleReceived(version: 1))
            _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
            _ = session.handle(.helloDecided(.accepted))
            let actions = session.handle(.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false, continuation: link))
            let accepted = actions.compactMap { if case .send(.helloAccepted(let accepted)) = $0 { return accepted } else { return nil } }.first
            XCTAssertEqual(accepted?.hasContinuedFileEndSampleTime, expected != nil, "\(String(describing: link))")
            if let expected { XCTAssertEqual(accepted?.continuedFileEndSampleTime, expected) }
        }
    }

    func testAStorageFailureRefusesAndKeepsWhatIsDurable() throws {
        var session = try streamingSession()
        let message = "the receiver cannot write studio-a_20260101T000000Z.caf: disk full"
        XCTAssertEqual(session.handle(.storageFailed(.writeFailed("disk full"))), [
            .log(.init(.error, "cannot write the stream", ["error": "disk full"])),
            .log(.init(.warning, "refused: \(message)", ["code": "storageFailed"])),
            Self.error(.storageFailed, message),
            .close,
            .releaseFile(.keepResumable),
        ])
    }

    func testAProtocolErrorMidStreamClosesAndKeepsTheFile() throws {
        var session = try streamingSession()
        let actions = session.handle(.messageReceived(.audioData(Self.audio(3, first: 0))))
        XCTAssertEqual(Array(actions.suffix(2)), [.close, .releaseFile(.keepResumable)])
        guard case .send(.error(let frame)) = actions.dropLast(2).last else { return XCTFail("an Error frame first: \(actions)") }
        XCTAssertEqual(frame.code, .sequenceGap)
    }

    func testAHandshakeTimeoutWhileTheFileOpensStillReleasesTheFile() throws {
        var session = ReceiverSession(settings: .init(handshakeTimeoutText: "10 s"))
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(Self.helloMessage)))
        _ = session.handle(.helloDecided(.accepted))
        let message = "the handshake did not complete within 10 s"
        run(&session, [
            (.handshakeTimedOut, [
                .log(.init(.warning, message, ["code": "TIMEOUT"])),
                .send(.error(.with { $0.code = .timeout; $0.message = message; $0.fatal = true })),
                .close,
            ]),
            (.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false), [.releaseFile(.keepResumable)]),
        ])
    }

    func testAConnectionTheTransportRefusedGetsNothingMoreFromTheSession() {
        var session = ReceiverSession()
        XCTAssertEqual(session.handle(.closedByTransport), [], "the TLS port's detector sends its own refusal and closes")
        XCTAssertEqual(session.handle(.inputFailed(.truncatedPreamble(receivedBytes: 3))), [], "no second refusal")
        XCTAssertEqual(session.handle(.connectionClosed), [])
        XCTAssertTrue(session.isFinished)
    }

    // MARK: - Timers

    func testNoFrameGoesToAPeerThatNeverSentThePreamble() {
        var session = ReceiverSession(settings: .init(idleTimeoutText: "20 s"))
        XCTAssertEqual(session.handle(.writeIdle(unixNanoseconds: 1)), [], "no heartbeat before the preamble")
        let message = "no data from the sender for 20 s; the connection is considered dead"
        XCTAssertEqual(session.handle(.readIdle), [.log(.init(.warning, message, ["code": "TIMEOUT"])), .close], "no TIMEOUT frame either")
    }

    func testHeartbeatsStartOnlyOnceTheStreamIsAccepted() throws {
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        XCTAssertEqual(session.handle(.writeIdle(unixNanoseconds: 1)), [], "the first frame a sender accepts is HelloAccepted or Error")
        session = try streamingSession()
        XCTAssertEqual(session.handle(.writeIdle(unixNanoseconds: 7)), [.send(.heartbeat(.with { $0.sentUnixNs = 7 }))])
    }

    // MARK: - Backpressure

    func testReadingPausesWhileTooMuchIsNotDurableAndResumesBelowTheMark() throws {
        var session = try streamingSession(settings: .init(pauseReadingAbove: 100, resumeReadingBelow: 50))
        run(&session, [
            (.messageReceived(.audioData(Self.audio(1, first: 0))), [Self.write(1, first: 0)]),
            (.messageReceived(.audioData(Self.audio(2, first: 15))), [Self.write(2, first: 15), .setReading(false)]),
            (.messageReceived(.audioData(Self.audio(3, first: 30))), [Self.write(3, first: 30)]),
            (.durable(StreamPosition(lastSequence: 1, endSampleTime: 15)), [Self.ack(1, 15)]),
            (.durable(StreamPosition(lastSequence: 3, endSampleTime: 45)), [Self.ack(3, 45), .setReading(true)]),
        ])
        XCTAssertEqual(session.state.readingPausedWhileStreaming, false)
        XCTAssertEqual(session.bytesNotDurable, 0)
    }

    func testAPausedConnectionReadsAgainWhenItCloses() throws {
        var session = try streamingSession(settings: .init(pauseReadingAbove: 10, resumeReadingBelow: 5))
        _ = session.handle(.messageReceived(.audioData(Self.audio(1, first: 0))))
        XCTAssertEqual(session.state.readingPausedWhileStreaming, true)
        XCTAssertEqual(session.handle(.transportFailed(reason: "connection reset by peer")), [
            .log(.init(.warning, "connection error", ["error": "connection reset by peer"])),
            .close, .setReading(true), .releaseFile(.keepResumable),
        ])
    }

    // MARK: - What each state holds

    /// What the session's getters say, compared in one go.
    private struct Observed: Equatable {
        var state: String
        var hasHello = false
        var streamID: UUID?
        var filePath: String?
        var lastDurable = StreamPosition(lastSequence: 0, endSampleTime: 0)
        var bytesNotDurable = 0
        var leftResumable = false
        var isFinished = false

        init(
            _ state: String, hasHello: Bool = false, streamID: UUID? = nil, filePath: String? = nil,
            lastDurable: StreamPosition = StreamPosition(lastSequence: 0, endSampleTime: 0), bytesNotDurable: Int = 0,
            leftResumable: Bool = false, isFinished: Bool = false
        ) {
            self.state = state
            self.hasHello = hasHello
            self.streamID = streamID
            self.filePath = filePath
            self.lastDurable = lastDurable
            self.bytesNotDurable = bytesNotDurable
            self.leftResumable = leftResumable
            self.isFinished = isFinished
        }

        init(_ session: ReceiverSession) {
            self.init(
                session.state.caseName, hasHello: session.hello != nil, streamID: session.streamID, filePath: session.filePath,
                lastDurable: session.lastDurable, bytesNotDurable: session.bytesNotDurable,
                leftResumable: session.leftResumable, isFinished: session.isFinished)
        }
    }

    /// The getters read the state's own data: the Hello from deciding on, the stream ID once
    /// accepted, the file and its byte accounting once open (through releasing and after), and
    /// "left resumable" only once the file was let go of.
    func testTheGettersReadWhatEachStateHolds() throws {
        let marker = Capture_V1_Marker.with { $0.sequence = 6; $0.sampleTime = 75; $0.label = "cue" }
        let stream = Self.stream
        let path = Self.path
        func durable(_ sequence: UInt64, _ sampleTime: Int64) -> StreamPosition { StreamPosition(lastSequence: sequence, endSampleTime: sampleTime) }
        let rows: [(ReceiverSessionEvent, Observed)] = [
            (.preambleReceived(version: 1), Observed("handshaking")),
            (.messageReceived(.hello(Self.helloMessage)), Observed("deciding", hasHello: true)),
            (.helloDecided(.accepted), Observed("opening", hasHello: true, streamID: stream)),
            (.fileOpened(path: path, resume: StreamPosition(nextSequence: 5, nextSampleTime: 60), resumed: true),
             Observed("streaming", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(4, 60))),
            (.messageReceived(.audioData(Self.audio(5, first: 60))),
             Observed("streaming", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(4, 60), bytesNotDurable: 60)),
            (.messageReceived(.marker(marker)),
             Observed("streaming", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(4, 60), bytesNotDurable: 60)),
            (.durable(durable(5, 75)),
             Observed("streaming", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(5, 75))),
            (.messageReceived(.audioData(Self.audio(7, first: 75))),
             Observed("streaming", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(5, 75), bytesNotDurable: 60)),
            (.durable(durable(4, 60)),
             Observed("streaming", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(5, 75), bytesNotDurable: 60)),
            (.connectionClosed,
             Observed("releasing keepResumable", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(5, 75), bytesNotDurable: 60)),
            (.durable(durable(7, 90)),
             Observed("releasing keepResumable", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(7, 90))),
            (.fileReleased(.success(nil)),
             Observed("done: resumable", hasHello: true, streamID: stream, filePath: path, lastDurable: durable(7, 90), leftResumable: true, isFinished: true)),
        ]
        var session = ReceiverSession()
        XCTAssertEqual(Observed(session), Observed("handshaking"))
        for (index, (event, expected)) in rows.enumerated() {
            _ = session.handle(event)
            XCTAssertEqual(Observed(session), expected, "step \(index + 1): \(event)")
        }
    }

    /// Every way a session ends names its outcome in `.done`, with the data that outcome has: no
    /// stream, a refused Hello (no stream ID: nothing was reserved), a stream given back before a
    /// file was opened, or the file finished, finalized incomplete or left resumable.
    func testEveryEndingNamesItsOutcomeAndKeepsItsData() throws {
        let hello = try Self.hello
        let openedRecord = ReceiverSession.StreamFileRecord(
            hello: hello, filePath: Self.path, currentFilePath: Self.path, resumed: false,
            durability: ReceiverSession.DurabilityAccount(lastDurable: StreamPosition(lastSequence: 0, endSampleTime: 0)))
        let handshake: [ReceiverSessionEvent] = [.preambleReceived(version: 1), .messageReceived(.hello(Self.helloMessage))]
        let opened: [ReceiverSessionEvent] = handshake + [
            .helloDecided(.accepted), .fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 1, nextSampleTime: 0), resumed: false),
        ]
        let endOfStream = ReceiverSessionEvent.messageReceived(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 }))
        let rows: [(name: String, settings: ReceiverSession.Settings, events: [ReceiverSessionEvent], outcome: ReceiverSession.Outcome, streamID: UUID?, leftResumable: Bool)] = [
            ("closed during the handshake", .init(), [.preambleReceived(version: 1), .connectionClosed], .noStream, nil, false),
            ("Hello refused", .init(), handshake + [.helloDecided(.refused(.tooManyStreams(maximumStreams: 1))), .connectionClosed], .helloRefused(hello), nil, false),
            ("Hello rate limited", .init(), handshake + [.helloDecided(.rateLimited("later", retryAfterMilliseconds: 5)), .connectionClosed], .helloRefused(hello), nil, false),
            ("accepted after the close", .init(), handshake + [.connectionClosed, .helloDecided(.accepted)], .notOpened(hello), Self.stream, false),
            ("file could not be opened", .init(), handshake + [.helloDecided(.accepted), .fileOpenFailed(.streamBusy("busy")), .connectionClosed], .notOpened(hello), Self.stream, false),
            ("finished", .init(), opened + [endOfStream, .fileFinished(.success(Self.finished)), .connectionClosed], .finished(openedRecord), Self.stream, false),
            ("lost, no resume window", .init(keepsInterruptedStreams: false, resumeWindow: .zero), opened + [.connectionClosed, .fileReleased(.success(Self.finished))], .finalizedIncomplete(openedRecord), Self.stream, false),
            ("lost", .init(), opened + [.connectionClosed, .fileReleased(.success(nil))], .resumable(openedRecord), Self.stream, true),
            ("shut down", .init(), opened + [.shutdownRequested, .connectionClosed, .fileReleased(.success(nil))], .resumable(openedRecord), Self.stream, true),
        ]
        for row in rows {
            var session = ReceiverSession(settings: row.settings)
            for event in row.events { _ = session.handle(event) }
            XCTAssertEqual(session.state, .done(row.outcome), row.name)
            XCTAssertEqual(session.streamID, row.streamID, row.name)
            XCTAssertEqual(session.hello, row.outcome == .noStream ? nil : hello, row.name)
            XCTAssertEqual(session.filePath, row.outcome.file == nil ? nil : Self.path, row.name)
            XCTAssertEqual(session.leftResumable, row.leftResumable, row.name)
            XCTAssertTrue(session.isFinished, row.name)
        }
    }

    /// A finish that fails goes back to streaming with the same file and accounting, so a release
    /// then lets go of exactly what was written; it was announced as accepted, so its release is too.
    func testAFailedFinishKeepsTheFileItWasFinishing() throws {
        var session = try streamingSession()
        _ = session.handle(.messageReceived(.audioData(Self.audio(1, first: 0))))
        let record = try XCTUnwrap(session.openedFile)
        XCTAssertEqual(record.durability.bytesNotDurable, 60)
        let end = Capture_V1_EndOfStream.with { $0.lastSequence = 1; $0.endSampleTime = 15 }
        _ = session.handle(.messageReceived(.endOfStream(end)))
        XCTAssertEqual(session.state, .finishing(ReceiverSession.FinishingState(file: record, endOfStream: end)))
        _ = session.handle(.connectionClosed)
        XCTAssertEqual(session.handle(.fileFinished(.failure(.writeFailed("disk full")))), [.releaseFile(.keepResumable)])
        XCTAssertEqual(session.state, .releasing(ReceiverSession.ReleasingState(file: record, mode: .keepResumable, announcedAcceptance: true)))
        XCTAssertEqual(session.bytesNotDurable, 60)
    }

    /// A file opened for a sender that no longer holds the audio the file needs next is let go of
    /// without ever being announced as accepted, so its release announces nothing either.
    func testAFileTheSenderCannotContinueIsReleasedUnannounced() throws {
        var message = Self.helloMessage
        message.resumeFromSequence = 41
        let hello = try ValidatedHello(message)
        var session = ReceiverSession()
        _ = session.handle(.preambleReceived(version: 1))
        _ = session.handle(.messageReceived(.hello(message)))
        _ = session.handle(.helloDecided(.accepted))
        let actions = session.handle(.fileOpened(path: Self.path, resume: StreamPosition(nextSequence: 30, nextSampleTime: 450), resumed: true))
        XCTAssertEqual(Array(actions.suffix(2)), [.close, .releaseFile(.keepResumable)])
        XCTAssertFalse(actions.contains { if case .streamAccepted = $0 { true } else { false } }, "\(actions)")
        let record = ReceiverSession.StreamFileRecord(
            hello: hello, filePath: Self.path, currentFilePath: Self.path, resumed: true,
            durability: ReceiverSession.DurabilityAccount(lastDurable: StreamPosition(lastSequence: 29, endSampleTime: 450)))
        XCTAssertEqual(session.state, .releasing(ReceiverSession.ReleasingState(file: record, mode: .keepResumable, announcedAcceptance: false)))
        XCTAssertEqual(session.handle(.fileReleased(.success(nil))), [Self.keptResumableLog, .forgetStream(Self.stream)])
        XCTAssertEqual(session.state, .done(.resumable(record)))
    }

    /// A segment cut changes the file being written, not the file HelloAccepted named, in every
    /// state that holds the file.
    func testASegmentCutMovesOnlyTheCurrentFile() throws {
        var session = try streamingSession()
        let segment = "/srv/rec/studio-a_20260101T000010Z.caf"
        _ = session.handle(.segmentStarted(path: segment, naming: nil))
        _ = session.handle(.messageReceived(.endOfStream(.with { $0.lastSequence = 0; $0.endSampleTime = 0 })))
        guard case .finishing(let finishing) = session.state else { return XCTFail("finishing: \(session.state)") }
        XCTAssertEqual([finishing.file.filePath, finishing.file.currentFilePath], [Self.path, segment])
        XCTAssertEqual(session.handle(.segmentStarted(path: "/srv/rec/late.caf", naming: nil)), [.log(.init(.debug, "next segment file", ["file": "/srv/rec/late.caf"]))])
        XCTAssertEqual([session.filePath, session.currentFilePath], [Self.path, "/srv/rec/late.caf"])
        var unopened = ReceiverSession()
        XCTAssertEqual(unopened.handle(.segmentStarted(path: segment, naming: nil)), [], "no file, no segment")
        XCTAssertNil(unopened.currentFilePath)
    }
}

extension ReceiverSession.State {
    /// Whether reading is paused, while streaming (nil in any other state).
    var readingPausedWhileStreaming: Bool? {
        guard case .streaming(let streaming) = self else { return nil }
        return streaming.readingPaused
    }

    /// The state's case, as the tables spell it.
    var caseName: String {
        switch self {
        case .handshaking: "handshaking"
        case .deciding: "deciding"
        case .opening: "opening"
        case .streaming(let streaming): streaming.readingPaused ? "streaming, reading paused" : "streaming"
        case .finishing: "finishing"
        case .releasing(let releasing): "releasing \(releasing.mode)"
        case .done(.noStream): "done: no stream"
        case .done(.helloRefused): "done: Hello refused"
        case .done(.notOpened): "done: not opened"
        case .done(.finished): "done: finished"
        case .done(.resumable): "done: resumable"
        case .done(.finalizedIncomplete): "done: finalized incomplete"
        }
    }
}
