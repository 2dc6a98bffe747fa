import CaptureALSA
import CaptureCore
import CaptureSources
import Foundation
import TestSupport
import XCTest

/// `AudioSources.open`, the source factory capture-send and the examples share: each kind of
/// source from its settings, a device's negotiation reported, `--reopen` and `--duration` applied,
/// and the errors of a source that cannot be opened.
final class AudioSourcesTests: ALSATestCase {
    /// Reads `source` to its end, or to `limit` frames (a test device runs on in silence past its
    /// fixture); returns the frames read and the bytes.
    private func readAll(_ source: any AudioSource, frameCapacity: Int = 480, limit: Int = 10_000_000) throws -> (frames: Int, bytes: [UInt8]) {
        let bytesPerFrame = Int(source.format.bytesPerFrame)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: frameCapacity * bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        try source.start()
        defer { source.close() }
        var frames = 0
        var bytes: [UInt8] = []
        reading: while frames < limit {
            switch try source.read(into: buffer, frameCapacity: frameCapacity) {
            case .frames(let count):
                frames += count
                bytes += buffer.prefix(count * bytesPerFrame)
            case .overrun(let lost):
                XCTFail("the file PCM hands everything over: no overrun (\(lost) frames)")
                break reading
            case .endOfStream:
                break reading
            }
        }
        return (frames, bytes)
    }

    /// A device with a duration: the device's audio, bit-exact, up to the duration; the negotiation
    /// reported as asked; with `reopen`, a way to stop its retries.
    func testADeviceWithADurationAndReopen() throws {
        let pcm = ALSATestPCMs.queue
        let events = EventList()
        let opened = try AudioSources.open(.device(DeviceSettings(
            name: pcm.name, requested: pcm.fixtureFormat, periodFrames: 480, bufferCount: 3, reopen: true, duration: .seconds(1.5))),
            events: { events.append($0) })
        XCTAssertEqual(opened.source.format, pcm.fixtureFormat)
        XCTAssertNotNil(opened.stopRetrying, "a reopening device can be told to stop retrying")
        let (frames, bytes) = try readAll(opened.source)
        XCTAssertEqual(frames, 72_000, "1.5 s at 48 kHz")
        XCTAssertTrue(bytes == Array(configuration.fixture(pcm.name).prefix(72_000 * 4)), "the device's audio, bit for bit")
        guard case .deviceOpened(let negotiation, asRequested: true)? = events.all.first else { return XCTFail("the device's opening is reported: \(events.all)") }
        XCTAssertEqual(negotiation.actual, pcm.fixtureFormat)
    }

    /// Without `reopen` there are no retries to stop, and without a duration no end: the device's
    /// audio as it comes (here its fixture, then the test device's silence).
    func testADeviceAsItIs() throws {
        let pcm = ALSATestPCMs.s24Mono44k
        let opened = try AudioSources.open(.device(DeviceSettings(name: pcm.name, requested: pcm.fixtureFormat, periodFrames: 1_323, bufferCount: 3)))
        XCTAssertNil(opened.stopRetrying)
        let (frames, bytes) = try readAll(opened.source, frameCapacity: 1_323, limit: pcm.fixtureFrames)
        XCTAssertGreaterThanOrEqual(frames, pcm.fixtureFrames, "no end of stream: a device runs until it is stopped")
        XCTAssertTrue(Array(bytes.prefix(pcm.fixtureFrames * 3)) == Array(configuration.fixture(pcm.name).prefix(pcm.fixtureFrames * 3)), "the device's audio, bit for bit")
    }

    func testAToneAndAFile() throws {
        let tone = try AudioSources.open(.tone(.init(frequency: 440, levelDBFS: -12, sampleRate: 44_100, channels: 1, sample: .s16, duration: .seconds(0.5), paced: false)))
        XCTAssertEqual(tone.source.format, .linearPCM(sampleRate: 44_100, channels: 1, sample: .s16))
        XCTAssertEqual(try readAll(tone.source).frames, 22_050)
        XCTAssertNil(tone.stopRetrying)
        let missing = "/nonexistent/take-\(UUID().uuidString).wav"
        XCTAssertThrowsError(try AudioSources.open(.file(path: missing, paced: false, duration: nil))) { error in
            XCTAssertTrue("\(error)".contains(missing), "\(error)")
        }
    }

    /// A device that does not exist: the same error `ALSASource` gives, naming the way out.
    func testADeviceThatDoesNotExist() {
        let requested = StreamFormat.linearPCM(sampleRate: 48_000, channels: 2, sample: .s16)
        XCTAssertThrowsError(try AudioSources.open(.device(DeviceSettings(name: "hw:97,0", requested: requested, periodFrames: 480, bufferCount: 3)))) { error in
            XCTAssertTrue("\(error)".contains("ALSADeviceList.captureDevices()"), "\(error)")
        }
    }
}

/// What the factory reported.
private final class EventList: @unchecked Sendable {
    // Sendability: `events` is read and written only under `lock`.
    private let lock = NSLock()
    private var events: [SourceEvent] = []
    func append(_ event: SourceEvent) { lock.withLock { events.append(event) } }
    var all: [SourceEvent] { lock.withLock { events } }
}
