import CaptureCodecs
import CaptureCore
import CaptureSender
import CaptureWire
import Foundation
import XCTest

/// The sender meters what it captures and sends each AudioData's levels with it, for PCM and Opus
/// alike (measured before encoding). ToneSource's level is the sine's peak: a sine peaking at
/// −12 dBFS has an RMS of −15.01 dBFS (−12 − 3.01), and one with an RMS of −12 dBFS peaks at
/// −8.99 dBFS. Both are tested, to ±0.5 dB. The EBU R128 loudness of a stereo 1 kHz sine is its
/// peak level in LUFS (BS.1770's −0.691 dB offset cancels the K-weighting's gain at 1 kHz, and the
/// two channels' sum the sine's 3.01 dB crest), and its true peak is its peak: tested once the
/// 400 ms momentary window is full, to ±0.5 LU. The short-term window (3 s) of a 2 s tone holds
/// the tone's seconds so far and silence before it: 10·log10(t / 3) below.
final class PipelineLevelsTests: XCTestCase {
    /// Runs a 2 s tone through the pipeline unpaced and returns the AudioData messages it logged.
    private func audioMessages(peakDBFS: Double, encoder makeEncoder: (StreamFormat) throws -> any AudioEncoder) throws -> [Capture_V1_AudioData] {
        let source = try ToneSource(settings: .init(frequency: 1_000, levelDBFS: peakDBFS, channels: 2, duration: .seconds(2), paced: false))
        let log = PacketLog(producerIsRealTime: false)
        let pipeline = try CapturePipeline(
            source: source, encoder: try makeEncoder(source.format), configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(100)), log: log,
            loudness: .always)
        try pipeline.start()
        guard case .success = pipeline.waitAndFinish() else { throw XCTSkip("capture did not finish") }
        return try log.entries(from: 1, maxCount: 10_000).compactMap { entry in
            guard case .audioData(let audio) = entry.wireMessage else { return nil }
            return audio
        }
    }

    private func assertLevels(
        _ messages: [Capture_V1_AudioData], peak: Double, rms: Double, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        XCTAssertGreaterThan(messages.count, 5, file: file, line: line)
        // The last message of an Opus stream holds the encoder's padding; the first, its start.
        var measuredLoudness = 0
        for audio in messages.dropFirst().dropLast() {
            guard case .valid(let levels) = AudioLevels.check(audio, channelCount: 2) else {
                return XCTFail("AudioData \(audio.sequence) carries no valid levels", file: file, line: line)
            }
            for channel in 0..<2 {
                XCTAssertEqual(levels.peakDBFS[channel], peak, accuracy: 0.5, "peak, AudioData \(audio.sequence)", file: file, line: line)
                XCTAssertEqual(levels.rmsDBFS[channel], rms, accuracy: 0.5, "RMS, AudioData \(audio.sequence)", file: file, line: line)
            }
            let seconds = Double(audio.firstSampleTime + Int64(audio.frameCount)) / 48_000
            guard seconds >= 0.5 else { continue }
            XCTAssertEqual(try XCTUnwrap(levels.momentaryLUFS, file: file, line: line), peak, accuracy: 0.5, "momentary loudness at \(seconds) s", file: file, line: line)
            XCTAssertEqual(
                try XCTUnwrap(levels.shortTermLUFS, file: file, line: line), peak + 10 * log10(min(seconds, 3) / 3), accuracy: 0.5,
                "short-term loudness at \(seconds) s", file: file, line: line)
            XCTAssertEqual(levels.truePeakDBTP.count, 2, file: file, line: line)
            for truePeak in levels.truePeakDBTP {
                XCTAssertEqual(truePeak, peak, accuracy: 0.5, "true peak, AudioData \(audio.sequence)", file: file, line: line)
            }
            measuredLoudness += 1
        }
        XCTAssertGreaterThan(measuredLoudness, 3, "loudness checked in several AudioData", file: file, line: line)
    }

    func testPCMAudioCarriesTheLevelsOfASineAtMinus12DBFSPeak() throws {
        let messages = try audioMessages(peakDBFS: -12) { try PCMEncoder(inputFormat: $0) }
        try assertLevels(messages, peak: -12, rms: -15.01)
    }

    func testPCMAudioCarriesTheLevelsOfASineAtMinus12DBFSRMS() throws {
        let messages = try audioMessages(peakDBFS: -12 + 3.0103) { try PCMEncoder(inputFormat: $0) }
        try assertLevels(messages, peak: -8.99, rms: -12)
    }

    func testOpusAudioCarriesTheLevelsMeasuredBeforeEncoding() throws {
        let messages = try audioMessages(peakDBFS: -12) { try OpusEncoder(inputFormat: $0) }
        try assertLevels(messages, peak: -12, rms: -15.01)
        let frames = messages.reduce(0) { $0 + Int($1.frameCount) }
        XCTAssertGreaterThanOrEqual(frames, 96_000, "the whole tone was encoded")
    }

    func testAFileSentFasterThanRealTimeCarriesPeaksWithoutLoudness() throws {
        let source = try ToneSource(settings: .init(frequency: 1_000, levelDBFS: -12, channels: 2, duration: .seconds(1), paced: false))
        let log = PacketLog(producerIsRealTime: false)
        let pipeline = try CapturePipeline(source: source, encoder: try PCMEncoder(inputFormat: source.format), configuration: .init(bufferCount: 3, bufferDuration: .milliseconds(100)), log: log)
        try pipeline.start()
        guard case .success = pipeline.waitAndFinish() else { throw XCTSkip("capture did not finish") }
        let messages = try log.entries(from: 1, maxCount: 10_000).compactMap { entry -> Capture_V1_AudioData? in
            guard case .audioData(let audio) = entry.wireMessage else { return nil }
            return audio
        }
        XCTAssertEqual(messages.count, 10)
        for audio in messages {
            guard case .valid(let levels) = AudioLevels.check(audio, channelCount: 2) else { return XCTFail("no levels") }
            XCTAssertEqual(levels.peakDBFS[0], -12, accuracy: 0.5)
            XCTAssertNil(levels.momentaryLUFS)
            XCTAssertNil(levels.shortTermLUFS)
            XCTAssertEqual(levels.truePeakDBTP, [])
        }
        XCTAssertNil(pipeline.loudness)
    }

    func testSilenceIsTheFloorNotMinusInfinity() throws {
        let levels = try XCTUnwrap(AudioLevels(LevelMeter.Reading(
            channels: [LevelMeter.ChannelLevel(peak: 0, rms: 0, clipped: false), LevelMeter.ChannelLevel(peak: 1.5, rms: 1.2, clipped: true)],
            frames: 480)))
        XCTAssertEqual(levels.peakHundredths, [12_000, 0])
        XCTAssertEqual(levels.rmsDBFS, [-120, 0], "silence is −120 dBFS; over full scale (float) reads 0 dBFS")
    }
}
