import CaptureCore
import CaptureStatus
import XCTest

/// The meter between capture buffers: the most recent audio's level, held peaks that fall after
/// 1.5 s, a clip indicator held 3 s, and −∞ only for silence or before any audio.
final class PeakHoldMeterTests: XCTestCase {
    /// What is fed at one moment: nothing new, audio swinging to ± the level, zeros, or full scale.
    private enum Feed {
        case nothingNew
        case audio(dBFS: Double)
        case silence
        case fullScale
    }

    private func reading(_ feed: Feed, channels: Int = 2) -> LevelMeter.Reading {
        switch feed {
        case .nothingNew:
            var meter = LevelMeter(format: .linearPCM(sampleRate: 48_000, channels: channels, sample: .s16))
            return meter.take()
        case .audio(let level):
            let amplitude = pow(10, level / 20)
            return measureSamples((0..<480).map { Array(repeating: $0 % 2 == 0 ? amplitude : -amplitude, count: channels) }, sample: .s16)
        case .silence:
            return measureSamples(Array(repeating: Array(repeating: 0, count: channels), count: 480), sample: .s16)
        case .fullScale:
            return measureSamples((0..<480).map { Array(repeating: $0 % 2 == 0 ? 1.0 : -1.0, count: channels) }, sample: .s16)
        }
    }

    func testSteadyToneReadsItsLevelAtEveryRedrawBetweenBuffers() throws {
        // 0.5 s capture buffers, redraws every 100 ms: only every fifth redraw sees new audio.
        var meter = PeakHoldMeter()
        var shown: [Double] = []
        for redraw in 0..<40 {
            let feed: Feed = redraw % 5 == 2 ? .audio(dBFS: -12) : .nothingNew
            let display = try XCTUnwrap(meter.update(reading(feed), at: Double(redraw) / 10))
            shown.append(display.levels.channels[0].peakDBFS)
        }
        XCTAssertEqual(shown.prefix(2), [-.infinity, -.infinity], "no audio yet")
        for (index, level) in shown.enumerated().dropFirst(2) {
            XCTAssertEqual(level, -12, accuracy: 0.05, "redraw \(index): \(shown)")
        }
    }

    func testPeakIsHeldThenFalls() throws {
        // time, what arrives, shown peak, held peak (dBFS)
        let table: [(time: Double, feed: Feed, peak: Double, held: Double)] = [
            (0.0, .nothingNew, -.infinity, -.infinity),
            (0.1, .audio(dBFS: -6), -6, -6),
            (0.2, .nothingNew, -6, -6),
            (0.6, .audio(dBFS: -30), -30, -6),
            (1.6, .nothingNew, -30, -6),          // held 1.5 s
            (2.1, .audio(dBFS: -30), -30, -16),   // then falling at 20 dB/s
            (2.6, .nothingNew, -30, -26),
            (3.1, .nothingNew, -30, -30),         // the fall stops at the current peak
            (3.2, .audio(dBFS: -20), -20, -20),   // a louder peak is held at once
            (4.0, .audio(dBFS: -40), -40, -20),
            (4.7, .audio(dBFS: -40), -40, -20),
            (5.2, .silence, -.infinity, -30),     // real digital silence reads −∞
        ]
        var meter = PeakHoldMeter()
        for row in table {
            let display = try XCTUnwrap(meter.update(reading(row.feed), at: row.time))
            for channel in 0..<2 {
                assertLevel(display.levels.channels[channel].peakDBFS, row.peak, "peak at \(row.time)")
                assertLevel(display.heldPeaksDBFS[channel], row.held, "held at \(row.time)")
            }
        }
    }

    func testClipIndicatorStaysOnForThreeSeconds() throws {
        let table: [(time: Double, feed: Feed, clipped: Bool)] = [
            (0.0, .audio(dBFS: -6), false),
            (0.5, .fullScale, true),
            (1.0, .audio(dBFS: -6), true),
            (3.4, .nothingNew, true),
            (3.5, .audio(dBFS: -6), true),
            (3.6, .nothingNew, false),
            (4.0, .fullScale, true),
        ]
        var meter = PeakHoldMeter()
        for row in table {
            let display = try XCTUnwrap(meter.update(reading(row.feed, channels: 1), at: row.time))
            XCTAssertEqual(display.levels.channels.map(\.clipped), [row.clipped], "at \(row.time)")
        }
    }

    /// Hold times other than the defaults, given as `Duration`s, against the seconds the readings
    /// are taken at.
    func testHoldTimesAreDurations() throws {
        var meter = PeakHoldMeter(peakHold: .milliseconds(500), clipHold: .seconds(1))
        XCTAssertEqual(meter.peakHold, .milliseconds(500))
        XCTAssertEqual(meter.clipHold, .seconds(1))
        let table: [(time: Double, feed: Feed, held: Double, clipped: Bool)] = [
            (0.0, .fullScale, 0, true),
            (0.5, .audio(dBFS: -30), 0, true),        // held 0.5 s
            (1.0, .nothingNew, -10, true),            // then falling at 20 dB/s; the clip held 1 s
            (1.1, .nothingNew, -12, false),
        ]
        for row in table {
            let display = try XCTUnwrap(meter.update(reading(row.feed, channels: 1), at: row.time))
            assertLevel(display.heldPeaksDBFS[0], row.held, "held at \(row.time)")
            XCTAssertEqual(display.levels.channels.map(\.clipped), [row.clipped], "at \(row.time)")
        }
        XCTAssertEqual(PeakHoldMeter(peakHold: .seconds(-1), clipHold: .seconds(-1)).clipHold, .zero, "a negative hold is none")
        XCTAssertEqual(PeakHoldMeter().peakHold, .milliseconds(1_500))
    }

    func testNothingToMeterStaysNothing() {
        var meter = PeakHoldMeter()
        XCTAssertNil(meter.update(nil, at: 0))
    }

    func testRenderedBarShowsTheHeldPeakAsAMarker() {
        let bar = LevelBar(cells: 10, floorDBFS: -60)
        XCTAssertEqual(bar.render(dBFS: -30, heldDBFS: -6), "▇▇▇▇▇----|")
        XCTAssertEqual(bar.render(dBFS: -30, heldDBFS: -18), "▇▇▇▇▇--|--")
        XCTAssertEqual(bar.render(dBFS: -30, heldDBFS: -30), "▇▇▇▇▇-----", "no marker at the level itself")
        XCTAssertEqual(bar.render(dBFS: -.infinity, heldDBFS: -57), "|---------")
        XCTAssertEqual(bar.render(dBFS: -.infinity, heldDBFS: -54), "-|--------")
        XCTAssertEqual(bar.render(dBFS: -.infinity, heldDBFS: -.infinity), "----------")
        XCTAssertEqual(bar.render(dBFS: -33, heldDBFS: -31), "▇▇▇▇▄-----", "a held peak inside the drawn cells needs no marker")
    }

    private func assertLevel(_ actual: Double, _ expected: Double, _ message: String, line: UInt = #line) {
        if expected.isInfinite {
            XCTAssertEqual(actual, expected, message, line: line)
        } else {
            XCTAssertEqual(actual, expected, accuracy: 0.05, message, line: line)
        }
    }
}
