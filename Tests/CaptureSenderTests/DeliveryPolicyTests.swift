@testable import CaptureSender
import XCTest

/// `DeliveryPolicy`, one sender's delivery decisions as a pure state machine: table tests of what a
/// connection's end leads to, of the backoff, and of when (and why) a backup receiver is given up.
final class DeliveryPolicyTests: XCTestCase {
    private typealias Backlog = DeliveryPolicy.Backlog
    private typealias Event = DeliveryPolicy.Event
    private typealias Action = DeliveryPolicy.Action

    /// Delays of 0.5, 1, 2, 4, 4… s with `random` 0.
    private let reconnect = ReconnectPolicy(initial: .seconds(1), maximum: .seconds(8))
    private let lost = SenderError.connectionLost(.closed)
    private let violation = SenderError.protocolViolation(.ackBeyondSent(acknowledged: 99, highestSent: 3))
    private let refusal = SenderError.refused(code: "badFormat", message: "no")
    private let summary = StreamSummary(fileName: "a.caf", totalFrames: 96_000, totalPackets: 96_000)

    /// It has lacked audio since `since` (an entry appended then), and last advanced at `advanced`.
    private func lacking(since: Duration, advanced: Duration? = nil) -> Backlog { Backlog(lastAdvanceAt: advanced, oldestLackingAppendedAt: since) }
    /// It has everything appended so far.
    private let caughtUp = Backlog(lastAdvanceAt: 5, oldestLackingAppendedAt: nil)

    private func ended(_ outcome: ConnectionOutcome, at now: Duration, _ backlog: Backlog, complete: Bool = false) -> Event {
        .connectionEnded(outcome, at: now, backlog: backlog, complete: complete, random: 0)
    }

    private func run(_ giveUpAfter: Duration?, _ events: [Event]) -> [Action] {
        var policy = DeliveryPolicy(reconnect: reconnect, giveUpAfter: giveUpAfter)
        return events.map { policy.handle($0) }
    }

    func testStalledSinceIsTheLaterOfTheLastAdvanceAndTheOldestEntryLacked() {
        let rows: [(Backlog, Duration?)] = [
            (Backlog(lastAdvanceAt: nil, oldestLackingAppendedAt: nil), nil),
            (Backlog(lastAdvanceAt: 4, oldestLackingAppendedAt: nil), nil),
            (Backlog(lastAdvanceAt: nil, oldestLackingAppendedAt: 2), 2),
            (Backlog(lastAdvanceAt: 7, oldestLackingAppendedAt: 2), 7),
            (Backlog(lastAdvanceAt: 1, oldestLackingAppendedAt: 2), 2),
        ]
        for (backlog, expected) in rows { XCTAssertEqual(backlog.stalledSince, expected, "\(backlog)") }
    }

    func testABackupIsGivenUpAfterItsTimeWithoutProgressAndTheReasonSaysWhy() {
        let rows: [(String, Duration?, [Event], [Action])] = [
            ("lacking nothing: look again a give-up time later", 3,
             [.check(at: 10, backlog: caughtUp)], [.keepGoing(checkAt: 13)]),
            ("lacking, before its time: look again at the deadline", 3,
             [.check(at: 11, backlog: lacking(since: 10))], [.keepGoing(checkAt: 13)]),
            ("never connected for its whole time: unreachable", 3,
             [.check(at: 13, backlog: lacking(since: 10))], [.giveUp(.unreachable(seconds: 3))]),
            ("an acknowledgement that advanced restarts the clock", 3,
             [.check(at: 13, backlog: lacking(since: 10, advanced: 12))], [.keepGoing(checkAt: 15)]),
            ("connected during the stall, nothing acknowledged: no progress", 3,
             [.accepted(at: 10.5), .check(at: 13.2, backlog: lacking(since: 10))],
             [.keepGoing(checkAt: nil), .giveUp(.noProgress(seconds: 3))]),
            ("connected before the stall and still connected: no progress", 3,
             [.accepted(at: 1), .check(at: 13, backlog: lacking(since: 10))],
             [.keepGoing(checkAt: nil), .giveUp(.noProgress(seconds: 3))]),
            ("connected before the stall, lost before it began: unreachable", 3,
             [.accepted(at: 1), ended(.interrupted(lost, retry: true, streamed: true), at: 9, caughtUp), .check(at: 13, backlog: lacking(since: 10))],
             [.keepGoing(checkAt: nil), .reconnect(after: 0.5, error: lost), .giveUp(.unreachable(seconds: 3))]),
            ("acknowledging what was never sent, reconnected each time: the clock runs on, the backoff grows", 3,
             [.accepted(at: 10.1), ended(.interrupted(violation, retry: true, streamed: true), at: 10.2, lacking(since: 10)),
              .accepted(at: 10.8), ended(.interrupted(violation, retry: true, streamed: true), at: 10.9, lacking(since: 10)),
              .accepted(at: 12.0), ended(.interrupted(violation, retry: true, streamed: true), at: 13.1, lacking(since: 10))],
             [.keepGoing(checkAt: nil), .reconnect(after: 0.5, error: violation), .keepGoing(checkAt: nil), .reconnect(after: 1, error: violation),
              .keepGoing(checkAt: nil), .giveUp(.brokeProtocol(seconds: 3, detail: .ackBeyondSent(acknowledged: 99, highestSent: 3)))]),
            ("a violation before the stall began does not name it", 3,
             [ended(.interrupted(violation, retry: true, streamed: true), at: 2, caughtUp), .check(at: 13, backlog: lacking(since: 10))],
             [.reconnect(after: 0.5, error: violation), .giveUp(.unreachable(seconds: 3))]),
            ("a connection that ends past the deadline gives up instead of reconnecting", 3,
             [ended(.interrupted(lost, retry: true, streamed: false), at: 13, lacking(since: 10))],
             [.giveUp(.unreachable(seconds: 3))]),
            ("a negative one gives up as soon as audio is lacked without progress", -5,
             [.check(at: 10, backlog: caughtUp), .check(at: 10, backlog: lacking(since: 10))],
             [.keepGoing(checkAt: 10), .giveUp(.unreachable(seconds: 0))]),
            ("the main receiver is never given up", nil,
             [.check(at: 1_000, backlog: lacking(since: 0)), ended(.interrupted(lost, retry: true, streamed: false), at: 1_000, lacking(since: 0))],
             [.keepGoing(checkAt: nil), .reconnect(after: 0.5, error: lost)]),
        ]
        for (name, giveUpAfter, events, expected) in rows {
            XCTAssertEqual(run(giveUpAfter, events), expected, name)
        }
    }

