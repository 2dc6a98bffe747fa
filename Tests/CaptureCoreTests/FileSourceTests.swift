import CSndFile
import CaptureCore
import CaptureSndFile
import Foundation
import XCTest

final class FileSourceTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("filesource-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Writes a file with libsndfile from 32-bit left-justified integer samples.
    private func writeFile(_ name: String, format: Int32, rate: Int32, channels: Int32, samples: [Int32]) throws -> String {
        let path = directory.appendingPathComponent(name).path
        var info = SF_INFO(frames: 0, samplerate: rate, channels: channels, format: format, sections: 0, seekable: 0)
        let handle = try XCTUnwrap(sf_open(path, Int32(SFM_WRITE), &info), String(cString: sf_strerror(nil)))
        var copy = samples
        XCTAssertEqual(sf_write_int(handle, &copy, sf_count_t(samples.count)), sf_count_t(samples.count))
        sf_close(handle)
        return path
    }

    private func readAll(_ source: FileSource, bufferDuration: Duration = .milliseconds(10)) throws -> (bytes: [UInt8], starts: [Int64]) {
        let delivered = DeliveredBuffers()
        let queue = try CaptureQueue(source: source, configuration: .init(bufferCount: 3, bufferDuration: bufferDuration)) { delivered.append($0) }
        try queue.start()
        XCTAssertEqual(queue.waitForCompletion(), .endOfStream)
        queue.dispose()
        return (delivered.all.flatMap(\.bytes), delivered.all.map(\.sampleTime))
    }

    func testA24BitBufferLongerThanTheScratchIsFilledWhole() throws {
        // 0.5 s buffers of 48 kHz stereo: 24,000 frames a read, several pieces of the 4,096-frame scratch.
        let samples: [Int32] = (0..<(30_000 * 2)).map { (index: Int) -> Int32 in
            let value = (index * 104_729) % 16_777_216 - 8_388_608
            return Int32(value) << 8
        }
        let path = try writeFile("long.wav", format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_24), rate: 48_000, channels: 2, samples: samples)
        let (bytes, starts) = try readAll(try FileSource(path: path, paced: false), bufferDuration: .milliseconds(500))
        XCTAssertEqual(starts, [0, 24_000], "every read but the last fills its whole buffer")
        var expected: [UInt8] = []
        for sample in samples {
            let value = UInt32(bitPattern: sample >> 8)
            expected += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF)]
        }
        XCTAssertEqual(bytes, expected)
    }

    func test24BitWAVIsDeliveredAsPacked24BitSamples() throws {
        // 3 channels, 1000 frames of distinct 24-bit values, including the extremes.
        var samples: [Int32] = []
        for frame in 0..<1_000 {
            for channel in 0..<3 {
                let value = Int32((frame * 7_919 + channel * 1_000_003) % 16_777_216) - 8_388_608
                samples.append(value << 8)
            }
        }
        samples[0] = Int32(-8_388_608) << 8
        samples[1] = Int32(8_388_607) << 8
        let path = try writeFile("ramp.wav", format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_24), rate: 44_100, channels: 3, samples: samples)
        let source = try FileSource(path: path, paced: false)
        XCTAssertEqual(source.format, .linearPCM(sampleRate: 44_100, channels: 3, sample: .s24))
        XCTAssertFalse(source.isRealTime)
        let (bytes, starts) = try readAll(source)
        var expected: [UInt8] = []
        for sample in samples {
            let value = UInt32(bitPattern: sample >> 8)
            expected += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF)]
        }
        XCTAssertEqual(bytes, expected)
        XCTAssertEqual(starts, [0, 441, 882])
    }

    func testFLACAndFloatFilesKeepTheirOwnFormat() throws {
        let samples = (0..<480).map { Int32($0 - 240) << 16 }
        let flac = try writeFile("tone.flac", format: Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16), rate: 48_000, channels: 2, samples: samples)
        let flacSource = try FileSource(path: flac, paced: false)
        XCTAssertEqual(flacSource.format.pcmSampleFormat, .s16)
        let flacBytes = try readAll(flacSource).bytes
        XCTAssertEqual(flacBytes, samples.flatMap { sample -> [UInt8] in
            let value = UInt16(bitPattern: Int16(sample >> 16))
            return [UInt8(value & 0xFF), UInt8(value >> 8)]
        })

        let floatPath = try writeFile("f.caf", format: Int32(SF_FORMAT_CAF | SF_FORMAT_FLOAT), rate: 96_000, channels: 1, samples: samples)
        let floatSource = try FileSource(path: floatPath, paced: false)
        XCTAssertEqual(floatSource.format, .linearPCM(sampleRate: 96_000, channels: 1, sample: .f32))
        XCTAssertEqual(try readAll(floatSource).bytes.count, 480 * 4)
    }

    func testRawReadsStopAtTheEndOfTheAudioDataAndBigEndianFilesAreConverted() throws {
        // A WAV (read as raw little-endian bytes) with a chunk after its data, as many editors write.
        let samples: [Int32] = (0..<(1_000 * 2)).map { (index: Int) -> Int32 in
            let value = (index * 7_919) % 65_536 - 32_768
            return Int32(value) << 16
        }
        let path = try writeFile("tagged.wav", format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), rate: 48_000, channels: 2, samples: samples)
        var file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        file += Array("LIST".utf8) + [16, 0, 0, 0] + [UInt8](repeating: 0x7F, count: 16)
        let riffSize = UInt32(file.count - 8)
        file.replaceSubrange(4..<8, with: withUnsafeBytes(of: riffSize.littleEndian) { Array($0) })
        try Data(file).write(to: URL(fileURLWithPath: path))
        let expected = samples.flatMap { sample -> [UInt8] in
            let value = UInt16(bitPattern: Int16(sample >> 16))
            return [UInt8(value & 0xFF), UInt8(value >> 8)]
        }
        XCTAssertEqual(try readAll(try FileSource(path: path, paced: false)).bytes, expected, "the audio, not the chunk after it")
        // The same samples in big-endian AIFF: converted to the little-endian bytes streamed.
        let aiff = try writeFile("big.aiff", format: Int32(SF_FORMAT_AIFF | SF_FORMAT_PCM_16), rate: 48_000, channels: 2, samples: samples)
        XCTAssertEqual(try readAll(try FileSource(path: aiff, paced: false)).bytes, expected)
        // 32-bit integer WAV, raw, with a duration limit.
        let wide = try writeFile("wide.wav", format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_32), rate: 48_000, channels: 2, samples: samples)
        let limited = try readAll(try FileSource(path: wide, paced: false, duration: .seconds(0.01))).bytes
        XCTAssertEqual(limited, samples.prefix(480 * 2).flatMap { sample in withUnsafeBytes(of: sample.littleEndian) { Array($0) } })
    }

    func testDurationLimitsTheFrames() throws {
        let samples = [Int32](repeating: 1 << 16, count: 8_000)
        let path = try writeFile("one-second.wav", format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), rate: 8_000, channels: 1, samples: samples)
        let source = try FileSource(path: path, paced: false, duration: .seconds(0.25))
        XCTAssertEqual(try readAll(source).bytes.count, 2_000 * 2)
    }

    /// Issue 27, item 10: a duration whose frames do not fit an Int64 is the whole file, never a trap.
    func testAnAbsurdDurationIsTheWholeFile() throws {
        let samples = [Int32](repeating: 1 << 16, count: 800)
        let path = try writeFile("short.wav", format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), rate: 8_000, channels: 1, samples: samples)
        for duration: Duration in [.seconds(Int64.max), .seconds(1e18), .seconds(9.3e18 / 8_000), .seconds(1)] {
            XCTAssertEqual(try readAll(try FileSource(path: path, paced: false, duration: duration)).bytes.count, 800 * 2, "\(duration)")
        }
        XCTAssertEqual(try readAll(try FileSource(path: path, paced: false, duration: .seconds(-1))).bytes.count, 0)
        XCTAssertEqual(try readAll(try FileSource(path: path, paced: false, duration: .zero)).bytes.count, 0)
    }

    /// Issue 27, item 10: a tone whose frames would not fit an Int64 is refused, never a trap.
    func testAToneTooLongToCountIsRefused() throws {
        for duration: Duration in [.seconds(Int64.max), .seconds(9.3e18 / 48_000), .seconds(-1), .nanoseconds(-1)] {
            XCTAssertThrowsError(try ToneSource(settings: .init(duration: duration)), "\(duration)") { error in
                guard case CaptureError.unsupportedFormat(let message) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(message.hasSuffix("s must be 0 or more, and less than 9e18 frames long"), message)
            }
        }
        XCTAssertNoThrow(try ToneSource(settings: .init(duration: .seconds(31_622_400))), "366 days, capture-send's longest --duration")
    }

    func testMissingFileSaysWhatToCheck() {
        XCTAssertThrowsError(try FileSource(path: directory.appendingPathComponent("nope.wav").path)) { error in
            guard case CaptureError.openFailed(let message) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("nope.wav"))
            XCTAssertTrue(message.contains("check the path"))
        }
    }
}
