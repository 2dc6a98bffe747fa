import CaptureCore
import CaptureWire
import Foundation
import TestSupport
import XCTest

/// AudioData levels (PROTOCOL.md §6.3.1): the integer representation, the receiver's checks, and
/// the vectors that carry them.
final class AudioLevelsTests: XCTestCase {
    private func audio(peak: [UInt32], rms: [UInt32]) -> Capture_V1_AudioData {
        var audio = WireFixtures.pcmAudio()
        audio.levels = .with {
            $0.peak = peak
            $0.rms = rms
        }
        return audio
    }

    func testLinearLevelsBecomeHundredthsOfADecibelBelowFullScale() {
        let table: [(linear: Double, hundredths: UInt32)] = [
            (1, 0), (2, 0), (.infinity, 0), (0.5, 602), (0.251_188_643, 1_200), (0.001, 6_000),
            (0.000_001, 12_000), (0.000_000_1, 12_000), (0, 12_000), (-0.5, 12_000), (.nan, 12_000), (-.infinity, 12_000),
        ]
        for row in table {
            XCTAssertEqual(AudioLevels.hundredths(linear: row.linear), row.hundredths, "\(row.linear)")
        }
    }

    func testTheReceiverChecksCountRangeAndOrder() {
        let table: [(audio: Capture_V1_AudioData, check: AudioLevels.Check)] = [
            (WireFixtures.pcmAudio(), .absent),
            (audio(peak: [], rms: []), .absent),
            (audio(peak: [1_200], rms: [1_500]), .invalid(reason: "1 peak and 1 RMS values for 2 channels")),
            (audio(peak: [1_200, 1_200], rms: [1_500]), .invalid(reason: "2 peak and 1 RMS values for 2 channels")),
            (audio(peak: [1_200, 12_001], rms: [1_500, 12_001]),
             .invalid(reason: "channel 2 is below the −120 dBFS floor (peak 12001, RMS 12001 hundredths of a dB)")),
            (audio(peak: [1_500, 0], rms: [1_200, 0]), .invalid(reason: "channel 1 has an RMS louder than its peak")),
        ]
        for row in table {
            XCTAssertEqual(AudioLevels.check(row.audio, channelCount: 2), row.check)
        }
        guard case .valid(let levels) = AudioLevels.check(audio(peak: [1_200, 12_000], rms: [1_501, 12_000]), channelCount: 2) else {
            return XCTFail("valid levels refused")
        }
        XCTAssertEqual(levels.peakDBFS, [-12, -120])
        XCTAssertEqual(levels.rmsDBFS, [-15.01, -120])
        XCTAssertEqual(levels.message, audio(peak: [1_200, 12_000], rms: [1_501, 12_000]).levels, "round trip")
    }

    func testLoudnessBecomesSignedHundredthsWithinTheWiresRange() {
        let table: [(decibels: Double, hundredths: Int32)] = [
            (-23, -2_300), (-23.456, -2_346), (0, 0), (2.5, 250), (20, 2_000), (35, 2_000), (.infinity, 2_000),
            (-120, -12_000), (-150, -12_000), (-.infinity, -12_000), (.nan, -12_000),
        ]
        for row in table {
            XCTAssertEqual(AudioLevels.hundredths(decibels: row.decibels), row.hundredths, "\(row.decibels)")
        }
    }

