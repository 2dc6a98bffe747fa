import CaptureCore
import CaptureStatus
import XCTest

/// The status line's fields, their formats, and how the terminal line fits the terminal's width.
final class StatusLineLayoutTests: XCTestCase {
    private let renderer = StatusLineRenderer()

    private func busySnapshot() throws -> SenderStatusSnapshot {
        SenderStatusSnapshot(
            levels: try measureTone(levelDBFS: -6, sample: .s16, frames: 4_800), link: .reconnecting, usesTLS: true,
            secondsCaptured: 754.26, secondsAcknowledged: 741.04, backlogBytes: 2_539_520, backlogSeconds: 13.2,
            bitsPerSecond: 1_536_000, overruns: 2
        )
    }

    func testWideTerminalLineShowsEveryField() throws {
        let line = renderer.terminalLine(try busySnapshot(), width: 200)
        XCTAssertEqual(
            line,
            "L ▇▇▇▇▇▇▇▇▇-  -6.0/ -9.0 dB       R ▇▇▇▇▇▇▇▇▇-  -6.0/ -9.0 dB      │ reconnecting+TLS │ cap 754.3s ack 741.0s │ spool 13.2s 2.4 MiB │ 1.54 Mb/s │ xruns 2"
        )
    }

    func testPlainLineHasStableKeysInAFixedOrder() throws {
        let line = renderer.plainLine(try busySnapshot())
        XCTAssertEqual(
            line,
            "status link=reconnecting tls=yes captured_s=754.26 acked_s=741.04 backlog_bytes=2539520 backlog_s=13.20 bitrate_bps=1536000 overruns=2 peak_dbfs=-6.0,-6.0 rms_dbfs=-9.0,-9.0 clipped=no,no"
        )
        let keys = line.split(separator: " ").dropFirst().map { $0.split(separator: "=")[0] }
        let idle = renderer.plainLine(SenderStatusSnapshot())
        XCTAssertEqual(idle.split(separator: " ").dropFirst().map { $0.split(separator: "=")[0] }, keys)
        XCTAssertFalse(line.contains("\n"))
    }

    func testEveryWidthGetsALineThatFits() throws {
        let snapshot = try busySnapshot()
        for width in 1...220 {
            let line = renderer.terminalLine(snapshot, width: width)
            XCTAssertLessThanOrEqual(line.count, width, "width \(width): \(line)")
            XCTAssertFalse(line.isEmpty, "width \(width)")
        }
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 0), "")
    }

    func testNarrowerTerminalsShrinkBarsBeforeDroppingFields() throws {
        let snapshot = try busySnapshot()
        let full = renderer.terminalLine(snapshot, width: 200)
        let narrower = renderer.terminalLine(snapshot, width: full.count - 1)
        XCTAssertTrue(narrower.hasPrefix("L ▇▇▇▇▇▃  -6.0/ -9.0 dB       R ▇▇▇▇▇▃ "), narrower)
        XCTAssertTrue(narrower.hasSuffix("│ spool 13.2s 2.4 MiB │ 1.54 Mb/s │ xruns 2"), narrower)

        // The order in which fields go: bars shrink, then spool bytes, bars, bit rate, acknowledged.
        let widths = (40...200).reversed().map { renderer.terminalLine(snapshot, width: $0) }
        func firstWidthWithout(_ text: String) -> Int? {
            widths.first { !$0.contains(text) }.map(\.count)
        }
        let lost = ["2.4 MiB", "▇", "1.54 Mb/s", "ack 741.0s", "spool 13.2s"].map { firstWidthWithout($0) ?? 0 }
        XCTAssertEqual(lost, lost.sorted(by: >), "fields dropped out of order: \(lost)")

        // The narrowest layout keeps the levels, the link and the captured seconds; narrower still is cut.
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 60), "L  -6.0/ -9.0  R  -6.0/ -9.0 │ reconnecting+TLS │ cap 754.3s")
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 59), "L  -6.0/ -9.0  R  -6.0/ -9.0 │ reconnecting+TLS │ cap 754.3")
    }

    func testEightyColumnsKeepLevelsLinkProgressSpoolAndOverrunsOfAStereoStream() throws {
        let snapshot = SenderStatusSnapshot(
            levels: try measureTone(levelDBFS: -6, sample: .s16, frames: 4_800), link: .streaming,
            secondsCaptured: 62.5, secondsAcknowledged: 62.3, backlogBytes: 38_400, backlogSeconds: 0.2,
            bitsPerSecond: 1_536_000, overruns: 0
        )
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 79), "L  -6.0/ -9.0  R  -6.0/ -9.0 │ streaming │ cap 62.5s │ spool 0.2s │ xruns 0")
        // A mono stream has room for the acknowledged seconds too.
        var mono = snapshot
        mono.levels = try measureTone(levelDBFS: -6, sample: .s16, channels: 1, frames: 4_800)
        XCTAssertEqual(renderer.terminalLine(mono, width: 79), "M  -6.0/ -9.0 │ streaming │ cap 62.5s ack 62.3s │ spool 0.2s │ xruns 0")
    }

    func testRedrawReturnsToLineStartAndClearsTheRest() throws {
        let redraw = renderer.terminalRedraw(try busySnapshot(), width: 80)
        XCTAssertTrue(redraw.hasPrefix("\r"))
        XCTAssertTrue(redraw.hasSuffix("\u{1B}[K"))
        XCTAssertFalse(redraw.contains("\n"))
    }

    func testLinkStates() {
        XCTAssertEqual(SenderStatusSnapshot(link: .connecting).linkDescription, "connecting")
        XCTAssertEqual(SenderStatusSnapshot(link: .streaming, usesTLS: true).linkDescription, "streaming+TLS")
        XCTAssertEqual(SenderStatusSnapshot(link: .reconnecting).linkDescription, "reconnecting")
        XCTAssertEqual(plainValue("link", in: renderer.plainLine(SenderStatusSnapshot(link: .finished))), "finished")
    }

    func testRatesAndSizesUseReadableUnits() {
        func fields(_ snapshot: SenderStatusSnapshot) -> String { renderer.terminalLine(snapshot, width: 300) }
        XCTAssertTrue(fields(SenderStatusSnapshot(bitsPerSecond: 96_000)).contains("│ 96.0 kb/s │"))
        XCTAssertTrue(fields(SenderStatusSnapshot(bitsPerSecond: 640)).contains("│ 640 b/s │"))
        XCTAssertTrue(fields(SenderStatusSnapshot(backlogBytes: 512)).contains("spool 0.0s 512 B"))
        XCTAssertTrue(fields(SenderStatusSnapshot(backlogBytes: 38_400, backlogSeconds: 0.2)).contains("spool 0.2s 37.5 KiB"))
        XCTAssertTrue(fields(SenderStatusSnapshot(backlogBytes: 1_288_490_189)).contains("spool 0.0s 1.20 GiB"))
    }
}
