@testable import CaptureReceiver
import Foundation
import Logging
import XCTest

/// `--on-alarm` in process: each raise and each clear runs the command once, with its arguments
/// and environment; a raise recorded before a restart is not told again, is given back to the
/// stream when it resumes, and its clear is told; the alarms of a stream that does not resume are
/// told cleared after the resume window.
final class AlarmHookTests: XCTestCase {
    private var folder: String!
    private var told: String { folder + "/told.log" }
    private let stream = UUID()
    private let other = UUID()

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("alarm-hook-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let folder { try? FileManager.default.removeItem(atPath: folder) }
    }

    private func hook() -> AlarmHook {
        let command = #"printf '%s|%s|%s|%s|%s|%s|%s\n' "$0" "$1" "$2" "$3" "$CAPTURE_ALARM_KIND" "$CAPTURE_ALARMS_RAISED" "$CAPTURE_ALARM_DETAIL" >> "# + told
        return AlarmHook(outputDirectory: folder, settings: .init(command: command), logger: Logger(label: "test"))
    }

    private func event(_ kind: StreamAlarmKind, _ change: StreamAlarmTransition.Change, on id: UUID? = nil, raised: [StreamAlarmKind], detail: String = "d") -> StreamAlarmEvent {
        StreamAlarmEvent(
            id: id ?? stream, name: id == other ? "other" : "field-1",
            transition: StreamAlarmTransition(kind: kind, change: change, since: Date(), detail: detail), raised: raised)
    }

    private func lines() -> [String] {
        ((try? String(contentsOfFile: told, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    private func pending() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder + "/.alarm-hook")) ?? []).filter { $0.hasSuffix(".json") }.count
    }

    private func waitUntil(_ what: String, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(60)
        while !condition() {
            guard Date() < deadline else { return XCTFail("timed out waiting until \(what)") }
            usleep(10_000)
        }
    }

    private func stop(_ hook: AlarmHook) {
        hook.beginStopping()
        XCTAssertTrue(hook.waitUntilStopped(deadline: .now() + 30))
    }

    func testEachRaiseAndClearRunsOnceInOrderAndARestartDoesNotTellARaiseTwice() {
        let first = hook()
        first.start(resumeWindow: .seconds(3_600))
        first.tell(event(.silence, .raised, raised: [.silence], detail: "every channel below -60.0 dBFS"))
        first.tell(event(.silence, .raised, raised: [.silence]))
        first.tell(event(.clipping, .raised, raised: [.silence, .clipping]))
        first.tell(event(.clipping, .cleared, raised: [.silence]))
        first.tell(event(.loudness, .cleared, raised: [.silence]))
        waitUntil("three runs") { lines().count == 3 && pending() == 0 }
        XCTAssertEqual(lines(), [
            "capture-recv-alarm|raised|silence|field-1|silence|silence|every channel below -60.0 dBFS",
            "capture-recv-alarm|raised|clipping|field-1|clipping|silence,clipping|d",
            "capture-recv-alarm|cleared|clipping|field-1|clipping|silence|d",
        ], "a raise told once; a clear without its raise is not told")
        stop(first)

        // The receiver restarts: the silence alarm stands raised for the stream.
        let second = hook()
        second.start(resumeWindow: .seconds(3_600))
        XCTAssertEqual(second.restoredAlarms(of: stream), [.silence])
        XCTAssertEqual(second.restoredAlarms(of: stream), [], "given back once")
        XCTAssertEqual(second.restoredAlarms(of: other), [])
        second.tell(event(.silence, .raised, raised: [.silence], detail: "raised before the receiver restarted, not cleared since"))
        second.tell(event(.silence, .cleared, raised: [], detail: "peak -12.0 dBFS"))
        waitUntil("the clear ran") { lines().count == 4 && pending() == 0 }
        XCTAssertEqual(lines().last, "capture-recv-alarm|cleared|silence|field-1|silence||peak -12.0 dBFS")
        stop(second)
        XCTAssertEqual(((try? FileManager.default.contentsOfDirectory(atPath: folder + "/.alarm-hook/raised")) ?? []).filter { $0.hasSuffix(".json") }, [],
                       "nothing stands raised")
    }

    func testTheAlarmsOfAStreamThatDoesNotResumeAreToldClearedAfterTheResumeWindow() {
        let first = hook()
        first.start(resumeWindow: .seconds(3_600))
        first.tell(event(.noAudio, .raised, on: other, raised: [.noAudio]))
        first.tell(event(.linkDown, .raised, on: other, raised: [.linkDown]))
        waitUntil("two runs") { lines().count == 2 && pending() == 0 }
        stop(first)
        let second = hook()
        second.start(resumeWindow: .seconds(0))
        waitUntil("both cleared") { lines().count == 4 && pending() == 0 }
        XCTAssertEqual(Array(lines().suffix(2)), [
            "capture-recv-alarm|cleared|link-down|other|link-down|no-audio|the stream did not resume within the resume window after the receiver restarted",
            "capture-recv-alarm|cleared|no-audio|other|no-audio||the stream did not resume within the resume window after the receiver restarted",
        ])
        XCTAssertEqual(second.restoredAlarms(of: other), [], "nothing left to give back")
        stop(second)
    }

    func testARunNotCompletedBeforeAStopRunsAtTheNextStartAndIsNotToldTwice() throws {
        // The first run's command fails until a file exists: the receiver stops with it pending.
        let gate = folder + "/open"
        let command = "[ -e \(gate) ] && printf '%s %s\\n' \"$1\" \"$2\" >> \(told)"
        let first = AlarmHook(outputDirectory: folder, settings: .init(command: command), logger: Logger(label: "test"))
        first.start(resumeWindow: .seconds(3_600))
        first.tell(event(.silence, .raised, raised: [.silence]))
        waitUntil("its journal entry is written") { pending() == 1 }
        stop(first)
        XCTAssertTrue(FileManager.default.createFile(atPath: gate, contents: nil))
        let second = AlarmHook(outputDirectory: folder, settings: .init(command: command), logger: Logger(label: "test"))
        second.start(resumeWindow: .seconds(3_600))
        waitUntil("the raise ran at the next start") { lines().count == 1 && pending() == 0 }
        XCTAssertEqual(second.restoredAlarms(of: stream), [.silence], "it stands raised")
        second.tell(event(.silence, .raised, raised: [.silence]))
        second.tell(event(.silence, .cleared, raised: []))
        waitUntil("the clear ran") { lines().count == 2 && pending() == 0 }
        XCTAssertEqual(lines(), ["raised silence", "cleared silence"])
        stop(second)
    }
}
