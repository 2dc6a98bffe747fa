import CaptureCodecs
import CaptureCore
import Foundation
import TestSupport
import XCTest

@testable import CaptureListen

/// Signals, Opus packets, an independent Ogg page reader and decoders for the listen tests.
enum ListenTestSupport {
    /// One AudioData's worth of audio as the receiver offers it.
    struct Offer {
        var payload: Data
        var packetSizes: [UInt32]
        var frameCount: Int
    }

    /// A sine tone of `frequency` at amplitude 0.5, the same on every channel, as floats.
    static func tone(frequency: Double = 440, frames: Int, channels: Int, sampleRate: Double, startFrame: Int = 0) -> [Float] {
        var samples = [Float](repeating: 0, count: frames * channels)
        for frame in 0..<frames {
            let value = Float(0.5 * sin(2 * .pi * frequency * Double(startFrame + frame) / sampleRate))
            for channel in 0..<channels { samples[frame * channels + channel] = value }
        }
        return samples
    }

    /// Integer or float PCM bytes of `samples`, `bits` wide, little- or big-endian.
    static func pcmBytes(_ samples: [Float], bits: Int, float: Bool = false, bigEndian: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(samples.count * bits / 8)
        for sample in samples {
            var bytes: [UInt8] = []
            if float {
                if bits == 64 {
                    let pattern = Double(sample).bitPattern
                    for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: pattern >> UInt64(shift))) }
                } else {
                    let pattern = sample.bitPattern
                    for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: pattern >> UInt32(shift))) }
                }
            } else {
                let scale = Double(Int64(1) << Int64(bits - 1))
                let value = Int64(min(max((Double(sample) * scale).rounded(), -scale), scale - 1))
                for shift in stride(from: 0, to: bits, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> Int64(shift))) }
            }
            out.append(contentsOf: bigEndian ? bytes.reversed() : bytes)
        }
        return out
    }

    /// A PCM stream format with any width, float or integer, either byte order.
    static func pcmFormat(sampleRate: Double, channels: Int, bits: Int, float: Bool = false, bigEndian: Bool = false) -> StreamFormat {
        var flags: AudioFormatFlags = [.isPacked, float ? .isFloat : .isSignedInteger]
        if bigEndian { flags.insert(.isBigEndian) }
        let bytesPerFrame = UInt32(bits / 8 * channels)
        return StreamFormat(
            sampleRate: sampleRate, formatID: .linearPCM, formatFlags: flags, bytesPerPacket: bytesPerFrame,
            framesPerPacket: 1, bytesPerFrame: bytesPerFrame, channelsPerFrame: UInt32(channels), bitsPerChannel: UInt32(bits)
        )
    }

    /// PCM offers of `seconds` of a 440 Hz tone in buffers of `framesPerOffer`.
    static func pcmOffers(format: StreamFormat, seconds: Double, framesPerOffer: Int) -> [Offer] {
        let total = Int(seconds * format.sampleRate)
        var offers: [Offer] = []
        var start = 0
        while start < total {
            let frames = min(framesPerOffer, total - start)
            let samples = tone(frames: frames, channels: format.channelCount, sampleRate: format.sampleRate, startFrame: start)
            let bytes = pcmBytes(
                samples, bits: Int(format.bitsPerChannel), float: format.formatFlags.contains(.isFloat),
                bigEndian: format.formatFlags.contains(.isBigEndian)
            )
            offers.append(Offer(payload: Data(bytes), packetSizes: [], frameCount: frames))
            start += frames
        }
        return offers
    }

    /// An Opus stream of a 440 Hz stereo tone made by the sender's encoder: its magic cookie and
    /// offers of `packetsPerOffer` 20 ms packets each.
    static func opusStream(seconds: Double, packetsPerOffer: Int = 5, channels: Int = 2) throws -> (cookie: [UInt8], format: StreamFormat, offers: [Offer]) {
        let input = StreamFormat.linearPCM(sampleRate: 48_000, channels: channels, sample: .s16)
        let encoder = try OpusEncoder(inputFormat: input, settings: OpusEncoderSettings(bitrate: 96_000))
        let framesPerOffer = 960 * packetsPerOffer
        let total = Int(seconds * 48_000)
        var offers: [Offer] = []
        var start = 0
        while start < total {
            let samples = tone(frames: framesPerOffer, channels: channels, sampleRate: 48_000, startFrame: start)
            let bytes = pcmBytes(samples, bits: 16)
            let encoded = try bytes.withUnsafeBytes { raw in
                try encoder.encode(CapturedBuffer(
                    bytes: raw, startTime: CaptureTimestamp(sampleTime: Int64(start), hostTime: 0), packetCount: framesPerOffer))
            }
            if let encoded {
                offers.append(Offer(payload: Data(encoded.payload), packetSizes: encoded.packetSizes, frameCount: encoded.frameCount))
            }
            start += framesPerOffer
        }
        return (encoder.magicCookie, encoder.outputFormat, offers)
    }

    /// The packets of the offers, in order.
    static func packets(of offers: [Offer]) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        for offer in offers {
            var offset = 0
            for size in offer.packetSizes {
                packets.append(Array(offer.payload[offset..<(offset + Int(size))]))
                offset += Int(size)
            }
        }
        return packets
    }

    /// Reads every chunk of a listener until its sequence ends, or fails after `timeout` seconds.
    static func collect(_ listener: Listener, timeout: Double = 30) async throws -> [UInt8] {
        try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask {
                var bytes: [UInt8] = []
                for await chunk in listener { bytes += chunk }
                return bytes
            }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                return nil
            }
            guard let first = try await group.next(), let bytes = first else {
                group.cancelAll()
                throw ListenTestFailure("the listener's audio did not end within \(timeout) s")
            }
            group.cancelAll()
            return bytes
        }
    }

    /// Writes bytes to a fresh temporary file with `suffix` and returns its path.
    static func temporaryFile(_ bytes: [UInt8], suffix: String = ".opus") throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("listen-\(UUID().uuidString)\(suffix)")
        try Data(bytes).write(to: url)
        return url.path
    }

    /// Decodes an Ogg file with ffmpeg to 48 kHz floats of its first channel; fails the test on any
    /// error ffmpeg reports.
    static func decodeWithFFmpeg(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> [Float] {
        let result = try ToolRunner.run(
            "ffmpeg", ["-v", "error", "-i", path, "-af", "pan=mono|c0=c0", "-f", "f32le", "-ar", "48000", "-"])
        XCTAssertTrue(result.succeeded, "ffmpeg failed: \(result.errorText)", file: file, line: line)
        XCTAssertEqual(result.errorText, "", "ffmpeg reported errors decoding the listen stream", file: file, line: line)
        return result.standardOutput.withUnsafeBytes { raw in Array(raw.bindMemory(to: Float.self)) }
    }

    /// The dominant frequency of `samples` at 48 kHz over one second starting at `start`, from the
    /// count of upward zero crossings.
    static func zeroCrossingFrequency(_ samples: [Float], start: Int) -> Double {
        let end = start + 48_000
        guard samples.count >= end else { return 0 }
        var crossings = 0
        for index in (start + 1)..<end where samples[index - 1] < 0 && samples[index] >= 0 { crossings += 1 }
        return Double(crossings)
    }

    /// The root mean square of a stretch of samples.
    static func rms(_ samples: ArraySlice<Float>) -> Double {
        guard !samples.isEmpty else { return 0 }
        return (samples.reduce(0) { $0 + Double($1) * Double($1) } / Double(samples.count)).squareRoot()
    }
}

