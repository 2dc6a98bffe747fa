import CAF
import CSndFile
import CaptureCore
import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Shared pieces of the resilience tests: fast reconnect settings, polling, expected audio.
enum Resilience {
    /// Sender options that reconnect fast and detect a dead receiver in 2 s.
    static func senderOptions(spool: URL) -> [String] {
        ["--spool", spool.path, "--reconnect-min", "0.05", "--reconnect-max", "0.3", "--idle-timeout", "2", "--log-level", "info"]
    }

    /// Receiver options that detect a dead sender in 2 s.
    static let receiverOptions = ["--idle-timeout", "2"]

    /// Polls `condition` every 20 ms until it holds or `seconds` pass; fails the test on timeout.
    static func waitUntil(_ what: String, seconds: Double = 60, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline {
                XCTFail("timed out waiting until \(what)", file: file, line: line)
                return
            }
            usleep(20_000)
        }
    }

    /// Waits for `child` to exit; after `seconds` it is killed with SIGKILL (a sender that cannot
    /// deliver ignores SIGTERM while it retries, by design) and the test sees a failure status.
    @discardableResult
    static func finish(_ child: ChildProcess, seconds: Double = 90) -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while child.process.isRunning, Date() < deadline { usleep(20_000) }
        if child.process.isRunning { child.signal(SIGKILL) }
        return child.wait(seconds: 10)
    }

    /// The size of the file at `url` (0 when missing).
    static func size(_ url: URL?) -> Int64 {
        guard let url, let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else { return 0 }
        return (attributes[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// A 16-bit stereo 48 kHz WAV of pseudo-random samples in `folder`, and its raw little-endian bytes.
    static func randomWAV(in folder: URL, seconds: Double, seed: UInt64) throws -> (path: String, bytes: [UInt8]) {
        let path = folder.appendingPathComponent("source-\(seed).wav").path
        var generator = SampleGenerator(seed: seed)
        let ints = (0..<Int(48_000 * seconds) * 2).map { _ in (Int32(bitPattern: generator.next()) >> 16) << 16 }
        try writeWAV(path: path, subtype: Int32(SF_FORMAT_PCM_16), rate: 48_000, channels: 2, ints: ints)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ints.count * 2)
        for value in ints { withUnsafeBytes(of: Int16(value >> 16).littleEndian) { bytes += $0 } }
        return (path, bytes)
    }

    /// The largest `acked_s=` of a sender's status lines (`--status-interval`): how much audio its
    /// receiver acknowledged, and so the sender released.
    static func acknowledgedSeconds(_ log: String) -> Double {
        log.split(separator: "\n").compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("acked_s=") }.flatMap { Double($0.dropFirst("acked_s=".count)) }
        }.max() ?? 0
    }

    /// The interleaved 16-bit little-endian bytes of capture-send's default tone (440 Hz, -12 dBFS).
    static func toneBytes(frames: Int, rate: Int = 48_000, channels: Int = 2) throws -> [UInt8] {
        let tone = try ToneSource(settings: .init(
            frequency: 440, levelDBFS: -12, sampleRate: Double(rate), channels: channels, sample: .s16,
            duration: .seconds(Double(frames) / Double(rate)), paced: false))
        var bytes = [UInt8](repeating: 0, count: frames * channels * 2)
        var filled = 0
        while filled < frames {
            let result = try bytes.withUnsafeMutableBytes { raw in
                try tone.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[(filled * channels * 2)...]), frameCapacity: frames - filled)
            }
            guard case .frames(let count) = result, count > 0 else { break }
            filled += count
        }
        return bytes
    }

    /// Every packet of a CAF file, in order.
    static func packets(of path: String) throws -> [[UInt8]] {
        let file = try CAFFile.read(path: path)
        let count = file.packetCount ?? 0
        return try (0..<count).map { try file.readPacket($0) }
    }

    /// The number of packets ffprobe counts in a file, or nil if it cannot read it.
    static func ffprobePacketCount(_ path: String) throws -> Int? {
        let result = try ToolRunner.run("ffprobe", ["-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", path])
        guard result.succeeded else { return nil }
        return Int(result.outputText.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The sample index just past the last audio or gap record in a capture-send spool folder for
    /// one stream (every `seg-*.spool` file; format in docs/DURABILITY.md), read independently of
    /// the sender's code.
    static func spooledEnd(streamFolder: URL) throws -> Int64 {
        var end: Int64 = 0
        let names = try FileManager.default.contentsOfDirectory(atPath: streamFolder.path).filter { $0.hasPrefix("seg-") }.sorted()
        for name in names {
            let bytes = [UInt8](try Data(contentsOf: streamFolder.appendingPathComponent(name)))
            var offset = 0
            func integer(_ at: Int, _ count: Int) -> UInt64 { bytes[at..<(at + count)].reduce(0) { $0 << 8 | UInt64($1) } }
            while offset + 12 <= bytes.count {
                let length = Int(integer(offset, 4))
                let body = offset + 12
                guard body + length <= bytes.count, length >= 9 else { break }
                let type = bytes[body]
                if type == 0x41 {  // audio: type, sequence, first sample time, frame count
                    end = max(end, Int64(bitPattern: integer(body + 9, 8)) + Int64(integer(body + 17, 4)))
                } else if type == 0x47 {  // gap: type, sequence, sample time, length
                    end = max(end, Int64(bitPattern: integer(body + 9, 8)) + Int64(bitPattern: integer(body + 17, 8)))
                }
                offset = body + length
            }
        }
        return end
    }
}
