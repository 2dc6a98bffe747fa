import CaptureCore
import CaptureSecurity
import CaptureWire
import Foundation
import XCTest

@testable import CaptureReceiver

/// `HelloGate`: who may record what, row by row (the rate limit, the token, the stream table, what
/// a failed open means from a rate-limited address, and whom a stream is bound to). The handler
/// around it: `ReceiverSessionHandlerTests`; over real sockets: the security end-to-end tests.
final class HelloGateTests: XCTestCase {
    private static let peer = "192.0.2.7"
    private static let limited = HelloGate.RateLimit(
        reason: "too many failed authentication attempts from 192.0.2.7; try again in 30 s", retryAfterMilliseconds: 29_500)
    private static let missing = "missing token: this receiver requires a token; give capture-send SenderConfiguration.authToken or set CAPTURE_TOKEN"
    private static let wrong = "wrong token: the token is not one this receiver accepts; check the sender's SenderConfiguration.authToken or CAPTURE_TOKEN"

    func testAuthentication() {
        typealias Row = (
            blocked: Duration?, secret: Bool, token: HelloGate.TokenCheck,
            authentication: HelloGate.Authentication, record: HelloGate.Record, ownershipRequired: Bool, note: String)
        let rows: [Row] = [
            (nil, false, .notRequired, .admitted, .nothing, false, "an open receiver admits anyone"),
            (nil, true, .notRequired, .admitted, .nothing, false, "a resume secret changes nothing when not limited"),
            (nil, false, .accepted, .admitted, .success, false, "a good token: the address's failures are forgotten"),
            (nil, false, .missing, .refused(.missingToken), .failure, false, "no token where one is required"),
            (nil, false, .wrong, .refused(.wrongToken), .failure, false, "a wrong token"),
            (.milliseconds(29_500), false, .accepted, .rateLimited(Self.limited), .nothing, false, "a blocked address without a secret: its token is not even looked at"),
            (.milliseconds(29_500), false, .notRequired, .rateLimited(Self.limited), .nothing, false, "blocked, on an open receiver too"),
            (.milliseconds(29_500), true, .accepted, .admitted, .nothing, true, "blocked with a secret and a good token: it may resume a stream it owns"),
            (.milliseconds(29_500), true, .notRequired, .admitted, .nothing, true, "blocked with a secret, no token required: the same"),
            (.milliseconds(29_500), true, .wrong, .rateLimited(Self.limited), .failure, true, "blocked with a secret and a wrong token: a failure, answered as the block"),
            (.milliseconds(29_500), true, .missing, .rateLimited(Self.limited), .failure, true, "blocked with a secret and no token"),
        ]
        for row in rows {
            var gate = HelloGate()
            let (authentication, record) = gate.authenticate(
                peer: Self.peer, blockedFor: row.blocked, carriesResumeSecret: row.secret, token: row.token)
            XCTAssertEqual(authentication, row.authentication, row.note)
            XCTAssertEqual(record, row.record, row.note)
            XCTAssertEqual(gate.ownershipRequired != nil, row.ownershipRequired, row.note)
            XCTAssertEqual(gate.mayCreate(sessionAllows: true), !row.ownershipRequired, "\(row.note): may create")
            XCTAssertFalse(gate.mayCreate(sessionAllows: false), "\(row.note): never when the session says no")
        }
    }

    /// The block's remaining time in the reason and the retry-after: seconds rounded up, and
    /// milliseconds rounded up, clamped to what the field holds.
    func testTheRetryAfter() {
        let rows: [(remaining: Duration, seconds: String, milliseconds: UInt32)] = [
            (.microseconds(400), "1 s", 1), (.seconds(1), "1 s", 1_000), (.microseconds(59_999_100), "60 s", 60_000),
            (.seconds(1_000_000_000_000), "1000000000000 s", UInt32.max),
        ]
        for row in rows {
            var gate = HelloGate()
            let (authentication, _) = gate.authenticate(peer: Self.peer, blockedFor: row.remaining, carriesResumeSecret: false, token: .accepted)
            XCTAssertEqual(
                authentication,
                .rateLimited(.init(reason: "too many failed authentication attempts from \(Self.peer); try again in \(row.seconds)", retryAfterMilliseconds: row.milliseconds)),
                "\(row.remaining)")
        }
    }

