import Foundation
import TestSupport
import XCTest

/// A take for the alarm tests: a 440 Hz tone at -12 dBFS, digital silence, and the tone again, as a
/// 48 kHz stereo 16-bit WAV made with sox and handed to the unprivileged user that runs the sender.
enum SilenceTake {
    /// Writes the take (`before` seconds of tone, `silence` seconds of silence, `after` seconds of
    /// tone) to `path`.
    static func make(at path: String, before: Int, silence: Int, after: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        func tone(_ seconds: Int, _ volume: String) -> [String] { ["synth", "\(seconds)", "sine", "440", "vol", volume] }
        let made = try ToolRunner.run("sox", ["-n", "-r", "48000", "-c", "2", "-b", "16", path] + tone(before, "0.25") + [":"] + tone(silence, "0") + [":"] + tone(after, "0.25"))
        XCTAssertEqual(made.exitStatus, 0, made.errorText, file: file, line: line)
        Unprivileged.handOver(path)
    }
}
