import CaptureALSA
import CaptureCore
import TestSupport
import XCTest

/// `ALSASource` reading through real libasound from file-plugin PCMs.
final class ALSASourceCaptureTests: ALSATestCase {
    func testS16Stereo48kCapturesTheFixtureBitForBit() throws {
        let pcm = ALSATestPCMs.s16Stereo48k
        let source = try openSource(pcm, periodFrames: 480, bufferCount: 3)
        defer { source.close() }
        XCTAssertEqual(source.format, pcm.fixtureFormat)
        XCTAssertTrue(source.isRealTime)
        try source.start()
        let captured = try readFrames(source, frames: pcm.fixtureFrames, chunkFrames: 480)
        XCTAssertEqual(captured.count, pcm.fixtureFrames * 4)
        XCTAssertTrue(captured == configuration.fixture(pcm.name), "captured audio differs from the fixture")
        XCTAssertEqual(source.overrunCount, 0)
    }

    func testS24Mono44kCapturesTheFixtureBitForBitInReadsLargerThanAPeriod() throws {
        let pcm = ALSATestPCMs.s24Mono44k
        let source = try openSource(pcm, periodFrames: 441, bufferCount: 4)
        defer { source.close() }
        XCTAssertEqual(source.format, pcm.fixtureFormat)
        XCTAssertEqual(source.format.bytesPerFrame, 3)
        try source.start()
        // 1000-frame reads span several 441-frame periods: each read still fills its whole capacity.
        let captured = try readFrames(source, frames: pcm.fixtureFrames, chunkFrames: 1_000)
        XCTAssertTrue(captured == configuration.fixture(pcm.name), "captured audio differs from the fixture")
    }

    func testPeriodAndBufferFollowTheQueueBufferSize() throws {
        // `--buffer-seconds 0.01 --buffers 3` at 48 kHz: 480-frame periods, a 1440-frame ring.
        let pcm = ALSATestPCMs.s16Stereo48k
        let periodFrames = BufferSizing.framesPerBuffer(format: pcm.fixtureFormat, duration: .milliseconds(10))
        XCTAssertEqual(periodFrames, 480)
        let source = try openSource(pcm, periodFrames: periodFrames, bufferCount: 3)
        defer { source.close() }
        XCTAssertEqual(source.negotiation.requestedPeriodFrames, 480)
        XCTAssertEqual(source.negotiation.periodFrames, 480)
        XCTAssertEqual(source.negotiation.requestedBufferFrames, 1_440)
        XCTAssertEqual(source.negotiation.bufferFrames, 1_440)
        XCTAssertTrue(source.negotiation.formatMatchesRequest)
        XCTAssertEqual(
            source.negotiation.description,
            "ALSA device 'alsatest_s16_stereo': capturing s16 48000 Hz 2 ch; period 480 frames (asked 480), buffer 1440 frames (asked 1440)")
    }

    func testStopThenStartContinuesWhereCaptureLeftOff() throws {
        let pcm = ALSATestPCMs.s16Stereo48k
        let source = try openSource(pcm)
        defer { source.close() }
        try source.start()
        var captured = try readFrames(source, frames: 4_800, chunkFrames: 480)
        source.stop()
        try source.start()
        captured += try readFrames(source, frames: 4_800, chunkFrames: 480)
        XCTAssertTrue(captured == Array(configuration.fixture(pcm.name).prefix(9_600 * 4)))
    }

    func testRoomBeforeOverrunIsTheRingBuffersFreeSpaceAndUnknownWhileStopped() throws {
        let source = try openSource(ALSATestPCMs.s16Stereo48k)
        defer { source.close() }
        try source.start()
        _ = try readFrames(source, frames: 960, chunkFrames: 480)
        // The null slave is never behind real time: it always holds a whole ring buffer unread, so
        // there is no room left and the queue drains it at once when it has no free buffer.
        XCTAssertEqual(source.framesBeforeOverrun(), 0)
        source.stop()
        XCTAssertNil(source.framesBeforeOverrun(), "a stopped device says nothing about its room")
    }

    func testReadWhileStoppedIsALifecycleErrorNotALostDevice() throws {
        let source = try openSource(ALSATestPCMs.s16Stereo48k)
        defer { source.close() }
        try source.start()
        source.stop()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 480 * 4, alignment: 16)
        defer { buffer.deallocate() }
        XCTAssertThrowsError(try source.read(into: buffer, frameCapacity: 480)) { error in
            guard case CaptureError.invalidState(let message) = error else { return XCTFail("unexpected \(error)") }
            XCTAssertTrue(message.contains("call start() first"), message)
        }
    }

    func testReopenOpensTheSameDeviceAgainWithTheSameFormat() throws {
        let pcm = ALSATestPCMs.s16Stereo48k
        let source = try openSource(pcm)
        defer { source.close() }
        try source.start()
        _ = try readFrames(source, frames: 960, chunkFrames: 480)
        let formatBefore = source.format

        let estimatedGap = try source.reopen()
        XCTAssertGreaterThanOrEqual(estimatedGap, 0)
        XCTAssertEqual(source.format, formatBefore)
        try source.start()
        // The file plugin reopens its fixture, so capture starts over at its first frame.
        let captured = try readFrames(source, frames: 960, chunkFrames: 480)
        XCTAssertTrue(captured == Array(configuration.fixture(pcm.name).prefix(960 * 4)))
    }

    func testReopenFailsClearlyWhileTheDeviceIsGoneAndSucceedsWhenItIsBack() throws {
        let pcm = ALSATestPCMs.s16Stereo48k
        let source = try openSource(pcm)
        defer { source.close() }
        source.close()

        // The device disappears: a configuration without it.
        let without = try ALSATestConfiguration(pcms: [ALSATestPCMs.s24Mono44k])
        without.activate()
        XCTAssertThrowsError(try source.reopen()) { error in
            guard case CaptureError.deviceUnavailable(let failure) = error else { return XCTFail("unexpected \(error)") }
            let message = failure.message(naming: LibrarySettingNames())
            XCTAssertTrue(message.contains("'alsatest_s16_stereo'"), message)
            XCTAssertTrue(message.contains("ALSADeviceList.captureDevices()"), message)
        }
        without.deactivate()

        // It comes back.
        configuration.activate()
        XCTAssertNoThrow(try source.reopen())
        try source.start()
        let captured = try readFrames(source, frames: 480, chunkFrames: 480)
        XCTAssertTrue(captured == Array(configuration.fixture(pcm.name).prefix(480 * 4)))
    }

    func testReadAfterCloseIsALifecycleError() throws {
        let source = try openSource(ALSATestPCMs.s16Stereo48k)
        source.close()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 480 * 4, alignment: 16)
        defer { buffer.deallocate() }
        XCTAssertThrowsError(try source.read(into: buffer, frameCapacity: 480)) { error in
            XCTAssertEqual(error as? CaptureError, .invalidState("ALSA capture device 'alsatest_s16_stereo' is closed; reopen() it first"))
        }
    }
}
