import CaptureSender
import XCTest

/// The rules for stopping capture-send (SIGINT, SIGTERM, --stop-timeout), as a table.
final class SenderStopSequenceTests: XCTestCase {
    private typealias Sequence = SenderStopSequence

    /// Each row: the events in order, and the action and phase after each.
    private struct Row {
        let name: String
        let stopTimeout: Duration?
        let steps: [(Sequence.Event, Sequence.Action, Sequence.Phase)]
    }

    private let rows: [Row] = [
        Row(name: "Ctrl-C, Ctrl-C", stopTimeout: .seconds(10), steps: [
            (.signal(.interrupt), .stopCapture(deadline: .seconds(10)), .draining),
            (.signal(.interrupt), .abandonDelivery(.secondSignal(.interrupt)), .abandoned),
        ]),
        Row(name: "SIGTERM, then the stop timeout", stopTimeout: .seconds(10), steps: [
            (.signal(.terminate), .stopCapture(deadline: .seconds(10)), .draining),
            (.stopTimeoutPassed, .abandonDelivery(.stopTimeout(.seconds(10))), .abandoned),
        ]),
        Row(name: "Ctrl-C then SIGTERM: either signal counts as the second", stopTimeout: .seconds(10), steps: [
            (.signal(.interrupt), .stopCapture(deadline: .seconds(10)), .draining),
            (.signal(.terminate), .abandonDelivery(.secondSignal(.terminate)), .abandoned),
        ]),
        Row(name: "delivered within the timeout: the timer changes nothing", stopTimeout: .seconds(10), steps: [
            (.signal(.terminate), .stopCapture(deadline: .seconds(10)), .draining),
            (.finished, .none, .finished),
            (.stopTimeoutPassed, .none, .finished),
            (.signal(.interrupt), .none, .finished),
        ]),
        Row(name: "a third signal while ending delivery exits at once", stopTimeout: .seconds(10), steps: [
            (.signal(.interrupt), .stopCapture(deadline: .seconds(10)), .draining),
            (.signal(.interrupt), .abandonDelivery(.secondSignal(.interrupt)), .abandoned),
            (.signal(.interrupt), .exitImmediately, .abandoned),
            (.stopTimeoutPassed, .none, .abandoned),
            (.finished, .none, .abandoned),
        ]),
        Row(name: "no limit (--stop-timeout 0): no timer, a second signal still stops", stopTimeout: .zero, steps: [
            (.signal(.terminate), .stopCapture(deadline: nil), .draining),
            (.signal(.terminate), .abandonDelivery(.secondSignal(.terminate)), .abandoned),
        ]),
        Row(name: "a run that ends on its own ignores later signals", stopTimeout: .seconds(10), steps: [
            (.stopTimeoutPassed, .none, .running),
            (.finished, .none, .finished),
            (.signal(.terminate), .none, .finished),
        ]),
    ]

    func testTheStopRules() {
        for row in rows {
            var sequence = Sequence(stopTimeout: row.stopTimeout)
            XCTAssertEqual(sequence.phase, .running, row.name)
            for (index, (event, action, phase)) in row.steps.enumerated() {
                XCTAssertEqual(sequence.handle(event), action, "\(row.name), step \(index + 1)")
                XCTAssertEqual(sequence.phase, phase, "\(row.name), step \(index + 1)")
            }
        }
    }

    func testTheReasonsReadAsTheUserAskedForThem() {
        XCTAssertEqual(Sequence.AbandonReason.secondSignal(.interrupt).description, "a second stop signal (SIGINT)")
        XCTAssertEqual(Sequence.AbandonReason.stopTimeout(.seconds(10)).description, "the stop timeout (10 s) passed while delivering")
        XCTAssertEqual(Sequence.AbandonReason.stopTimeout(.milliseconds(2_500)).description, "the stop timeout (2.5 s) passed while delivering")
    }

    func testNegativeOrZeroTimeoutMeansNoLimit() {
        XCTAssertNil(Sequence(stopTimeout: .zero).stopTimeout)
        XCTAssertNil(Sequence(stopTimeout: .seconds(-1)).stopTimeout)
        XCTAssertNil(Sequence(stopTimeout: nil).stopTimeout)
        XCTAssertEqual(Sequence(stopTimeout: .seconds(3)).stopTimeout, .seconds(3))
    }
}