    func testLoudnessTravelsBesideThePeaksAndIsChecked() {
        let loudness = Loudness(momentaryLUFS: -17.25, shortTermLUFS: -.infinity, truePeakDBTP: [0.5, -.infinity])
        let sent = AudioLevels(linearPeaks: [0.5, 0], linearRMS: [0.25, 0], loudness: loudness)
        XCTAssertEqual(sent.momentaryLUFS, -17.25)
        XCTAssertEqual(sent.shortTermLUFS, -120, "silence is the floor")
        XCTAssertEqual(sent.truePeakDBTP, [0.5, -120])
        var audio = audio(peak: [], rms: [])
        audio.levels = sent.message
        XCTAssertEqual(AudioLevels.check(audio, channelCount: 2), .valid(sent), "round trip")

        // Older senders send no loudness: the peaks alone are valid levels without it.
        let older = AudioLevels(linearPeaks: [0.5, 0], linearRMS: [0.25, 0])
        XCTAssertNil(older.momentaryLUFS)
        XCTAssertNil(older.shortTermLUFS)
        XCTAssertEqual(older.truePeakDBTP, [])
        audio.levels = older.message
        XCTAssertFalse(audio.levels.hasMomentaryLoudness)
        XCTAssertEqual(AudioLevels.check(audio, channelCount: 2), .valid(older))

        func checked(_ change: (inout Capture_V1_Levels) -> Void) -> AudioLevels.Check {
            var audio = self.audio(peak: [602, 12_000], rms: [1_204, 12_000])
            change(&audio.levels)
            return AudioLevels.check(audio, channelCount: 2)
        }
        XCTAssertEqual(checked { $0.momentaryLoudness = 2_001 }, .invalid(reason: "the momentary loudness (2001 hundredths of a LU) is outside −120...+20 LUFS"))
        XCTAssertEqual(checked { $0.shortTermLoudness = -12_001 }, .invalid(reason: "the short-term loudness (-12001 hundredths of a LU) is outside −120...+20 LUFS"))
        XCTAssertEqual(checked { $0.truePeak = [100] }, .invalid(reason: "1 true peaks for 2 channels"))
        XCTAssertEqual(checked { $0.truePeak = [100, 2_500] }, .invalid(reason: "channel 2's true peak (2500 hundredths of a dB) is outside −120...+20 dBTP"))
        guard case .valid(let levels) = checked({ $0.shortTermLoudness = -2_300 }) else { return XCTFail("valid loudness refused") }
        XCTAssertEqual(levels.shortTermLUFS, -23)
        XCTAssertNil(levels.momentaryLUFS, "absent, not 0 LUFS")
        // Loudness without peaks is no levels at all.
        XCTAssertEqual(AudioLevels.check({ var audio = self.audio(peak: [], rms: []); audio.levels.shortTermLoudness = -2_300; return audio }(), channelCount: 2), .absent)
    }

    func testTheLevelsVectorCarriesWhatTheSenderMeasuresForItsPayload() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.valid.first { $0.file == "frame-03-audio-data-pcm-levels.hex" })
        var decoder = FrameDecoder(role: .sender)
        let messages = try decoder.decode(try WireVectorCatalog.load(vector))
        guard case .audioData(let audio)? = messages.first else { return XCTFail("no AudioData") }
        guard case .valid(let levels) = AudioLevels.check(audio, channelCount: 2) else { return XCTFail("levels refused") }
        XCTAssertEqual(levels.peakDBFS, [0, 0])
        XCTAssertEqual(levels.rmsDBFS, [-6, -6])
        var meter = LevelMeter(format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        let payload = [UInt8](audio.payload)
        payload.withUnsafeBytes { bytes in
            meter.measure(CapturedBuffer(bytes: bytes, startTime: CaptureTimestamp(sampleTime: 0, hostTime: 0), packetCount: 4))
        }
        XCTAssertEqual(AudioLevels(meter.take()), levels, "the sender's meter gives these levels for this payload")
    }

    func testTheBadLevelsVectorIsAValidFrameWhoseLevelsAreIgnored() throws {
        let vector = try XCTUnwrap(WireVectorCatalog.valid.first { $0.file == "frame-03-audio-data-bad-levels.hex" })
        var decoder = FrameDecoder(role: .receiver)
        var state = ReceiverStreamState()
        try state.receivePreamble(version: 1)
        _ = try state.receive(.hello(WireFixtures.hello()))
        try state.accept(resumingAt: StreamPosition(nextSequence: 1, nextSampleTime: 0))
        _ = try decoder.decode(WirePreamble.bytes())
        let messages = try decoder.decode(try WireVectorCatalog.load(vector))
        guard case .writeAudio(let audio)? = try messages.first.map({ try state.receive($0) }) else { return XCTFail("audio refused") }
        XCTAssertEqual(AudioLevels.check(audio, channelCount: 2), .invalid(reason: "1 peak and 1 RMS values for 2 channels"))
    }
}
