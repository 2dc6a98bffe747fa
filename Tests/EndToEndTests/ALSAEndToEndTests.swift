import CAF
import CaptureCore
import Foundation
import TestSupport
import XCTest

/// capture-send --source alsa through real libasound, over the file-plugin PCMs of a test ALSA
/// configuration (there is no sound card): what the device gives arrives bit for bit.
final class ALSAEndToEndTests: XCTestCase {
    private static let stereo = ALSATestPCM(
        name: "capturetest", description: "Test capture PCM\nreads a raw fixture",
        fixtureFormat: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), fixtureFrames: 96_000
    )
    private static let integerOnly = ALSATestPCM(
        name: "integeronly", description: "Integer stereo only", constraint: .integerStereoOnly,
        fixtureFormat: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), fixtureFrames: 48_000
    )

    func testCapturedSamplesArriveBitForBit() throws {
        let alsa = try ALSATestConfiguration(pcms: [Self.stereo])
        let receiver = try ReceiverUnderTest()
        // The file plugin is not paced: a pool larger than the fixture means no buffer is ever
        // missing, so nothing may be lost and the file must equal the fixture.
        let sender = try ChildProcess(Products.send, [
            receiver.address, "--source", "alsa", "--device", "capturetest", "--rate", "48000", "--channels", "2",
            "--format", "s16", "--duration", "2", "--buffers", "64", "--buffer-seconds", "0.05", "--stream-name", "alsa",
        ], environment: alsa.environment)
        XCTAssertEqual(sender.wait(seconds: 60), 0, sender.standardError)
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertEqual(caf.format, .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16))
        XCTAssertEqual(try caf.readAudioData(), alsa.fixture("capturetest"), "the stored audio is the fixture, bit for bit")
        XCTAssertEqual(try SndFileReader.read(path: file.path).frames, 96_000)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testListDevicesShowsTheConfiguredPCMs() throws {
        let alsa = try ALSATestConfiguration(pcms: [Self.stereo, Self.integerOnly])
        let list = try ChildProcess(Products.send, ["--list-devices"], environment: alsa.environment)
        XCTAssertEqual(list.wait(), 0, list.standardError)
        XCTAssertTrue(list.standardOutput.contains("capturetest"), list.standardOutput)
        XCTAssertTrue(list.standardOutput.contains("Test capture PCM"), list.standardOutput)
        XCTAssertTrue(list.standardOutput.contains("integeronly"), list.standardOutput)
    }

    func testAFormatTheDeviceCannotGiveIsStreamedAsWhatItGivesOrRefusedWhenStrict() throws {
        let alsa = try ALSATestConfiguration(pcms: [Self.integerOnly])
        let receiver = try ReceiverUnderTest()
        let arguments = [
            receiver.address, "--source", "alsa", "--device", "integeronly", "--rate", "48000", "--channels", "2",
            "--format", "f32", "--duration", "0.5", "--buffers", "64", "--buffer-seconds", "0.05", "--stream-name", "fallback",
            "--log-level", "warning",
        ]
        let strict = try ChildProcess(Products.send, arguments + ["--strict-format"], environment: alsa.environment)
        XCTAssertNotEqual(strict.wait(seconds: 30), 0)
        XCTAssertTrue(strict.standardError.contains("f32"), strict.standardError)
        XCTAssertEqual(strict.standardError.split(separator: "\n").count, 1, strict.standardError)
        XCTAssertTrue(receiver.files().isEmpty, "nothing is recorded for a refused format")

        let lenient = try ChildProcess(Products.send, arguments, environment: alsa.environment)
        XCTAssertEqual(lenient.wait(seconds: 60), 0, lenient.standardError)
        XCTAssertTrue(lenient.standardError.contains("another format than asked"), lenient.standardError)
        let file = try XCTUnwrap(receiver.files().first)
        let caf = try CAFFile.read(path: file.path)
        XCTAssertNotEqual(caf.format.pcmSampleFormat, .f32, "the handshake carried what the device really gives")
        XCTAssertEqual(caf.format.channelCount, 2)
        XCTAssertEqual(receiver.stop(), 0)
    }

    func testNoDeviceNamesListDevicesAndTheToneSource() throws {
        let alsa = try ALSATestConfiguration(pcms: [Self.stereo])  // defines no `default` PCM
        let result = try ChildProcess(Products.send, ["127.0.0.1:9", "--duration", "1"], environment: alsa.environment)
        XCTAssertNotEqual(result.wait(seconds: 30), 0)
        XCTAssertTrue(result.standardError.contains("--list-devices"), result.standardError)
        XCTAssertTrue(result.standardError.contains("--source tone"), result.standardError)
        XCTAssertEqual(result.standardError.split(separator: "\n").count, 1, result.standardError)
    }
}
