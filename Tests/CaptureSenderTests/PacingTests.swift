import CaptureCodecs
@testable import CaptureSender
import Foundation
import XCTest

/// Lossless later (issue 29, item 2): the pure decisions. `SendPacing` (the rate limit's token
/// bucket and the background rule), `ForegroundGate.decide` and `SpoolBudget.limit`: table tests
/// (`SenderSession` under pacing: `SenderSessionTests`).
final class PacingTests: XCTestCase {
    private static let second: UInt64 = 1_000_000_000

    // MARK: - SendPacing

    /// The rate limit: the bucket starts with a quarter second of the rate, an entry is sent whole
    /// while the bucket is above zero (it may go below), and time refills it, never beyond a
    /// quarter second. Without a limit everything is allowed.
    func testTheTokenBucketAllowsTheRateAndABurstOfAQuarterSecond() {
        var pacing = SendPacing(bitsPerSecond: 80_000, background: false)  // 10,000 bytes/s
        XCTAssertTrue(pacing.needsTicks)
        XCTAssertEqual(pacing.burstBytes, 2_500)
        let rows: [(step: String, apply: (inout SendPacing) -> Void, allowed: Bool, tokens: Double)] = [
            ("start: a quarter second", { _ in }, true, 2_500),
            ("an entry larger than the bucket is sent whole", { $0.charge(bytes: 4_000) }, false, -1_500),
            ("the first tick only notes the time", { $0.tick(now: 10 * Self.second, foreground: .finished) }, false, -1_500),
            ("0.1 s refills 1,000 bytes", { $0.tick(now: 10 * Self.second + Self.second / 10, foreground: .finished) }, false, -500),
            ("0.1 s more: above zero", { $0.tick(now: 10 * Self.second + Self.second / 5, foreground: .finished) }, true, 500),
            ("an hour idle refills only the burst", { $0.tick(now: 3_610 * Self.second, foreground: .finished) }, true, 2_500),
            ("a clock that goes back refills nothing", { $0.tick(now: 3_600 * Self.second, foreground: .finished) }, true, 2_500),
        ]
        for row in rows {
            row.apply(&pacing)
            XCTAssertEqual(pacing.allowsNext(inFlightBytes: 0), row.allowed, row.step)
            XCTAssertEqual(pacing.tokens, row.tokens, accuracy: 0.001, row.step)
        }
        var unlimited = SendPacing.unpaced
        XCTAssertFalse(unlimited.needsTicks)
        unlimited.charge(bytes: 1 << 30)
        XCTAssertTrue(unlimited.allowsNext(inFlightBytes: 1 << 30))
    }

    /// Over any stretch, a rate-limited sender sends at most the burst, the rate times the stretch
    /// and one entry: checked by simulating 10 s of ticks with entries of several sizes.
    func testOverAnyStretchTheRateIsKept() {
        for entryBytes in [100, 1_500, 19_200] {
            var pacing = SendPacing(bitsPerSecond: 200_000, background: false)  // 25,000 bytes/s
            var sent: [(time: UInt64, bytes: Int)] = []
            var now: UInt64 = 0
            while now <= 10 * Self.second {
                pacing.tick(now: now, foreground: .finished)
                while pacing.allowsNext(inFlightBytes: 0) {
                    pacing.charge(bytes: entryBytes)
                    sent.append((now, entryBytes))
                }
                now += SendPacing.tickInterval
            }
            for (index, first) in sent.enumerated() {
                var total = 0
                for later in sent[index...] {
                    total += later.bytes
                    let seconds = Double(later.time - first.time) / 1e9
                    XCTAssertLessThanOrEqual(Double(total), 25_000 * seconds + pacing.burstBytes + Double(entryBytes) + 0.001, "entries of \(entryBytes) bytes")
                }
            }
            let total = sent.reduce(0) { $0 + $1.bytes }
            XCTAssertGreaterThan(Double(total), 25_000 * 10 * 0.9, "entries of \(entryBytes) bytes: the rate is used, too")
        }
    }

