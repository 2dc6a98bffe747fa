import CaptureCore
import ArgumentParser
import XCTest

@testable import CaptureCLISupport

/// How a `NumericOption` reads, checks and describes numbers, and the total conversions behind it.
final class NumericOptionTests: XCTestCase {
    func testTheRangeInWords() {
        XCTAssertEqual(NumericOption("rate", .integer, 8_000...192_000, unit: "Hz").rangeText, "8000 to 192000 Hz")
        XCTAssertEqual(NumericOption("buffers", .integer, 2...64).rangeText, "2 to 64")
        XCTAssertEqual(
            NumericOption("stop-timeout", .real, 0...86_400, unit: "seconds", minimumMeaning: "no limit").rangeText,
            "0 (no limit) to 86400 seconds (24 hours)")
        XCTAssertEqual(NumericOption("buffer-seconds", .real, 0.001...10, unit: "seconds").rangeText, "0.001 to 10 seconds")
        XCTAssertEqual(NumericOption("spool-max", .bytes, 1_048_576...17_592_186_044_416).rangeText, "1M to 16T bytes")
        XCTAssertEqual(NumericOption("bitrate", .bitrate, 6_000...510_000).rangeText, "6000 to 510000 b/s (6k to 510k)")
        XCTAssertEqual(NumericOption("max-rate", .bitrate, 8_000...10_000_000_000).rangeText, "8000 to 10000000000 b/s (8k to 10G)")
        XCTAssertEqual(NumericOption("max-rate", .bitrate, 1_500...2_500_000).rangeText, "1500 to 2500000 b/s (1500 to 2500k)")
        XCTAssertEqual(NumericOption("frame-ms", .choices([2.5, 5, 10, 20, 40, 60]), 2.5...60, unit: "ms").rangeText, "2.5, 5, 10, 20, 40 or 60 ms")
        XCTAssertEqual(NumericOption("segment", .duration, 1...86_400).rangeText, "1 second to 24 hours")
        XCTAssertEqual(NumericOption("also-give-up", .duration, 1...604_800).rangeText, "1 second to 7 days")
    }

    func testTheHelpStatesTheRangeAndTheDefault() {
        let help = NumericOption("rate", .integer, 8_000...192_000, unit: "Hz").help("Sample rate.", valueName: "HZ", default: "48000")
        XCTAssertEqual(help.abstract, "Sample rate. Accepted: 8000 to 192000 Hz. (default: 48000)")
        XCTAssertEqual(help.valueName, "HZ")
    }

    func testPlainNumbersOnly() {
        let option = NumericOption("stop-timeout", .real, 0...86_400, unit: "seconds")
        for text in ["nan", "NaN", "inf", "-inf", "infinity", "0x10", "0x1p3", "1_000", " 5", "5 ", "", "+", "e5", "fast", "٣"] {
            XCTAssertNil(option.value(text), "\(text) is no number here")
        }
        XCTAssertEqual(option.value("+5"), 5)
        XCTAssertEqual(option.value("2.5e1"), 25)
        XCTAssertEqual(option.value(".5"), 0.5)
        XCTAssertEqual(option.value("-0"), 0)
        XCTAssertNil(option.value("-0.001"))
        XCTAssertNil(option.value("86400.001"))
    }

    func testWholeNumbersAndTheirRefusal() throws {
        let option = NumericOption("channels", .integer, 1...8)
        XCTAssertEqual(try option.integer("8"), 8)
        XCTAssertEqual(try option.integer("8.0"), 8)
        XCTAssertEqual(try option.integer("2e0"), 2)
        for text in ["2.5", "0", "9", "9223372036854775808", "-9223372036854775809", "1e308", "nan"] {
            XCTAssertThrowsError(try option.integer(text), text) { error in
                XCTAssertEqual((error as? ValidationError)?.message, "use a whole number from 1 to 8")
            }
        }
    }

    func testBytesWithSuffixes() throws {
        let option = NumericOption("spool-max", .bytes, 1_048_576...17_592_186_044_416)
        XCTAssertEqual(option.value("4G"), 4_294_967_296)
        XCTAssertEqual(option.value("1.5g"), 1_610_612_736)
        XCTAssertEqual(option.value("16T"), 17_592_186_044_416)
        XCTAssertEqual(option.value("1048576"), 1_048_576)
        XCTAssertNil(option.value("1.0000001M"), "not a whole number of bytes")
        for text in ["9999999999G", "1e300K", "17T", "0.5M", "-1G", "nanG", "infT", "G", "4GB", "4 G"] {
            XCTAssertThrowsError(try option.checked(text), text) { error in
                XCTAssertEqual((error as? ValidationError)?.message, "use 1M to 16T bytes")
            }
        }
        XCTAssertEqual(try option.checked("4G"), "4G", "kept as written")
    }

