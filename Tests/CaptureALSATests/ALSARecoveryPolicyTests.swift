import CALSA
@testable import CaptureALSA
import CaptureCore
import XCTest

/// The pure parts of xrun handling and format choice, which no file-plugin PCM can provoke.
final class ALSARecoveryPolicyTests: XCTestCase {
    func testOverrunCostsTheDiscardedBufferPlusTheStall() {
        // 1440 frames were waiting when the device stopped; it stayed stopped 25 ms at 48 kHz.
        XCTAssertEqual(ALSAOverrunEstimate.lostFrames(framesInBuffer: 1_440, bufferFrames: 1_440, stalledSeconds: 0.025, sampleRate: 48_000), 2_640)
    }

    func testOverrunCostsAtLeastOneBufferWhenTimestampsAreUnusable() {
        XCTAssertEqual(ALSAOverrunEstimate.lostFrames(framesInBuffer: nil, bufferFrames: 1_440, stalledSeconds: nil, sampleRate: 48_000), 1_440)
        XCTAssertEqual(ALSAOverrunEstimate.lostFrames(framesInBuffer: 100, bufferFrames: 1_440, stalledSeconds: -3, sampleRate: 48_000), 1_440)
        // A realtime-clock trigger stamp against the monotonic clock gives decades: not believed.
        XCTAssertEqual(ALSAOverrunEstimate.lostFrames(framesInBuffer: 1_500, bufferFrames: 1_440, stalledSeconds: 1.7e9, sampleRate: 48_000), 1_500)
    }

    func testReadErrorsAreClassified() {
        XCTAssertEqual(ALSAReadFailure(code: -Int(EAGAIN)), .retry)
        XCTAssertEqual(ALSAReadFailure(code: -Int(EINTR)), .retry)
        XCTAssertEqual(ALSAReadFailure(code: -Int(EPIPE)), .overrun)
        XCTAssertEqual(ALSAReadFailure(code: -Int(ESTRPIPE)), .suspended)
        XCTAssertEqual(ALSAReadFailure(code: -Int(ENODEV)), .lost)
        XCTAssertEqual(ALSAReadFailure(code: -Int(EBADFD)), .lost)
        XCTAssertEqual(ALSAReadFailure(code: -Int(EIO)), .lost)
    }

    func testDeviceLostMessageSaysWhatHappenedAndWhatToDo() {
        let error = ALSAErrorText.deviceLost(device: "hw:1,0", code: -Int32(ENODEV), during: "capturing")
        XCTAssertEqual(error, .deviceLost(DeviceFailure(device: "hw:1,0", activity: .using("capturing"), code: -Int32(ENODEV), reason: "No such device")))
        XCTAssertEqual(error.description, "ALSA capture device 'hw:1,0' was lost while capturing: No such device. Check that it is still connected; with `DeviceSettings.reopen` capture-send reopens it and records the gap.")
    }

    func testSubstituteSampleFormatsKeepPrecisionFirst() {
        XCTAssertEqual(ALSASampleFormat.preferenceOrder(for: .s16), [.s16, .s24, .s32, .f32])
        XCTAssertEqual(ALSASampleFormat.preferenceOrder(for: .s24), [.s24, .s32, .f32, .s16])
        XCTAssertEqual(ALSASampleFormat.preferenceOrder(for: .f32), [.f32, .s32, .s24, .s16])
        for sample in PCMSampleFormat.allCases {
            XCTAssertEqual(ALSASampleFormat.sampleFormat(of: ALSASampleFormat.alsaFormat(of: sample)), sample)
            XCTAssertEqual(Set(ALSASampleFormat.preferenceOrder(for: sample)), Set(PCMSampleFormat.allCases))
        }
        XCTAssertEqual(ALSASampleFormat.alsaFormat(of: .s24), SND_PCM_FORMAT_S24_3LE)
    }
}
