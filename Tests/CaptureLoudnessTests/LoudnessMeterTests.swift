import CaptureCore
import CaptureLoudness
import Foundation
import TestSupport
import XCTest

/// The loudness meter against an independent one: `ffmpeg -af ebur128=peak=true` on the same file
/// reports momentary and short-term loudness and each channel's true peak every 100 ms; the
/// meter, fed the file's samples 100 ms at a time and read after each, must agree within 0.5 LU
/// (and 0.5 dB), in every sample format the sender captures, mono and stereo.
final class LoudnessMeterTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        for tool in ["sox", "ffmpeg"] where ToolRunner.find(tool) == nil { throw XCTSkip("\(tool) is not installed") }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("loudness-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// One 100 ms line of ffmpeg's ebur128 filter.
    private struct Reference {
        var time: Double
        var momentary: Double
        var shortTerm: Double
        var truePeaks: [Double]
    }

    /// A 6 s test file: pink noise, a quiet 997 Hz tone, a loud 3 kHz tone (2 s each), made by sox.
    private func makeProgramme(channels: Int) throws -> String {
        let path = directory.appendingPathComponent("programme-\(channels).wav").path
        // -R: the same noise every run. Random noise once put a peak at a reading's edge, where
        // the two meters' interpolator delays place it in different 100 ms readings (CI, session 45).
        let made = try ToolRunner.run("sox", [
            "-R", "-n", "-r", "48000", "-c", "\(channels)", "-b", "16", path,
            "synth", "2", "pinknoise", "vol", "0.3", ":", "synth", "2", "sine", "997", "vol", "0.1", ":", "synth", "2", "sine", "3000", "vol", "0.9",
        ])
        XCTAssertEqual(made.exitStatus, 0, made.errorText)
        return path
    }

    private func references(_ path: String) throws -> [Reference] {
        let result = try ToolRunner.run("ffmpeg", ["-nostats", "-hide_banner", "-i", path, "-af", "ebur128=peak=true", "-f", "null", "-"])
        XCTAssertEqual(result.exitStatus, 0, result.errorText)
        return result.errorText.split(separator: "\n").compactMap { line -> Reference? in
            func number(after key: String) -> Double? {
                guard let range = line.range(of: key) else { return nil }
                return Double(line[range.upperBound...].split(separator: " ").first ?? "")
            }
            guard let time = number(after: "t: "), let momentary = number(after: "M:"), let shortTerm = number(after: "S:"),
                  let peaks = line.range(of: "FTPK:"), let unit = line.range(of: "dBFS", range: peaks.upperBound..<line.endIndex)
            else { return nil }
            let truePeaks = line[peaks.upperBound..<unit.lowerBound].split(separator: " ").map { Double($0) ?? -.infinity }
            return Reference(time: time, momentary: momentary, shortTerm: shortTerm, truePeaks: truePeaks)
        }
    }

    /// The file's samples as sox converts them: `encoding` (`signed-integer` or `floating-point`) at `bits`.
    private func samples(_ path: String, bits: Int, encoding: String) throws -> Data {
        let result = try ToolRunner.run("sox", [path, "-t", "raw", "-e", encoding, "-b", "\(bits)", "-L", "-"])
        XCTAssertEqual(result.exitStatus, 0, result.errorText)
        return result.standardOutput
    }

    /// Feeds `bytes` to a meter 4,800 frames (100 ms) at a time and reads it after each.
    private func readings(_ bytes: Data, sample: PCMSampleFormat, channels: Int) throws -> [Loudness] {
        let meter = try XCTUnwrap(LoudnessMeter(format: .linearPCM(sampleRate: 48_000, channels: channels, sample: sample)))
        let bytesPerFrame = sample.bytesPerSample * channels
        var readings: [Loudness] = []
        var offset = 0
        var sampleTime: Int64 = 0
        while offset < bytes.count {
            let frames = min(4_800, (bytes.count - offset) / bytesPerFrame)
            bytes.withUnsafeBytes { raw in
                let slice = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + frames * bytesPerFrame)])
                meter.measure(CapturedBuffer(bytes: slice, startTime: CaptureTimestamp(sampleTime: sampleTime, hostTime: 0), packetCount: frames))
            }
            if let reading = meter.take() { readings.append(reading) }
            offset += frames * bytesPerFrame
            sampleTime += Int64(frames)
        }
        return readings
    }

    private func assertAgrees(_ readings: [Loudness], with references: [Reference], channels: Int, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(readings.count, 60, file: file, line: line)
        XCTAssertEqual(references.count, 60, file: file, line: line)
        var compared = (momentary: 0, shortTerm: 0, truePeak: 0)
        for (index, (reading, reference)) in zip(readings, references).enumerated() {
            // ffmpeg shows −120.7 until its window has filled: 400 ms (momentary), 3 s (short-term).
            if reference.time > 0.45 {
                XCTAssertEqual(reading.momentaryLUFS, reference.momentary, accuracy: 0.5, "momentary at \(reference.time) s", file: file, line: line)
                compared.momentary += 1
            }
            if reference.time > 2.95 {
                XCTAssertEqual(reading.shortTermLUFS, reference.shortTerm, accuracy: 0.5, "short-term at \(reference.time) s", file: file, line: line)
                compared.shortTerm += 1
            }
            XCTAssertEqual(reading.truePeakDBTP.count, channels, file: file, line: line)
            XCTAssertEqual(reference.truePeaks.count, channels, "ffmpeg's line \(index)", file: file, line: line)
            // In the 100 ms after a section starts, the two interpolators' different delays put the
            // last peaks of the louder section before it in different readings.
            let afterBoundary = [2.0, 4.0].contains { reference.time > $0 && reference.time < $0 + 0.15 }
            for (peak, expected) in zip(reading.truePeakDBTP, reference.truePeaks) where !afterBoundary {
                XCTAssertEqual(peak, expected, accuracy: 0.5, "true peak at \(reference.time) s", file: file, line: line)
                compared.truePeak += 1
            }
        }
        XCTAssertEqual(compared.momentary, 56, file: file, line: line)
        XCTAssertEqual(compared.shortTerm, 31, file: file, line: line)
        XCTAssertEqual(compared.truePeak, 58 * channels, file: file, line: line)
    }

    func testStereoAgreesWithFFmpegInEverySampleFormat() throws {
        let path = try makeProgramme(channels: 2)
        let expected = try references(path)
        let s16 = try readings(samples(path, bits: 16, encoding: "signed-integer"), sample: .s16, channels: 2)
        assertAgrees(s16, with: expected, channels: 2)
        // The same samples in the wider formats measure the same.
        for (sample, bits, encoding) in [(PCMSampleFormat.s24, 24, "signed-integer"), (.s32, 32, "signed-integer"), (.f32, 32, "floating-point")] {
            let wider = try readings(samples(path, bits: bits, encoding: encoding), sample: sample, channels: 2)
            XCTAssertEqual(wider.count, s16.count, "\(sample)")
            for (reading, reference) in zip(wider, s16) {
                XCTAssertEqual(reading.momentaryLUFS, reference.momentaryLUFS, accuracy: 0.001, "\(sample)")
                XCTAssertEqual(reading.shortTermLUFS, reference.shortTermLUFS, accuracy: 0.001, "\(sample)")
                for (peak, other) in zip(reading.truePeakDBTP, reference.truePeakDBTP) { XCTAssertEqual(peak, other, accuracy: 0.001, "\(sample)") }
            }
        }
    }

    func testMonoAgreesWithFFmpeg() throws {
        let path = try makeProgramme(channels: 1)
        assertAgrees(try readings(samples(path, bits: 16, encoding: "signed-integer"), sample: .s16, channels: 1), with: try references(path), channels: 1)
    }

    /// A full-scale sine at a quarter of the sample rate, 45° out of phase with the samples: every
    /// sample is at ±full scale, and the wave between them peaks 3 dB above it. The sample peak
    /// cannot see that; the true peak must.
    func testTruePeakSeesPeaksBetweenTheSamples() throws {
        let frames = 48_000
        var bytes = Data()
        for index in 0..<frames {
            let value = sin(Double.pi / 2 * Double(index) + Double.pi / 4) * sqrt(2.0)
            let sample = Int16(max(-32_768, min(32_767, (value * 32_767).rounded())))
            withUnsafeBytes(of: sample.littleEndian) { bytes.append(contentsOf: $0) }
        }
        let reading = try XCTUnwrap(readings(bytes, sample: .s16, channels: 1).last)
        XCTAssertGreaterThan(reading.truePeakDBTP[0], 2.5, "true peak of a sine whose samples all sit at full scale")
        XCTAssertLessThan(reading.truePeakDBTP[0], 3.5)
    }

    func testSilenceIsMinusInfinityAndNothingMeasuredIsNoReading() throws {
        let meter = try XCTUnwrap(LoudnessMeter(format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)))
        XCTAssertNil(meter.take(), "nothing measured yet")
        let silence = [UInt8](repeating: 0, count: 48_000 * 4)
        silence.withUnsafeBytes { meter.measure(CapturedBuffer(bytes: $0, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: 48_000)) }
        let reading = try XCTUnwrap(meter.take())
        XCTAssertEqual(reading.momentaryLUFS, -.infinity)
        XCTAssertEqual(reading.shortTermLUFS, -.infinity)
        XCTAssertEqual(reading.truePeakDBTP, [-.infinity, -.infinity])
        XCTAssertNil(meter.take(), "nothing measured since the last reading")
    }

    func testOnlyLinearPCMIsMeasured() {
        XCTAssertNil(LoudnessMeter(format: StreamFormat.opus(channels: 2, framesPerPacket: 960)))
        XCTAssertNotNil(LoudnessMeter(format: .linearPCM(sampleRate: 44_100, channels: 6, sample: .f32)))
    }
}