/// A failure with a message, for test helpers that throw.
struct ListenTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// An Ogg reader written from RFC 3533 for the tests, independent of libogg: pages with their
/// granule positions and serial numbers, and the packets reassembled from the lacing values.
struct OggTestReader {
    struct Page {
        var headerType: UInt8
        var granulePosition: Int64
        var serialNumber: UInt32
        var sequenceNumber: UInt32
        /// Packets that end on this page (bytes including any continued from earlier pages).
        var completedPackets: [[UInt8]]
    }

    var pages: [Page] = []

    init(_ bytes: [UInt8]) throws {
        var offset = 0
        var partial: [UInt8] = []
        while offset < bytes.count {
            guard offset + 27 <= bytes.count, Array(bytes[offset..<(offset + 4)]) == Array("OggS".utf8) else {
                throw ListenTestFailure("no Ogg page at byte \(offset)")
            }
            func le<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
                var value: T = 0
                for index in 0..<(T.bitWidth / 8) { value |= T(bytes[offset + at + index]) << (8 * index) }
                return value
            }
            let segments = Int(bytes[offset + 26])
            var body = offset + 27 + segments
            var completed: [[UInt8]] = []
            for segment in 0..<segments {
                let lace = Int(bytes[offset + 27 + segment])
                partial += bytes[body..<(body + lace)]
                body += lace
                if lace < 255 {
                    completed.append(partial)
                    partial = []
                }
            }
            pages.append(Page(
                headerType: bytes[offset + 5], granulePosition: le(6, Int64.self), serialNumber: le(14, UInt32.self),
                sequenceNumber: le(18, UInt32.self), completedPackets: completed))
            offset = body
        }
    }

    /// Every packet in order.
    var packets: [[UInt8]] { pages.flatMap(\.completedPackets) }
}
