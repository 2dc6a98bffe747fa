import CaptureALSA
import CaptureCore
import TestSupport
import XCTest

/// Listing capture devices and failing clearly when there is none.
final class ALSADeviceTests: ALSATestCase {
    func testDeviceListShowsTheTestPCMsWithTheirDescriptions() {
        let devices = ALSADeviceList.captureDevices()
        XCTAssertEqual(devices.map(\.name), ALSATestPCMs.all.map(\.name))
        XCTAssertTrue(devices.contains(ALSADevice(name: "alsatest_s16_stereo", description: "capture-streamer test: s16 stereo 48 kHz")))
        XCTAssertTrue(devices.contains(ALSADevice(name: "alsatest_integer_stereo", description: "capture-streamer test: integer stereo only")))
    }

    func testDeviceListMatchesArecord() throws {
        // `arecord -L` prints each name, then its description lines indented.
        let output = try runArecordList()
        let names = output.split(separator: "\n").filter { !$0.hasPrefix(" ") }.map(String.init)
        XCTAssertEqual(ALSADeviceList.captureDevices().map(\.name), names)
    }

    func testDefaultDeviceThatCannotBeOpenedNamesListDevicesAndToneSource() {
        // The test configuration defines no `default`, like a machine without a sound card.
        XCTAssertThrowsError(
            try ALSASource(requested: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), periodFrames: 480, bufferCount: 3)
        ) { error in
            guard case CaptureError.deviceUnavailable(let failure) = error else { return XCTFail("unexpected \(error)") }
            let message = failure.message(naming: LibrarySettingNames())
            XCTAssertTrue(message.contains("cannot open ALSA capture device 'default'"), message)
            XCTAssertTrue(message.contains("Run `ALSADeviceList.captureDevices()` to see the capture devices"), message)
            XCTAssertTrue(message.contains("or use `SourceSettings.tone` to send a test tone"), message)
        }
    }

    func testMissingHardwareDeviceNamesListDevicesAndToneSource() {
        XCTAssertThrowsError(
            try ALSASource(device: "hw:CARD=NoSuchCard", requested: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), periodFrames: 480, bufferCount: 3)
        ) { error in
            guard case CaptureError.deviceUnavailable(let failure) = error else { return XCTFail("unexpected \(error)") }
            let message = failure.message(naming: LibrarySettingNames())
            XCTAssertTrue(message.contains("'hw:CARD=NoSuchCard'"), message)
            XCTAssertTrue(message.contains("Run `ALSADeviceList.captureDevices()` to see the capture devices"), message)
            XCTAssertTrue(message.contains("or use `SourceSettings.tone` to send a test tone"), message)
        }
    }

    private func runArecordList() throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["arecord", "-L"]
        process.environment = ProcessInfo.processInfo.environment.merging(configuration.environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        return String(decoding: data, as: UTF8.self)
    }
}
