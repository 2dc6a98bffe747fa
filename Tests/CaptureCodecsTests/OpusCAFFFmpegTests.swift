import CaptureCodecs
import CaptureCore
import Foundation
import XCTest

/// Real encoder packets in a CAF (written by the test fixture packer) open in ffprobe and decode in
/// ffmpeg to the source. ffmpeg 5.1 reads `pakt` packet sizes but neither applies the priming and
/// remainder frames nor reads an Opus `kuki` (docs/OPUS.md); the test checks what it really does.
final class OpusCAFFFmpegTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("opus-caf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func makeCAF(
        frames: Int, channels: Int, settings: OpusEncoderSettings, withCookie: Bool = true
    ) throws -> (url: URL, source: [Float], encoder: OpusEncoder, caf: OpusTestCAF) {
        let source = OpusTestTools.twoTone(frames: frames, channels: channels, sampleRate: 48_000)
        let format = StreamFormat.linearPCM(sampleRate: 48_000, channels: channels, sample: .s16)
        let encoder = try OpusEncoder(inputFormat: format, settings: settings)
        let stream = try OpusTestTools.encode(OpusTestTools.bytes(source, as: .s16), with: encoder, chunkFrames: [441])
        let caf = OpusTestCAF(
            channels: channels, framesPerPacket: Int(encoder.outputFormat.framesPerPacket),
            magicCookie: withCookie ? encoder.magicCookie : nil, packetSizes: stream.packetSizes, payload: stream.payload,
            primingFrames: encoder.primingFrames, remainderFrames: stream.remainderFrames
        )
        let url = directory.appendingPathComponent("x.caf")
        try caf.write(to: url)
        return (url, source, encoder, caf)
    }

    private func probe(_ url: URL) throws -> [String: Any] {
        let json = try OpusTestTools.run("ffprobe", [
            "-v", "error", "-count_packets", "-show_entries",
            "stream=codec_name,channels,sample_rate,nb_read_packets,duration_ts", "-of", "json", url.path,
        ])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let streams = try XCTUnwrap(object["streams"] as? [[String: Any]])
        XCTAssertEqual(streams.count, 1)
        return try XCTUnwrap(streams.first)
    }

    private func ffmpegDecode(_ url: URL, channels: Int) throws -> [Float] {
        let data = try OpusTestTools.run("ffmpeg", ["-v", "error", "-i", url.path, "-f", "f32le", "-ac", "\(channels)", "-"])
        return data.withUnsafeBytes { raw in
            (0..<(raw.count / 4)).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) }
        }
    }

    func testFFprobeSeesOpusWithTheChannelsAndPacketsOfTheFile() throws {
        let (url, _, encoder, caf) = try makeCAF(frames: 48_000 + 500, channels: 2, settings: OpusEncoderSettings(bitrate: 128_000))
        let stream = try probe(url)
        XCTAssertEqual(stream["codec_name"] as? String, "opus")
        XCTAssertEqual(stream["channels"] as? Int, 2)
        XCTAssertEqual(stream["sample_rate"] as? String, "48000")
        XCTAssertEqual(stream["nb_read_packets"] as? String, "\(caf.packetSizes.count)")
        XCTAssertEqual(caf.packetSizes.count, 51, "ceil((48500 + 312) / 960)")
        XCTAssertEqual(caf.validFrames, 48_500)
        XCTAssertEqual(encoder.outputFormat.framesPerPacket, 960)
    }

    func testFFmpegDecodesToTheSourceOnceThePrimingIsDropped() throws {
        let frames = 48_000 + 500
        let (url, source, encoder, caf) = try makeCAF(frames: frames, channels: 2, settings: OpusEncoderSettings(bitrate: 128_000))
        let decoded = try ffmpegDecode(url, channels: 2)
        let totalFrames = caf.packetSizes.count * 960
        let decodedFrames = decoded.count / 2
        let valid: ArraySlice<Float>
        if decodedFrames == frames {
            // An ffmpeg that honours the pakt priming and remainder gives exactly the source.
            valid = decoded[...]
        } else {
            // ffmpeg 5.1 decodes every frame of every packet: the priming and the remainder stay in.
            XCTAssertEqual(decodedFrames, totalFrames, "ffmpeg 5.1 ignores pakt priming/remainder and the kuki pre-skip")
            valid = decoded[(encoder.primingFrames * 2)..<((encoder.primingFrames + frames) * 2)]
        }
        XCTAssertEqual(valid.count, source.count)
        let snr = OpusTestTools.snr(valid, source[...])
        XCTAssertGreaterThanOrEqual(snr, 30, "SNR \(snr) dB through ffmpeg's decoder")
    }

    func testFFmpegReadsTheFileTheSameWithoutAKuki() throws {
        let frames = 9_600
        let (url, source, encoder, _) = try makeCAF(
            frames: frames, channels: 1, settings: OpusEncoderSettings(bitrate: 64_000, frameDuration: .ms10), withCookie: false
        )
        let stream = try probe(url)
        XCTAssertEqual(stream["codec_name"] as? String, "opus")
        XCTAssertEqual(stream["channels"] as? Int, 1)
        let decoded = try ffmpegDecode(url, channels: 1)
        XCTAssertEqual(decoded.count % 480, 0, "whole 10 ms packets")
        let valid = decoded[encoder.primingFrames..<(encoder.primingFrames + frames)]
        XCTAssertGreaterThanOrEqual(OpusTestTools.snr(valid, source[...]), 25)
    }

    func testBERVarintsAreBigEndianSevenBitGroups() {
        XCTAssertEqual(OpusTestCAF.berVarint(0), [0x00])
        XCTAssertEqual(OpusTestCAF.berVarint(127), [0x7F])
        XCTAssertEqual(OpusTestCAF.berVarint(128), [0x81, 0x00])
        XCTAssertEqual(OpusTestCAF.berVarint(1_283), [0x8A, 0x03])
        XCTAssertEqual(OpusTestCAF.berVarint(16_384), [0x81, 0x80, 0x00])
    }
}
