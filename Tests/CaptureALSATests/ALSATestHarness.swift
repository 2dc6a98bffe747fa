import CaptureALSA
import CaptureCore
import Dispatch
import Foundation
import TestSupport
import XCTest

/// The PCMs every ALSA test uses; see `ALSATestConfiguration`.
enum ALSATestPCMs {
    static let s16Stereo48k = ALSATestPCM(
        name: "alsatest_s16_stereo", description: "capture-streamer test: s16 stereo 48 kHz",
        fixtureFormat: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), fixtureFrames: 48_000)
    static let s24Mono44k = ALSATestPCM(
        name: "alsatest_s24_mono", description: "capture-streamer test: s24 mono 44.1 kHz",
        fixtureFormat: .linearPCM(sampleRate: 44_100, channels: 1, sample: .s24), fixtureFrames: 44_100)
    /// Only integer formats and 2 channels; its fixture is laid out as s32 stereo, the format an
    /// f32 mono request ends up with.
    static let integerStereo = ALSATestPCM(
        name: "alsatest_integer_stereo", description: "capture-streamer test: integer stereo only",
        constraint: .integerStereoOnly,
        fixtureFormat: .linearPCM(sampleRate: 44_100, channels: 2, sample: .s32), fixtureFrames: 22_050)
    /// A long one for the queue tests (10 s at 48 kHz, 10 ms buffers).
    static let queue = ALSATestPCM(
        name: "alsatest_queue", description: "capture-streamer test: queue",
        fixtureFormat: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), fixtureFrames: 480_000)

    static let all = [s16Stereo48k, s24Mono44k, integerStereo, queue]
}

/// Base class: writes the test configuration once per test and points libasound at it.
class ALSATestCase: XCTestCase {
    var configuration: ALSATestConfiguration!

    override func setUpWithError() throws {
        configuration = try ALSATestConfiguration(pcms: ALSATestPCMs.all)
        configuration.activate()
    }

    override func tearDown() {
        configuration?.deactivate()
        configuration = nil
    }

    /// Opens a source on a test PCM with its fixture's format.
    func openSource(_ pcm: ALSATestPCM, periodFrames: Int = 480, bufferCount: Int = 3) throws -> ALSASource {
        try ALSASource(device: pcm.name, requested: pcm.fixtureFormat, periodFrames: periodFrames, bufferCount: bufferCount)
    }

    /// Reads `frames` frames in reads of `chunkFrames`, asserting each read fills its capacity.
    func readFrames(_ source: ALSASource, frames: Int, chunkFrames: Int, file: StaticString = #filePath, line: UInt = #line) throws -> [UInt8] {
        let bytesPerFrame = Int(source.format.bytesPerFrame)
        var captured: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkFrames * bytesPerFrame, alignment: 16)
        defer { chunk.deallocate() }
        while captured.count < frames * bytesPerFrame {
            let wanted = min(chunkFrames, frames - captured.count / bytesPerFrame)
            let result = try source.read(into: chunk, frameCapacity: wanted)
            XCTAssertEqual(result, .frames(wanted), file: file, line: line)
            guard case .frames(let count) = result, count > 0 else { break }
            captured += chunk.prefix(count * bytesPerFrame)
        }
        return captured
    }
}

/// Wraps an `ALSASource` for queue tests, because the file plugin never ends (past the fixture it
/// returns stale memory) and is not paced: it ends the stream after `frameLimit` frames, can claim
/// to be non-real-time (so the queue waits instead of overrunning), and can hold the capture thread
/// at a frame position until the test opens a gate. Every frame still comes through libasound.
final class ALSAHarnessSource: AudioSource, @unchecked Sendable {
    let inner: ALSASource
    let frameLimit: Int
    let isRealTime: Bool
    private let gateFrame: Int?
    private let gate = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var framesReadSoFar = 0
    private var waitingAtGate = false
    private var startCount = 0
    private var stopCount = 0
    /// Touched by the capture thread only.
    private var gatePassed = false

    init(_ inner: ALSASource, frameLimit: Int, isRealTime: Bool, gateAtFrame: Int? = nil) {
        self.inner = inner
        self.frameLimit = frameLimit
        self.isRealTime = isRealTime
        self.gateFrame = gateAtFrame
    }

    var format: StreamFormat { inner.format }
    var framesRead: Int { lock.withLock { framesReadSoFar } }
    var isWaitingAtGate: Bool { lock.withLock { waitingAtGate } }

    /// Lets a capture thread held at the gate go on.
    func openGate() { gate.signal() }

    /// How often the queue started and stopped the source.
    var starts: Int { lock.withLock { startCount } }
    var stops: Int { lock.withLock { stopCount } }

    func start() throws(CaptureError) {
        try inner.start()
        lock.withLock { startCount += 1 }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, frameCapacity: Int) throws(CaptureError) -> SourceReadResult {
        let alreadyRead = framesRead
        if let gateFrame, alreadyRead >= gateFrame, !gatePassed {
            lock.withLock { waitingAtGate = true }
            gate.wait()
            lock.withLock { waitingAtGate = false }
            gatePassed = true
        }
        let remaining = frameLimit - alreadyRead
        guard remaining > 0 else { return .endOfStream }
        let result = try inner.read(into: buffer, frameCapacity: min(frameCapacity, remaining))
        if case .frames(let count) = result {
            lock.withLock { framesReadSoFar += count }
        }
        return result
    }

    func stop() {
        inner.stop()
        lock.withLock { stopCount += 1 }
    }

    func close() { inner.close() }
}

/// What a queue's callback received, collected from the delivery thread.
final class ALSADeliveries: @unchecked Sendable {
    struct Delivery {
        var sampleTime: Int64
        var frames: Int
        var framesLostBefore: Int
        var bufferAddress: UInt
        var bytes: [UInt8]
    }

    private let lock = NSLock()
    private var storage: [Delivery] = []

    func append(_ buffer: CapturedBuffer) {
        let delivery = Delivery(
            sampleTime: buffer.startTime.sampleTime, frames: buffer.packetCount,
            framesLostBefore: buffer.framesLostBefore,
            bufferAddress: UInt(bitPattern: buffer.bytes.baseAddress), bytes: Array(buffer.bytes))
        lock.withLock { storage.append(delivery) }
    }

    var all: [Delivery] { lock.withLock { storage } }
    var frameCount: Int { lock.withLock { storage.reduce(0) { $0 + $1.frames } } }
}

/// Polls `condition` every millisecond until it holds or `seconds` pass.
func pollUntil(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        usleep(1_000)
    }
    return true
}