    func testWhatAConnectionsEndLeadsTo() {
        let rows: [(String, Event, Action)] = [
            ("confirmed", ended(.delivered(summary), at: 1, caughtUp), .delivered(summary)),
            ("cannot resume: continue as a new stream", ended(.cannotResume(refusal, receiverHoldsUntil: nil), at: 1, lacking(since: 0)),
             .continueAsNewStream(refusal: refusal, receiverHoldsUntil: nil)),
            ("cannot resume, but everything was acknowledged", ended(.cannotResume(refusal, receiverHoldsUntil: nil), at: 1, caughtUp, complete: true),
             .deliveredUnconfirmed(refusal: refusal)),
            ("the receiver lost acknowledged audio: continue, naming where its recording ends", ended(.cannotResume(refusal, receiverHoldsUntil: 480), at: 1, lacking(since: 0)),
             .continueAsNewStream(refusal: refusal, receiverHoldsUntil: 480)),
            ("everything was acknowledged and then lost: never a delivery", ended(.cannotResume(refusal, receiverHoldsUntil: 0), at: 1, caughtUp, complete: true),
             .continueAsNewStream(refusal: refusal, receiverHoldsUntil: 0)),
            ("refused for good", ended(.interrupted(refusal, retry: false, streamed: true), at: 1, lacking(since: 0)), .fail(refusal)),
            ("refused for good, but everything was acknowledged", ended(.interrupted(refusal, retry: false, streamed: true), at: 1, caughtUp, complete: true),
             .deliveredUnconfirmed(refusal: refusal)),
            ("rate limited: at least its Retry-After", ended(.interrupted(.rateLimited(message: "slow down", retryAfter: 20), retry: true, streamed: false), at: 1, lacking(since: 0)),
             .reconnect(after: 20, error: .rateLimited(message: "slow down", retryAfter: 20))),
            ("rate limited: at most an hour", ended(.interrupted(.rateLimited(message: "go away", retryAfter: 1e9), retry: true, streamed: false), at: 1, lacking(since: 0)),
             .reconnect(after: 3_600, error: .rateLimited(message: "go away", retryAfter: 1e9))),
            ("rate limited with a negative Retry-After: the backoff", ended(.interrupted(.rateLimited(message: "odd", retryAfter: -4), retry: true, streamed: false), at: 1, lacking(since: 0)),
             .reconnect(after: 0.5, error: .rateLimited(message: "odd", retryAfter: -4))),
        ]
        for (name, event, expected) in rows {
            for giveUpAfter: Duration? in [nil, .seconds(3_600)] {
                XCTAssertEqual(run(giveUpAfter, [event]), [expected], "\(name), give-up \(String(describing: giveUpAfter))")
            }
        }
    }

    func testTheBackoffGrowsWithFailuresAndAStreamedConnectionResetsItUnlessTheReceiverBrokeTheProtocol() {
        let failed = ended(.interrupted(lost, retry: true, streamed: false), at: 1, lacking(since: 0))
        let streamed = ended(.interrupted(lost, retry: true, streamed: true), at: 1, lacking(since: 0))
        let brokeIt = ended(.interrupted(violation, retry: true, streamed: true), at: 1, lacking(since: 0))
        let delays = run(nil, [failed, failed, failed, failed, failed, streamed, failed, brokeIt, brokeIt]).map { action -> Duration in
            guard case .reconnect(let delay, _) = action else { return -1 }
            return delay
        }
        XCTAssertEqual(delays, [0.5, 1, 2, 4, 4, 0.5, 1, 2, 4])
    }
}

/// The table's times are seconds on the monotonic clock: `13` reads as `.seconds(13)`, `10.5` as
/// `.milliseconds(10_500)`, so that the rows stay as readable as the policy's examples.
extension Duration: @retroactive ExpressibleByIntegerLiteral, @retroactive ExpressibleByFloatLiteral {
    public init(integerLiteral value: Int64) { self = .seconds(value) }
    public init(floatLiteral value: Double) { self = .seconds(value) }
}