    /// The background rule: nothing before the first look at the foreground, nothing while it is
    /// behind, one entry at a time while it is caught up, the window once it has finished.
    func testABackgroundDestinationWaitsForTheForeground() {
        var pacing = SendPacing(bitsPerSecond: nil, background: true)
        XCTAssertTrue(pacing.needsTicks)
        // `ticks`: whether the handler must go on ticking (not once the foreground has finished).
        let rows: [(foreground: ForegroundState?, inFlight: Int, allowed: Bool, ticks: Bool)] = [
            (nil, 0, false, true),
            (.behind, 0, false, true),
            (.caughtUp, 0, true, true),
            (.caughtUp, 1, false, true),
            (.finished, 0, true, false),
            (.finished, 1 << 20, true, false),
            (.behind, 0, false, true),
        ]
        for (index, row) in rows.enumerated() {
            if let foreground = row.foreground { pacing.tick(now: UInt64(index) * Self.second, foreground: foreground) }
            XCTAssertEqual(pacing.allowsNext(inFlightBytes: row.inFlight), row.allowed, "row \(index)")
            XCTAssertEqual(pacing.needsTicks, row.ticks, "row \(index): ticks")
        }
        // A foreground destination ignores what the foreground does.
        var foreground = SendPacing(bitsPerSecond: nil, background: false)
        foreground.tick(now: 0, foreground: .behind)
        XCTAssertTrue(foreground.allowsNext(inFlightBytes: 0))
        // Both: the background rule and the rate.
        var both = SendPacing(bitsPerSecond: 8_000, background: true)
        both.tick(now: 0, foreground: .finished)
        both.charge(bytes: 1_000)
        XCTAssertFalse(both.allowsNext(inFlightBytes: 0), "the foreground has finished, the bucket is empty")
        XCTAssertTrue(both.needsTicks, "the bucket still refills on ticks")
    }

    // MARK: - ForegroundGate

    /// The gate: behind while a running foreground destination is not connected or lags more than
    /// its base lag plus the allowance; caught up while they run within it; finished once none runs.
    func testTheForegroundGate() {
        typealias Look = ForegroundGate.ForegroundLook
        let rows: [(looks: [Look], state: ForegroundState)] = [
            ([], .finished),
            ([.finished], .finished),
            ([.finished, .finished], .finished),
            ([.running(connected: true, lagSeconds: 0.3, baseLagSeconds: 0.2)], .caughtUp),
            ([.running(connected: true, lagSeconds: 0.7, baseLagSeconds: 0.2)], .caughtUp),
            ([.running(connected: true, lagSeconds: 0.71, baseLagSeconds: 0.2)], .behind),
            ([.running(connected: false, lagSeconds: 0, baseLagSeconds: 0)], .behind),
            // A slow link's own delay is not the background's fault: its base lag is allowed.
            ([.running(connected: true, lagSeconds: 2.4, baseLagSeconds: 2.0)], .caughtUp),
            ([.finished, .running(connected: true, lagSeconds: 0.1, baseLagSeconds: 0.1)], .caughtUp),
            ([.running(connected: true, lagSeconds: 0.1, baseLagSeconds: 0.1), .running(connected: true, lagSeconds: 3, baseLagSeconds: 0.1)], .behind),
            ([.running(connected: true, lagSeconds: 0.1, baseLagSeconds: 0.1), .finished, .running(connected: false, lagSeconds: 0, baseLagSeconds: 0)], .behind),
        ]
        for (index, row) in rows.enumerated() {
            XCTAssertEqual(ForegroundGate.decide(row.looks, caughtUp: .milliseconds(500)), row.state, "row \(index)")
        }
    }

    // MARK: - SpoolBudget

    /// `--spool-max` shared by every encoding: foreground encodings split what the background does
    /// not hold; a background one may grow only while everything held stays within half.
    func testTheSpoolBudgetGivesTheForegroundPriority() {
        let capacity = 1_000
        let rows: [(background: Bool, own: Int, others: [(background: Bool, held: Int)], limit: Int, note: String)] = [
            (false, 0, [], 1_000, "one encoding: all of it"),
            (false, 0, [(false, 0)], 500, "two foreground encodings: an even split, as before"),
            (false, 0, [(false, 900)], 500, "a foreground share does not depend on the other's backlog"),
            (false, 0, [(true, 0)], 1_000, "an idle background takes nothing from the foreground"),
            (false, 0, [(true, 400)], 600, "the foreground keeps what the background does not hold"),
            (false, 0, [(true, 400), (false, 10)], 300, "split between the foreground encodings"),
            (true, 0, [(false, 0)], 500, "the background: half at most"),
            (true, 100, [(false, 300)], 200, "less what the others hold"),
            (true, 0, [(false, 700)], 0, "nothing while the foreground holds more than half"),
            (true, 0, [(true, 200), (false, 100)], 200, "background encodings share the half"),
        ]
        for row in rows {
            XCTAssertEqual(SpoolBudget.limit(capacity: capacity, background: row.background, ownHeld: row.own, others: row.others), row.limit, row.note)
        }
    }

