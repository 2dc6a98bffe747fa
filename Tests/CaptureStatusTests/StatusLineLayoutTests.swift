import CaptureCore
import CaptureStatus
import Foundation
import XCTest

/// The status line's fields, their formats, and how the terminal line fits the terminal's width.
final class StatusLineLayoutTests: XCTestCase {
    private let renderer = StatusLineRenderer()

    private func busySnapshot() throws -> SenderStatusSnapshot {
        SenderStatusSnapshot(
            levels: try measureTone(levelDBFS: -6, sample: .s16, frames: 4_800), shortTermLUFS: -18.24, link: .reconnecting, usesTLS: true,
            secondsCaptured: 754.26, secondsAcknowledged: 741.04, backlogBytes: 2_539_520, backlogSeconds: 13.2,
            bitsPerSecond: 1_536_000, overruns: 2
        )
    }

    func testWideTerminalLineShowsEveryField() throws {
        let line = renderer.terminalLine(try busySnapshot(), width: 200)
        XCTAssertEqual(
            line,
            "L ▇▇▇▇▇▇▇▇▇-  -6.0/ -9.0 dB       R ▇▇▇▇▇▇▇▇▇-  -6.0/ -9.0 dB      │ S -18.2 LUFS │ reconnecting+TLS │ cap 754.3s ack 741.0s │ spool 13.2s 2.4 MiB │ 1.54 Mb/s │ xruns 2"
        )
    }

