import CaptureStatus
import XCTest

/// When "no ack for N s" replaces "streaming": audio waits and nothing was acknowledged for 3 s.
final class AcknowledgementWatchTests: XCTestCase {
    func testAcknowledgementsAreOverdueAfterThreeSecondsWithAudioWaiting() {
        // now, link, last acknowledgement, oldest unacknowledged audio appended at, expected seconds
        let table: [(now: Double, link: SenderStatusSnapshot.LinkState, ack: Double?, oldest: Double?, overdue: Double?)] = [
            (0.0, .connecting, nil, 0.0, nil),     // not connected yet: the link says so
            (1.0, .streaming, nil, 0.5, nil),      // streaming from 1.0
            (3.9, .streaming, nil, 0.5, nil),
            (4.0, .streaming, nil, 0.5, 3.0),      // 3 s streaming and no acknowledgement at all
            (4.5, .streaming, 4.2, 4.3, nil),      // an acknowledgement came
            (7.1, .streaming, 4.2, 4.3, nil),
            (8.0, .streaming, 4.2, 4.3, 3.7),      // hung receiver
            (8.1, .streaming, 8.05, nil, nil),     // everything acknowledged
            (20.0, .streaming, 8.05, nil, nil),    // nothing waits: nothing is overdue
            (20.5, .streaming, 8.05, 20.0, nil),   // new audio waits 0.5 s
            (23.0, .streaming, 8.05, 20.0, 3.0),
            (24.0, .reconnecting, 8.05, 20.0, nil),
            (30.0, .streaming, 8.05, 20.0, nil),   // a new connection gets its 3 s too
            (33.5, .streaming, 8.05, 20.0, 3.5),
            (34.0, .finished, 8.05, nil, nil),
        ]
        var watch = AcknowledgementWatch()
        for row in table {
            let overdue = watch.overdue(now: row.now, link: row.link, lastAcknowledgement: row.ack, oldestUnacknowledged: row.oldest)
            if let expected = row.overdue {
                XCTAssertEqual(overdue ?? -1, expected, accuracy: 1e-9, "at \(row.now)")
            } else {
                XCTAssertNil(overdue, "at \(row.now)")
            }
        }
    }

    /// A threshold other than the default, given as a `Duration`, compared with the seconds fed in.
    func testTheThresholdIsADuration() {
        var watch = AcknowledgementWatch(overdueAfter: .milliseconds(500))
        XCTAssertEqual(watch.overdueAfter, .milliseconds(500))
        XCTAssertNil(watch.overdue(now: 1.0, link: .streaming, lastAcknowledgement: nil, oldestUnacknowledged: 1.0))
        XCTAssertNil(watch.overdue(now: 1.25, link: .streaming, lastAcknowledgement: nil, oldestUnacknowledged: 1.0))
        XCTAssertEqual(watch.overdue(now: 1.5, link: .streaming, lastAcknowledgement: nil, oldestUnacknowledged: 1.0), 0.5, "overdue after exactly 0.5 s")
        XCTAssertEqual(AcknowledgementWatch(overdueAfter: .seconds(-1)).overdueAfter, .zero, "a negative threshold is none")
        XCTAssertEqual(AcknowledgementWatch().overdueAfter, .seconds(3))
    }

    func testOverdueAcknowledgementsReplaceTheLinkState() {
        let renderer = StatusLineRenderer()
        let snapshot = SenderStatusSnapshot(link: .streaming, secondsWithoutAcknowledgement: 7.9, usesTLS: true, secondsAcknowledged: 12.3)
        XCTAssertEqual(snapshot.linkDescription, "no ack for 7 s")
        XCTAssertTrue(renderer.terminalLine(snapshot, width: 79).hasPrefix("no ack for 7 s │ cap 0.0s ack 12.3s │"), renderer.terminalLine(snapshot, width: 79))
        XCTAssertEqual(plainValue("link", in: renderer.plainLine(snapshot)), "streaming")
        XCTAssertEqual(plainValue("no_ack_s", in: renderer.plainLine(snapshot)), "7")
        XCTAssertEqual(plainValue("no_ack_s", in: renderer.plainLine(SenderStatusSnapshot(link: .streaming))), "0")
    }
}
