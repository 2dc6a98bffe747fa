import CaptureCore
import CaptureStatus
import TestSupport
import XCTest

/// The level figures a user reads off the status line are the real levels of the captured audio.
final class LevelDisplayTests: XCTestCase {
    private let renderer = StatusLineRenderer()

    func testMinusSixDBFSSineReadsMinusSixPeakAndMinusNineRMSOnTheTerminal() throws {
        for sample in [PCMSampleFormat.s16, .s24, .s32, .f32] {
            let reading = try measureTone(levelDBFS: -6, sample: sample)
            let line = renderer.terminalLine(SenderStatusSnapshot(levels: reading, link: .streaming), width: 200)
            let pairs = levelPairs(in: line)
            XCTAssertEqual(pairs.count, 2, "\(sample): \(line)")
            for pair in pairs {
                XCTAssertEqual(pair.peak, -6.0, accuracy: 0.5, "\(sample): \(line)")
                XCTAssertEqual(pair.rms, -9.0, accuracy: 0.5, "\(sample): \(line)")
            }
            XCTAssertFalse(line.contains("CLIP"), line)
        }
    }

    func testMinusSixDBFSSineReadsMinusSixPeakAndMinusNineRMSInPlainLines() throws {
        let reading = try measureTone(levelDBFS: -6, sample: .s16)
        let line = renderer.plainLine(SenderStatusSnapshot(levels: reading, link: .streaming))
        XCTAssertEqual(plainValue("peak_dbfs", in: line), "-6.0,-6.0", line)
        XCTAssertEqual(plainValue("rms_dbfs", in: line), "-9.0,-9.0", line)
        XCTAssertEqual(plainValue("clipped", in: line), "no,no", line)
    }

    func testQuieterToneReadsItsOwnLevel() throws {
        let reading = try measureTone(levelDBFS: -20, sample: .s16, channels: 1)
        let line = renderer.terminalLine(SenderStatusSnapshot(levels: reading), width: 200)
        XCTAssertTrue(line.hasPrefix("M "), line)
        let pairs = levelPairs(in: line)
        XCTAssertEqual(pairs.count, 1, line)
        XCTAssertEqual(pairs.first?.peak ?? .nan, -20.0, accuracy: 0.5, line)
        XCTAssertEqual(pairs.first?.rms ?? .nan, -23.0, accuracy: 0.5, line)
    }

    func testFullScaleShowsTheClipMarkerOnlyOnTheClippedChannel() {
        // Left reaches full scale (+1.0 is written as 32767); right peaks at half scale.
        let reading = measureSamples([[1.0, 0.5], [-1.0, -0.5], [0.0, 0.0]], sample: .s16)
        let line = renderer.terminalLine(SenderStatusSnapshot(levels: reading), width: 200)
        let meters = line.components(separatedBy: "  R ")
        XCTAssertEqual(meters.count, 2, line)
        XCTAssertTrue(meters[0].contains("CLIP"), line)
        XCTAssertFalse(meters[1].contains("CLIP"), line)
        XCTAssertTrue(meters[0].hasPrefix("L ▇▇▇▇▇▇▇▇▇▇   0.0/"), line)
        let plain = renderer.plainLine(SenderStatusSnapshot(levels: reading))
        XCTAssertEqual(plainValue("clipped", in: plain), "yes,no", plain)
        XCTAssertEqual(plainValue("peak_dbfs", in: plain), "0.0,-6.0", plain)
    }

    func testSilenceReadsMinusInfinityWithAnEmptyBar() {
        let reading = measureSamples(Array(repeating: [0.0, 0.0], count: 480), sample: .s16)
        let snapshot = SenderStatusSnapshot(levels: reading, link: .streaming)
        let line = renderer.terminalLine(snapshot, width: 200)
        XCTAssertTrue(line.hasPrefix("L ---------- " + "   -∞/   -∞ dB" + "     " + "  R ---------- " + "   -∞/   -∞ dB"), line)
        let plain = renderer.plainLine(snapshot)
        XCTAssertEqual(plainValue("peak_dbfs", in: plain), "-inf,-inf", plain)
        XCTAssertEqual(plainValue("rms_dbfs", in: plain), "-inf,-inf", plain)
        XCTAssertEqual(plainValue("clipped", in: plain), "no,no", plain)
    }

    func testEmptyReadingAndNoLevelsRenderWithoutMeters() {
        let empty = measureSamples([], sample: .s16)
        XCTAssertEqual(empty.frames, 0)
        XCTAssertTrue(renderer.terminalLine(SenderStatusSnapshot(levels: empty), width: 200).hasPrefix("M ----------    -∞/   -∞ dB"))
        let none = SenderStatusSnapshot(levels: nil, link: .connecting)
        XCTAssertTrue(renderer.terminalLine(none, width: 200).hasPrefix("connecting │ cap 0.0s"))
        XCTAssertEqual(plainValue("peak_dbfs", in: renderer.plainLine(none)), "none")
    }

    func testBarIsLinearInDecibelsFromTheFloorToFullScale() {
        let bar = LevelBar(cells: 10, floorDBFS: -60)
        XCTAssertEqual(bar.render(dBFS: 0), "▇▇▇▇▇▇▇▇▇▇")
        XCTAssertEqual(bar.render(dBFS: -6), "▇▇▇▇▇▇▇▇▇-")
        XCTAssertEqual(bar.render(dBFS: -30), "▇▇▇▇▇-----")
        XCTAssertEqual(bar.render(dBFS: -33), "▇▇▇▇▄-----")
        XCTAssertEqual(bar.render(dBFS: -59), "▁---------")
        XCTAssertEqual(bar.render(dBFS: -60), "----------")
        XCTAssertEqual(bar.render(dBFS: -.infinity), "----------")
        XCTAssertEqual(bar.render(dBFS: .nan), "----------")
        XCTAssertEqual(bar.render(dBFS: 3), "▇▇▇▇▇▇▇▇▇▇")
        XCTAssertEqual(LevelBar(cells: 0).render(dBFS: -6), "")
    }

    func testMultichannelNamesAreNumbers() throws {
        let reading = try measureTone(levelDBFS: -6, sample: .s16, channels: 4, frames: 4_800)
        let line = renderer.terminalLine(SenderStatusSnapshot(levels: reading), width: 400)
        for name in ["1 ", "  2 ", "  3 ", "  4 "] { XCTAssertTrue(line.contains(name), line) }
        XCTAssertEqual(levelPairs(in: line).count, 4, line)
    }
}