    func testPlainLineHasStableKeysInAFixedOrder() throws {
        let line = renderer.plainLine(try busySnapshot())
        XCTAssertEqual(
            line,
            "status link=reconnecting tls=yes captured_s=754.26 acked_s=741.04 backlog_bytes=2539520 backlog_s=13.20 bitrate_bps=1536000 overruns=2 peak_dbfs=-6.0,-6.0 rms_dbfs=-9.0,-9.0 clipped=no,no no_ack_s=0 short_term_lufs=-18.2"
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

        // The order in which things go as the width shrinks: the spool's bytes, the bit rate, the loudness and
        // the captured seconds while the meters shrink (bars, then RMS, then the per-channel
        // peaks), then the meters, the overruns and the TLS mark. Link, acknowledged seconds and
        // backlog stay to the end.
        func firstWidthWithout(_ text: String) -> Int {
            (1...200).reversed().first { !renderer.terminalLine(snapshot, width: $0).contains(text) } ?? 0
        }
        let order = ["2.4 MiB", "1.54 Mb/s", "LUFS", "cap 754.3s", "▇▇▇▇", "/ -9.0", "  R ", "-6.0", "xruns 2", "+TLS", "ack 741.0s"]
        let lost = order.map(firstWidthWithout)
        XCTAssertEqual(lost, lost.sorted(by: >), "fields dropped out of order: \(Array(zip(order, lost)))")
        XCTAssertEqual(Set(lost).count, lost.count, "one step at a time: \(Array(zip(order, lost)))")

        // The narrowest layouts keep the link, the acknowledged seconds and the backlog, down to
        // whole seconds; narrower still is cut.
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 43), "reconnecting+TLS │ ack 741.0s │ spool 13.2s")
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 42), "reconnecting │ ack 741.0s │ spool 13.2s")
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 38), "reconnecting │ ack 741s │ spool 13s")
        XCTAssertEqual(renderer.terminalLine(snapshot, width: 34), "reconnecting │ ack 741s │ spool 13")
    }

    /// A streaming snapshot of a steady −12 dBFS tone on `channels` channels.
    private func streamingSnapshot(channels: Int) throws -> SenderStatusSnapshot {
        SenderStatusSnapshot(
            levels: try measureTone(levelDBFS: -12, sample: .s16, channels: channels, frames: 4_800), link: .streaming,
            secondsCaptured: 62.5, secondsAcknowledged: 62.3, backlogBytes: 38_400, backlogSeconds: 0.2,
            bitsPerSecond: 1_536_000, overruns: 0
        )
    }

    func testEightyColumnsShowLinkAcknowledgedAndBacklogWhateverTheChannels() throws {
        // An 80-column terminal gets 79-column lines (the last column is left free).
        let expected = [
            1: "M ▇▇▇▇▆- -12.0/-15.0 │ streaming │ cap 62.5s ack 62.3s │ spool 0.2s │ xruns 0",
            2: "L -12.0/-15.0  R -12.0/-15.0 │ streaming │ ack 62.3s │ spool 0.2s │ xruns 0",
            6: "▆▆▆▆▆▆ -12.0 │ streaming │ cap 62.5s ack 62.3s │ spool 0.2s 37.5 KiB │ xruns 0",
        ]
        for (channels, line) in expected.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(renderer.terminalLine(try streamingSnapshot(channels: channels), width: 79), line, "\(channels) channels")
        }
    }

    func testFortyColumnsShowLinkAcknowledgedAndBacklogWhateverTheChannels() throws {
        for channels in [1, 2, 6] {
            XCTAssertEqual(
                renderer.terminalLine(try streamingSnapshot(channels: channels), width: 39), "streaming │ ack 62.3s │ spool 0.2s",
                "\(channels) channels"
            )
        }
        var hung = try streamingSnapshot(channels: 6)
        hung.secondsWithoutAcknowledgement = 12.5
        hung.secondsAcknowledged = 3_600
        hung.backlogSeconds = 12.25
        XCTAssertEqual(renderer.terminalLine(hung, width: 39), "no ack for 12 s │ ack 3600s │ spool 12s")
    }

    func testEveryWidthKeepsTheLinkWhileItFits() throws {
        for channels in [1, 2, 6] {
            var snapshot = try streamingSnapshot(channels: channels)
            snapshot.secondsWithoutAcknowledgement = 4
            for width in 15...220 {
                let line = renderer.terminalLine(snapshot, width: width)
                XCTAssertLessThanOrEqual(line.count, width)
                XCTAssertTrue(line.contains("no ack for 4 s"), "\(channels) channels, width \(width): \(line)")
                if width >= 39 {
                    XCTAssertTrue(line.contains("ack 62") && line.contains("spool 0"), "\(channels) channels, width \(width): \(line)")
                }
            }
        }
    }

    func testHeldPeaksShowAsMarkersInTheBars() throws {
        var snapshot = try streamingSnapshot(channels: 2)
        snapshot.heldPeaksDBFS = [-3, -12]
        let line = renderer.terminalLine(snapshot, width: 200)
        XCTAssertTrue(line.hasPrefix("L ▇▇▇▇▇▇▇▇-| -12.0/-15.0 dB       R ▇▇▇▇▇▇▇▇-- -12.0/-15.0 dB      │ streaming"), line)
    }

    func testJSONLineHoldsThePlainLinesKeysAndValues() throws {
        var snapshot = try busySnapshot()
        snapshot.levels = measureSamples([[0.5, 0.0], [-0.5, 0.0]], sample: .s16)
        snapshot.secondsWithoutAcknowledgement = 5.5
        let line = renderer.jsonLine(snapshot, time: Date(timeIntervalSince1970: 1_795_000_000.25), logger: "capture-send")
        XCTAssertFalse(line.contains("\n"))
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
        XCTAssertEqual(object["time"] as? String, "2026-11-18T11:06:40.250Z")
        XCTAssertEqual(object["level"] as? String, "info")
        XCTAssertEqual(object["logger"] as? String, "capture-send")
        XCTAssertEqual(object["message"] as? String, "status")
        XCTAssertEqual(object["link"] as? String, "reconnecting")
        XCTAssertEqual(object["tls"] as? Bool, true)
        XCTAssertEqual(object["captured_s"] as? Double, 754.26)
        XCTAssertEqual(object["acked_s"] as? Double, 741.04)
        XCTAssertEqual(object["backlog_bytes"] as? Int, 2_539_520)
        XCTAssertEqual(object["backlog_s"] as? Double, 13.2)
        XCTAssertEqual(object["bitrate_bps"] as? Int, 1_536_000)
        XCTAssertEqual(object["overruns"] as? Int, 2)
        XCTAssertEqual(object["no_ack_s"] as? Int, 5)
        XCTAssertEqual(object["short_term_lufs"] as? Double, -18.2)
        let peaks = try XCTUnwrap(object["peak_dbfs"] as? [Any])
        XCTAssertEqual(peaks.count, 2)
        XCTAssertEqual(peaks[0] as? Double, -6.0)
        XCTAssertTrue(peaks[1] is NSNull, "silence (−∞) is null")
        XCTAssertEqual(object["clipped"] as? [Bool], [false, false])
        // The keys in the plain line's order, after the log line's own.
        let plainKeys = renderer.plainLine(snapshot).split(separator: " ").dropFirst().map { String($0.split(separator: "=")[0]) }
        let keyPattern = try NSRegularExpression(pattern: #""([a-z_]+)":"#)
        let jsonKeys = keyPattern.matches(in: line, range: NSRange(line.startIndex..., in: line)).compactMap { Range($0.range(at: 1), in: line).map { String(line[$0]) } }
        XCTAssertEqual(jsonKeys, ["time", "level", "logger", "message"] + plainKeys)

        let idle = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(renderer.jsonLine(SenderStatusSnapshot(), time: Date(), logger: "x").utf8)) as? [String: Any])
        XCTAssertTrue(idle["peak_dbfs"] is NSNull)
        XCTAssertTrue(idle["short_term_lufs"] is NSNull, "not measured")
        snapshot.shortTermLUFS = -.infinity
        let silent = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(renderer.jsonLine(snapshot, time: Date(), logger: "x").utf8)) as? [String: Any])
        XCTAssertTrue(silent["short_term_lufs"] is NSNull, "silence (−∞) is null")
        XCTAssertTrue(renderer.plainLine(snapshot).hasSuffix(" short_term_lufs=-inf"), renderer.plainLine(snapshot))
        XCTAssertTrue(renderer.plainLine(SenderStatusSnapshot()).hasSuffix(" short_term_lufs=none"))
        XCTAssertTrue(renderer.terminalLine(snapshot, width: 200).contains("│ S -∞ LUFS │"))
    }

    func testRedrawReturnsToLineStartAndClearsTheRest() throws {
        let redraw = renderer.terminalRedraw(try busySnapshot(), width: 80)
        XCTAssertTrue(redraw.hasPrefix("\r"))
        XCTAssertTrue(redraw.hasSuffix("\u{1B}[K"))
        XCTAssertFalse(redraw.contains("\n"))
    }

    func testBackupLinksFollowTheMainLinkInEveryStyle() throws {
        var snapshot = try busySnapshot()
        snapshot.backups = [.init(receiver: "10.0.0.2:7373", link: .streaming, secondsBehind: 0.25)]
        XCTAssertEqual(
            renderer.terminalLine(snapshot, width: 200),
            "L ▇▇▇▇▇▇▇▇▇-  -6.0/ -9.0 dB       R ▇▇▇▇▇▇▇▇▇-  -6.0/ -9.0 dB      │ S -18.2 LUFS │ reconnecting+TLS │ backup streaming 0.2s │ cap 754.3s ack 741.0s │ spool 13.2s 2.4 MiB │ 1.54 Mb/s │ xruns 2"
        )
        snapshot.backups.append(.init(receiver: "[::1]:7374", link: .gaveUp, secondsBehind: 0))
        let narrow = renderer.terminalLine(snapshot, width: 80)
        XCTAssertTrue(narrow.contains("reconnecting │ backup1 streaming 0s │ backup2 gave-up 0s │ ack 741s"), narrow)
        XCTAssertLessThanOrEqual(narrow.count, 80)
        let plain = renderer.plainLine(snapshot)
        XCTAssertTrue(plain.hasSuffix(" no_ack_s=0 short_term_lufs=-18.2 backups=10.0.0.2:7373/streaming/0.25,[::1]:7374/gave-up/0.00"), plain)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(renderer.jsonLine(snapshot, time: Date(), logger: "capture-send").utf8)) as? [String: Any])
        let backups = try XCTUnwrap(json["backups"] as? [[String: Any]])
        XCTAssertEqual(backups.count, 2)
        XCTAssertEqual(backups[0]["receiver"] as? String, "10.0.0.2:7373")
        XCTAssertEqual(backups[1]["link"] as? String, "gave-up")
        XCTAssertEqual(backups[0]["behind_s"] as? Double, 0.25)
        XCTAssertFalse(renderer.plainLine(try busySnapshot()).contains("backups="), "without backups the key is absent")
    }

    /// Several encodings and a local copy: `encodings=` and `record_s`/`record_stopped` in the plain
    /// and JSON lines, `rec`/`REC STOPPED` on the terminal; absent without them.
    func testEncodingsAndTheLocalCopyInEveryStyle() throws {
        var snapshot = try busySnapshot()
        snapshot.encodings = [
            .init(label: "pcm-s16-48000", secondsAcknowledged: 741, backlogSeconds: 13.25),
            .init(label: "opus-64k-20ms", secondsAcknowledged: 754, backlogSeconds: 0.3),
        ]
        snapshot.localCopy = .writing(seconds: 754.25)
        let plain = renderer.plainLine(snapshot)
        XCTAssertTrue(plain.hasSuffix(" encodings=pcm-s16-48000/741.00/13.25,opus-64k-20ms/754.00/0.30 record_s=754.25 record_stopped=no"), plain)
        XCTAssertTrue(renderer.terminalLine(snapshot, width: 200).contains("│ rec 754.2s │"), renderer.terminalLine(snapshot, width: 200))
        let wide = renderer.terminalLine(snapshot, width: 300)
        XCTAssertTrue(wide.contains("│ pcm-s16-48000 ack 741.0s +13.2s │ opus-64k-20ms ack 754.0s +0.3s │"), wide)
        // Narrow: every encoding keeps its backlog, the line its width.
        let narrow = renderer.terminalLine(snapshot, width: 100)
        XCTAssertLessThanOrEqual(narrow.count, 100)
        XCTAssertTrue(narrow.contains("pcm-s16-48000 +13.2s") || narrow.contains("pcm-s16-48000 +13s"), narrow)
        XCTAssertTrue(narrow.contains("opus-64k-20ms +0.3s") || narrow.contains("opus-64k-20ms +0s"), narrow)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(renderer.jsonLine(snapshot, time: Date(), logger: "capture-send").utf8)) as? [String: Any])
        let encodings = try XCTUnwrap(json["encodings"] as? [[String: Any]])
        XCTAssertEqual(encodings.map { $0["encoding"] as? String }, ["pcm-s16-48000", "opus-64k-20ms"])
        XCTAssertEqual(encodings.map { $0["acked_s"] as? Double }, [741, 754])
        XCTAssertEqual(encodings.map { $0["backlog_s"] as? Double }, [13.25, 0.3])
        XCTAssertEqual(json["record_s"] as? Double, 754.25)
        XCTAssertEqual(json["record_stopped"] as? Bool, false)
        snapshot.localCopy = .stopped(seconds: 12.5)
        XCTAssertTrue(renderer.terminalLine(snapshot, width: 200).contains("│ REC STOPPED 12.5s │"))
        XCTAssertTrue(renderer.plainLine(snapshot).hasSuffix(" record_s=12.50 record_stopped=yes"))
        snapshot.encodings.removeLast()
        let single = renderer.plainLine(snapshot)
        XCTAssertFalse(single.contains("encodings="), "one encoding: the key is absent")
        XCTAssertFalse(renderer.terminalLine(snapshot, width: 300).contains("pcm-s16-48000"), "one encoding: no field for it on the terminal")
        XCTAssertFalse(renderer.plainLine(try busySnapshot()).contains("record_s="), "without a local copy the keys are absent")
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
