import ArgumentParser
import CaptureCLISupport
@testable import CaptureReceiver
@testable import capture_recv
import CaptureWire
import Foundation
import XCTest

/// `--alarm-override PATTERN:CHANGE,...` (issue 30, item 2): what it parses to, which conditions
/// each stream then gets, the one-line errors for what it refuses, and the same from the config file
/// as an array of strings.
final class AlarmOverrideTests: XCTestCase {
    private func options(_ arguments: [String]) throws -> AlarmOptions { try AlarmOptions.parse(arguments) }

    private func policy(_ arguments: [String]) throws -> StreamAlarmPolicy {
        var configuration = ReceiverConfiguration(outputDirectory: "/nonexistent")
        try options(arguments).apply(to: &configuration)
        return configuration.alarms
    }

    func testOverridesParseToTheirChanges() throws {
        XCTAssertEqual(
            try AlarmOptions.parseOverride("studio-*:silence-s=60,silence-dbfs=-70,clipped-buffers=0"),
            StreamAlarmOverride(pattern: "studio-*", changes: [.set(.silenceDuration(.seconds(60))), .set(.silenceDBFS(-70)), .set(.clippedBuffers(0))]))
        XCTAssertEqual(try AlarmOptions.parseOverride("test-?:off"), StreamAlarmOverride(pattern: "test-?", changes: [.off]))
        XCTAssertEqual(
            try AlarmOptions.parseOverride("site:a:on,link-down-s=5"),
            StreamAlarmOverride(pattern: "site:a", changes: [.on, .set(.linkDownDuration(.seconds(5)))]), "the changes follow the last colon")
    }

    func testEachStreamGetsTheConditionsOfTheOverridesItsNameMatchesInOrder() throws {
        let policy = try policy([
            "--alarm-silence-s", "20", "--alarm-override", "studio-*:silence-s=60,loudness-max=-10", "--alarm-override", "studio-b:off",
            "--alarm-override", "van-[0-9]:no-audio-s=3",
        ])
        XCTAssertEqual(policy.conditions(forStream: "field-1")?.silenceDuration, .seconds(20), "no override: the options")
        let studio = try XCTUnwrap(policy.conditions(forStream: "studio-a"))
        XCTAssertEqual(studio.silenceDuration, .seconds(60))
        XCTAssertEqual(studio.loudnessRangeLUFS, -40 ... -10)
        XCTAssertNil(policy.conditions(forStream: "studio-b"), "the later override turns them off")
        XCTAssertEqual(policy.conditions(forStream: "van-7")?.noAudioDuration, .seconds(3))
        XCTAssertEqual(policy.conditions(forStream: "van-77")?.noAudioDuration, .seconds(10), "[0-9] is one character")

        let quiet = try self.policy(["--no-alarms", "--alarm-override", "main-*:on", "--alarm-override", "main-2:silence-s=5"])
        XCTAssertNil(quiet.conditions(forStream: "backup-1"))
        XCTAssertEqual(quiet.conditions(forStream: "main-1")?.silenceDuration, .seconds(10), "on: the options' conditions")
        XCTAssertEqual(quiet.conditions(forStream: "main-2")?.silenceDuration, .seconds(5))
        XCTAssertNil(try self.policy(["--no-alarms", "--alarm-override", "x:silence-s=5"]).conditions(forStream: "x"), "a change alone does not turn alarms on")
    }

