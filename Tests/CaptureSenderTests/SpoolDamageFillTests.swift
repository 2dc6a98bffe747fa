@testable import CaptureSender
import XCTest

/// What stands in for damaged spool records: as many gaps (or packets of Opus silence) as the lost
/// frames allow, and for records of no frames (markers), markers that say one was lost.
final class SpoolDamageFillTests: XCTestCase {
    /// A damaged marker record (no frames) is delivered as a marker saying it was lost, with gaps for
    /// the frames of the audio damaged beside it; Opus silence likewise.
    func testADamagedMarkerRecordIsDeliveredAsALostMarker() {
        let gaps = SpoolDamageFill.gaps(reason: "spool damage")
        XCTAssertNil(gaps.problem(frames: 0, entries: 2))
        XCTAssertEqual(gaps.entries(from: 7, count: 3, start: 100, frames: 2).map(\.content), [
            .marker(sampleTime: 100, label: SpoolDamageFill.lostMarkerLabel),
            .gap(sampleTime: 100, length: 1, reason: "spool damage"), .gap(sampleTime: 101, length: 1, reason: "spool damage"),
        ])
        XCTAssertEqual(gaps.entries(from: 7, count: 3, start: 100, frames: 2).map(\.sequence), [7, 8, 9])
        // Frames enough for every lost sequence: gaps only (a lost marker's sequence carries some).
        XCTAssertEqual(gaps.entries(from: 7, count: 3, start: 100, frames: 10).map(\.content), [
            .gap(sampleTime: 100, length: 4, reason: "spool damage"), .gap(sampleTime: 104, length: 3, reason: "spool damage"),
            .gap(sampleTime: 107, length: 3, reason: "spool damage"),
        ])
        XCTAssertEqual(gaps.entries(from: 7, count: 2, start: 100, frames: 0).map(\.content), [
            .marker(sampleTime: 100, label: SpoolDamageFill.lostMarkerLabel), .marker(sampleTime: 100, label: SpoolDamageFill.lostMarkerLabel),
        ])
        let silence = SpoolDamageFill.silence(packet: [1, 2], framesPerPacket: 960)
        XCTAssertNil(silence.problem(frames: 960, entries: 2))
        XCTAssertNotNil(silence.problem(frames: 500, entries: 1), "silence is whole packets")
        let made = silence.entries(from: 1, count: 2, start: 0, frames: 960)
        XCTAssertEqual(made.first?.content, .marker(sampleTime: 0, label: SpoolDamageFill.lostMarkerLabel))
        XCTAssertEqual(made.last?.endSampleTime, 960)
    }
}