    func testBitRatesAndChoicesComeBackAsTheCodecReadsThem() throws {
        let bitrate = NumericOption("bitrate", .bitrate, 6_000...510_000)
        XCTAssertEqual(try bitrate.checked("128k"), "128000")
        XCTAssertEqual(try bitrate.checked("128.5k"), "128500")
        XCTAssertEqual(try bitrate.checked("96000.0"), "96000")
        XCTAssertThrowsError(try bitrate.checked("1e300k"))
        XCTAssertThrowsError(try bitrate.checked("128.0005k"), "not a whole number of bits")
        XCTAssertEqual(try bitrate.checked("0.5M"), "500000")
        XCTAssertEqual(try bitrate.checked("0.0001g"), "100000")
        XCTAssertThrowsError(try bitrate.checked("1M"), "out of range")
        XCTAssertThrowsError(try bitrate.checked("1T"), "no such suffix")
        let frame = NumericOption("frame-ms", .choices([2.5, 5, 10, 20, 40, 60]), 2.5...60, unit: "ms")
        XCTAssertEqual(try frame.checked("20ms"), "20")
        XCTAssertEqual(try frame.checked("2.50"), "2.5")
        XCTAssertThrowsError(try frame.checked("15")) { error in
            XCTAssertEqual((error as? ValidationError)?.message, "use 2.5, 5, 10, 20, 40 or 60 ms")
        }
    }

    func testDurationsNeverOverflow() {
        XCTAssertEqual(DurationText.total("1h30m"), 5_400)
        XCTAssertEqual(DurationText.total("90"), 90)
        XCTAssertEqual(DurationText.total("2562047788015215h"), 2_562_047_788_015_215 * 3_600, "the largest whole hours that fit")
        XCTAssertNil(DurationText.total("2562047788015216h"), "one hour more overflows")
        XCTAssertNil(DurationText.total("9223372036854775807h"))
        XCTAssertNil(DurationText.total("9223372036854775807s1s"), "the sum overflows")
        XCTAssertNil(DurationText.total("99999999999999999999s"))
        XCTAssertNil(DurationText.total("1e300s"))
        XCTAssertNil(DurationText.total(""))
        XCTAssertNil(DurationText.total("1h30"), "a unit, then a bare number")
        XCTAssertThrowsError(try DurationText.seconds("9223372036854775807h", option: "--segment", range: 1...86_400)) { error in
            XCTAssertEqual(
                (error as? ValidationError)?.message,
                "--segment 9223372036854775807h is no duration: write it like 1h, 15m, 10s or 1h30m (1 second to 24 hours)")
        }
        for (text, message) in [
            ("0s", "--segment 0s is too short: use 1 second to 24 hours"),
            ("0", "--segment 0 is too short: use 1 second to 24 hours"),
            ("24h1s", "--segment 24h1s is too long: use 1 second to 24 hours"),
            ("soon", "--segment soon is no duration: write it like 1h, 15m, 10s or 1h30m (1 second to 24 hours)"),
        ] {
            XCTAssertThrowsError(try DurationText.seconds(text, option: "--segment", range: 1...86_400), text) { error in
                XCTAssertEqual((error as? ValidationError)?.message, message)
            }
        }
        XCTAssertEqual(try DurationText.seconds("24h", option: "--segment", range: 1...86_400), 86_400)
    }

    func testSaturatingConversionsAreTotal() {
        XCTAssertEqual(Saturating.int64(.nan), 0)
        XCTAssertEqual(Saturating.int64(.infinity), .max)
        XCTAssertEqual(Saturating.int64(-.infinity), .min)
        XCTAssertEqual(Saturating.int64(9_223_372_036_854_775_808), .max, "2^63 does not fit")
        XCTAssertEqual(Saturating.int64(-9_223_372_036_854_775_808), .min, "-2^63 does")
        XCTAssertEqual(Saturating.int64(9_223_372_036_854_774_784), 9_223_372_036_854_774_784, "the largest Double below 2^63")
        XCTAssertEqual(Saturating.int64(2.5), 3)
        XCTAssertEqual(Saturating.nanoseconds(seconds: 1e300), .max)
        XCTAssertEqual(Saturating.nanoseconds(seconds: 0.25), 250_000_000)
        XCTAssertEqual(Saturating.frames(seconds: 1e300, rate: 48_000), .max)
        XCTAssertEqual(Saturating.frames(seconds: 0.5, rate: 48_000), 24_000)
    }
}