    func testTheDecision() {
        let stream = UUID(uuidString: "00000000-0000-4000-8000-000000000001") ?? UUID()
        let gate = HelloGate()
        let rows: [(HelloGate.Authentication, StreamRegistry.Reservation?, HelloDecision)] = [
            (.admitted, .reserved, .accepted),
            (.admitted, .busy, .refused(.streamBusy(streamID: stream))),
            (.admitted, .full, .refused(.tooManyStreams(maximumStreams: 8))),
            (.refused(.wrongToken), nil, .refused(.wrongToken)),
            (.rateLimited(Self.limited), nil, .rateLimited(Self.limited.reason, retryAfterMilliseconds: Self.limited.retryAfterMilliseconds)),
        ]
        for (authentication, reservation, decision) in rows {
            XCTAssertEqual(gate.decision(authentication, reservation: reservation, streamID: stream, maximumStreams: 8), decision, "\(authentication) \(String(describing: reservation))")
        }
    }

    /// The refusals' codes and words (the library's naming; the command line's: `CommandLineSettingNamesTests`).
    func testTheRefusalsWords() {
        let stream = UUID(uuidString: "00000000-0000-4000-8000-000000000001") ?? UUID()
        let rows: [(HelloRefusal, Capture_V1_Error.Code, String)] = [
            (.missingToken, .authenticationFailed, Self.missing),
            (.wrongToken, .authenticationFailed, Self.wrong),
            (.streamBusy(streamID: stream), .streamBusy, "stream \(stream) is already being received on another connection"),
            (.tooManyStreams(maximumStreams: 8), .tooManyStreams,
             "the receiver already records 8 streams; try again later or raise the stream limit (ReceiverConfiguration.maximumStreams)"),
        ]
        for (refusal, code, text) in rows {
            XCTAssertEqual(refusal.code, code, "\(refusal)")
            XCTAssertEqual(refusal.message(naming: LibrarySettingNames()), text, "\(refusal)")
        }
    }

    /// From a rate-limited address, a stream the Hello does not own is refused for the limit after
    /// all; other failures, and every failure from an address that is not limited, stay the storage's.
    func testAFailedOpen() {
        var limited = HelloGate()
        _ = limited.authenticate(peer: Self.peer, blockedFor: .milliseconds(29_500), carriesResumeSecret: true, token: .accepted)
        let free = HelloGate()
        let rows: [(StorageError, limited: StorageError, free: StorageError)] = [
            (.notResumable, .rateLimited(Self.limited.reason, retryAfterMilliseconds: 29_500), .notResumable),
            (.notStreamOwner("another owner"), .rateLimited(Self.limited.reason, retryAfterMilliseconds: 29_500), .notStreamOwner("another owner")),
            (.writeFailed("disk full"), .writeFailed("disk full"), .writeFailed("disk full")),
        ]
        for (error, fromLimited, fromFree) in rows {
            XCTAssertEqual(limited.openFailed(error), fromLimited, "\(error)")
            XCTAssertEqual(free.openFailed(error), fromFree, "\(error)")
        }
    }

    /// Whom a stream is bound to: the client certificate first, else the token when tokens are required.
    func testTheIdentity() {
        let certificate = CertificateFingerprint(der: [0x30, 0x03, 0x02, 0x01, 0x01])
        XCTAssertEqual(HelloGate.identity(certificate: certificate, tokensRequired: true, token: "secret"), StreamOwner.identity(certificate: certificate))
        XCTAssertEqual(HelloGate.identity(certificate: nil, tokensRequired: true, token: "secret"), StreamOwner.identity(token: "secret"))
        XCTAssertNil(HelloGate.identity(certificate: nil, tokensRequired: false, token: "secret"), "a token nobody checks is no identity")
        XCTAssertNil(HelloGate.identity(certificate: nil, tokensRequired: true, token: ""))
    }
}