    /// A budget's limit for its logs: one foreground log alone may hold the whole capacity (the
    /// answer every single-encoding run gets, before each append); a second log splits it.
    func testTheBudgetsLimitForItsLogs() {
        let budget = SpoolBudget(capacity: 10_000)
        let first = PacketLog(producerIsRealTime: true, capacity: budget.capacity, budget: budget)
        budget.add(first, background: false)
        XCTAssertEqual(budget.limit(for: first), 10_000)
        let stranger = PacketLog(producerIsRealTime: true, capacity: 1_000)
        XCTAssertEqual(budget.limit(for: stranger), 10_000, "a log not in the budget is held to the capacity")
        let second = PacketLog(producerIsRealTime: true, capacity: budget.capacity, budget: budget)
        budget.add(second, background: false)
        XCTAssertEqual(budget.limit(for: first), 5_000)
        XCTAssertEqual(budget.limit(for: second), 5_000)
        let lone = SpoolBudget(capacity: 10_000)
        let background = PacketLog(producerIsRealTime: true, capacity: lone.capacity, budget: lone)
        lone.add(background, background: true)
        XCTAssertEqual(lone.limit(for: background), 5_000, "a background log alone still gets half")
    }

    /// Two logs on one budget: when it runs out, the background log overflows first (its audio
    /// goes to its overflow file, loudly) while the foreground log keeps everything.
    func testWhenTheSpoolRunsOutTheBackgroundGivesWayFirst() throws {
        let budget = SpoolBudget(capacity: 10_000)
        let backgroundEvents = EventBox()
        let foreground = PacketLog(producerIsRealTime: true, capacity: budget.capacity, budget: budget)
        let background = PacketLog(producerIsRealTime: true, capacity: budget.capacity, budget: budget, events: { backgroundEvents.append($0) })
        budget.add(foreground, background: false)
        budget.add(background, background: true)
        func packets(_ index: Int, bytes: Int) -> EncodedPackets {
            EncodedPackets(payload: [UInt8](repeating: 1, count: bytes), packetCount: bytes / 4, packetSizes: [], firstSampleTime: Int64(index * bytes / 4), frameCount: bytes / 4)
        }
        // The background fills its half: 1,000-byte entries, the sixth does not fit.
        var kept = 0
        for index in 0..<8 where background.append(packets(index, bytes: 1_000)) > 0 { kept += 1 }
        XCTAssertEqual(kept, 5, "the background may hold half of --spool-max")
        XCTAssertEqual(backgroundEvents.events.count, 1)
        if case .audioLost(let loss)? = backgroundEvents.events.first {
            XCTAssertEqual(loss, .logFullWithoutOverflow(capacity: 10_000))
        } else {
            XCTFail("the background's overflow is reported: \(backgroundEvents.events)")
        }
        // The foreground still has the other half, and all of it once the background is acknowledged.
        for index in 0..<5 { XCTAssertGreaterThan(foreground.append(packets(index, bytes: 1_000)), 0, "foreground entry \(index)") }
        background.acknowledge(through: 5, for: .main)
        for index in 5..<10 { XCTAssertGreaterThan(foreground.append(packets(index, bytes: 1_000)), 0, "foreground entry \(index): what the background released") }
        XCTAssertEqual(foreground.append(packets(10, bytes: 1_000)), 0, "--spool-max is full")
    }
}

/// Collects a log's events.
private final class EventBox: @unchecked Sendable {
    // Sendability: `stored` is read and written only under `lock`.
    private let lock = NSLock()
    private var stored: [PacketLogEvent] = []
    func append(_ event: PacketLogEvent) { lock.withLock { stored.append(event) } }
    var events: [PacketLogEvent] { lock.withLock { stored } }
}
