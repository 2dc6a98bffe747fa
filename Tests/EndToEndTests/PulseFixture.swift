import CSndFile
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A private PulseAudio server with a null sink `fixture` (48 kHz stereo s16), run as the user the
/// executables run as: what `paplay -d fixture` plays, ALSA's `pulse` device captures in real time
/// from the sink's monitor, bit for bit. The real-time paced capture device the tests have instead of
/// a sound card (scripts/install-deps.sh installs pulseaudio, pulseaudio-utils, libasound2-plugins).
final class PulseFixture {
    let folder: URL
    private var runtime: URL { folder.appendingPathComponent("run") }

    /// The environment that points a child process at this server.
    var environment: [String: String] {
        ["HOME": folder.appendingPathComponent("home").path, "PULSE_RUNTIME_PATH": runtime.path, "XDG_RUNTIME_DIR": runtime.path]
    }

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("pulse-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(folder.appendingPathComponent("home"))
        try Unprivileged.makeDirectory(runtime)
        try start()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Starts the server (again, after `kill()`), with the null sink as the default source's sink.
    func start() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio") else {
            throw TestFailure("pulseaudio is missing: scripts/install-deps.sh installs pulseaudio, pulseaudio-utils and libasound2-plugins")
        }
        let daemon = try ChildProcess("/usr/bin/pulseaudio", [
            "--daemonize=yes", "-n", "--exit-idle-time=-1", "--disallow-exit", "--log-target=file:\(folder.path)/pulse.log",
            "--load=module-native-protocol-unix", "--load=module-null-sink sink_name=fixture rate=48000 channels=2 format=s16le",
        ], environment: environment)
        guard daemon.wait(seconds: 20) == 0 else { throw TestFailure("pulseaudio did not start: \(daemon.standardError) \(log)") }
        guard waitFor(10, { FileManager.default.fileExists(atPath: runtime.appendingPathComponent("native").path) }) else {
            throw TestFailure("pulseaudio did not open its socket: \(log)")
        }
        let source = try ChildProcess("/usr/bin/pactl", ["set-default-source", "fixture.monitor"], environment: environment)
        guard source.wait(seconds: 10) == 0 else { throw TestFailure("pactl failed: \(source.standardError)") }
    }

    /// Plays a WAV file into the null sink in real time.
    func play(_ wav: String) throws -> ChildProcess {
        try ChildProcess("/usr/bin/paplay", ["-d", "fixture", wav], environment: environment)
    }

    /// Kills the server (SIGKILL): the capture device disappears.
    func kill() {
        guard let text = try? String(contentsOf: runtime.appendingPathComponent("pid"), encoding: .utf8), let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return }
        _ = Glibc.kill(pid, SIGKILL)
        _ = waitFor(10) { Glibc.kill(pid, 0) != 0 }
        try? FileManager.default.removeItem(at: runtime.appendingPathComponent("pid"))
        try? FileManager.default.removeItem(at: runtime.appendingPathComponent("native"))
    }

    private var log: String { (try? String(contentsOf: folder.appendingPathComponent("pulse.log"), encoding: .utf8)) ?? "" }

    /// A 48 kHz s16 stereo WAV whose frame i carries the counter `first + i`: its low 16 bits on the
    /// left, its high 16 bits XOR 0x5A5A on the right (so no frame is silent).
    static func counterWAV(at path: String, first: Int, seconds: Double) throws {
        var ints: [Int32] = []
        let frames = Int(48_000 * seconds)
        ints.reserveCapacity(frames * 2)
        for index in 0..<frames {
            let counter = first + index
            ints.append(Int32(Int16(bitPattern: UInt16(counter & 0xFFFF))) << 16)
            ints.append(Int32(Int16(bitPattern: UInt16(((counter >> 16) & 0xFFFF) ^ 0x5A5A))) << 16)
        }
        try writeWAV(path: path, subtype: Int32(SF_FORMAT_PCM_16), rate: 48_000, channels: 2, ints: ints)
        Unprivileged.handOver(path)
    }

    /// The counter runs in s16 stereo samples (silent frames, where nothing played, separate runs):
    /// each run's first counter and length, and how many frames broke a run's +1 steps.
    static func counterRuns(_ samples: [Int16]) -> (runs: [(first: Int, frames: Int)], breaks: Int) {
        var runs: [(first: Int, frames: Int)] = []
        var breaks = 0
        var previous: Int?
        for frame in 0..<(samples.count / 2) {
            let left = UInt16(bitPattern: samples[2 * frame]), right = UInt16(bitPattern: samples[2 * frame + 1])
            if left == 0, right == 0 {
                previous = nil
                continue
            }
            let counter = Int(left) | Int(right ^ 0x5A5A) << 16
            if let previous, counter == previous + 1 {
                runs[runs.count - 1].frames += 1
            } else {
                if previous != nil { breaks += 1 }
                runs.append((counter, 1))
            }
            previous = counter
        }
        return (runs, breaks)
    }
}