    /// Seconds from the flags and overrides become `Duration`s, half seconds included; an override
    /// of 0.5 s raises the alarm after exactly 0.5 s.
    func testSecondsBecomeDurations() throws {
        XCTAssertEqual(
            try AlarmOptions.parseOverride("a:silence-s=0.5,clipping-window-s=1.5,loudness-s=2.5,link-down-s=90,no-audio-s=12.5"),
            StreamAlarmOverride(pattern: "a", changes: [
                .set(.silenceDuration(.milliseconds(500))), .set(.clippingWindow(.milliseconds(1_500))), .set(.loudnessDuration(.milliseconds(2_500))),
                .set(.linkDownDuration(.seconds(90))), .set(.noAudioDuration(.milliseconds(12_500))),
            ]))
        let flags = try options([
            "--alarm-silence-s", "0.5", "--alarm-clipping-window-s", "1.5", "--alarm-loudness-s", "2.5", "--alarm-link-down-s", "90", "--alarm-no-audio-s", "12.5",
        ])
        XCTAssertEqual(flags.conditions.silenceDuration, .milliseconds(500))
        XCTAssertEqual(flags.conditions.clippingWindow, .milliseconds(1_500))
        XCTAssertEqual(flags.conditions.loudnessDuration, .milliseconds(2_500))
        XCTAssertEqual(flags.conditions.linkDownDuration, .seconds(90))
        XCTAssertEqual(flags.conditions.noAudioDuration, .milliseconds(12_500))
        let defaults = try self.options([]).conditions
        XCTAssertEqual(defaults, StreamAlarmConditions(), "the flags' defaults are the library's")

        let conditions = try XCTUnwrap(try policy(["--alarm-override", "studio-*:silence-s=0.5"]).conditions(forStream: "studio-a"))
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var machine = StreamAlarmMachine(conditions: conditions, startedAt: start)
        let silence = AudioLevels(linearPeaks: [0.00001], linearRMS: [0.000005])
        var raised: [Double] = []
        for seconds in stride(from: 0.0, to: 1, by: 0.25) {
            raised += machine.handle(.audio(levels: silence), at: start.addingTimeInterval(seconds)).filter { $0.change == .raised }.map { _ in seconds }
        }
        XCTAssertEqual(raised, [0.5], "raised after exactly 0.5 s of silence")
    }

    func testWhatItRefusesIsOneLineThatSaysHowToWriteIt() {
        let table: [(String, String)] = [
            ("nocolon", "--alarm-override nocolon: no PATTERN: before the changes"),
            (":off", "--alarm-override :off: no PATTERN: before the changes"),
            ("a:", "--alarm-override a:: no change after the pattern"),
            ("a:off,,on", "--alarm-override a:off,,on: no change after the pattern"),
            ("a:loud", "--alarm-override a:loud: loud is not off, on or KEY=VALUE"),
            ("a:silense-s=5", "--alarm-override a:silense-s=5: silense-s is not a condition"),
            ("a:silence-s=0.1", "--alarm-override a:silence-s=0.1: silence-s: use 0.5 to 86400 seconds"),
            ("a:silence-dbfs=nan", "--alarm-override a:silence-dbfs=nan: silence-dbfs: "),
            ("a:clipped-buffers=1.5", "--alarm-override a:clipped-buffers=1.5: clipped-buffers: "),
        ]
        for (text, start) in table {
            do {
                _ = try AlarmOptions.parseOverride(text)
                XCTFail("\(text) was accepted")
            } catch {
                XCTAssertTrue(error.message.hasPrefix(start), "\(text): \(error.message)")
                XCTAssertTrue(error.message.hasSuffix("write PATTERN:CHANGE[,CHANGE...], such as studio-*:silence-s=60 or test-*:off"), error.message)
                XCTAssertFalse(error.message.contains("\n"))
            }
        }
        XCTAssertThrowsError(try options(["--alarm-override", "a:silence-s=0"]), "the command refuses it too")
    }

    func testTheConfigFileGivesOverridesAsAnArrayOfStrings() throws {
        let file = Data(#"{"out": "/srv/recordings", "alarm-override": ["studio-*:silence-s=60", "test-*:off"]}"#.utf8)
        let resolved = try ConfiguredArguments.resolve(
            [], settings: CaptureRecv.settings, environment: ["CAPTURE_RECV_CONFIG": "/etc/capture/capture-recv.json"],
            files: .memory(["/etc/capture/capture-recv.json": file]))
        XCTAssertTrue(resolved.arguments.contains("--alarm-override=studio-*:silence-s=60"), "\(resolved.arguments)")
        XCTAssertTrue(resolved.arguments.contains("--alarm-override=test-*:off"), "\(resolved.arguments)")
        let policy = try self.policy(resolved.arguments.filter { $0.hasPrefix("--alarm") })
        XCTAssertEqual(policy.overrides.map(\.pattern), ["studio-*", "test-*"])
    }
}
