import COpus
import CaptureCodecs
import CaptureCore
import Foundation
import XCTest

/// Test signals, encoding drivers, a libopus decoder and comparisons for the encoder tests.
enum OpusTestTools {
    /// Interleaved float samples: 440 Hz + 1000 Hz at -12 dBFS each (peak -6 dBFS), the same on every
    /// channel except for a small per-channel phase offset so channels are told apart.
    static func twoTone(frames: Int, channels: Int, sampleRate: Double) -> [Float] {
        var samples = [Float](repeating: 0, count: frames * channels)
        for frame in 0..<frames {
            let time = Double(frame) / sampleRate
            for channel in 0..<channels {
                let phase = Double(channel) * 0.7
                let value = 0.25 * sin(2 * .pi * 440 * time + phase) + 0.25 * sin(2 * .pi * 1000 * time + phase)
                samples[frame * channels + channel] = Float(value)
            }
        }
        return samples
    }

    /// Interleaved float samples that never repeat: a chirp from 300 Hz to 3000 Hz over the whole
    /// length plus a 500 Hz tone, so that a lost or repeated stretch of audio misaligns everything after it.
    static func chirp(frames: Int, channels: Int, sampleRate: Double) -> [Float] {
        var samples = [Float](repeating: 0, count: frames * channels)
        let duration = Double(frames) / sampleRate
        for frame in 0..<frames {
            let time = Double(frame) / sampleRate
            let sweep = 2 * .pi * (300 * time + (2_700 / (2 * duration)) * time * time)
            for channel in 0..<channels {
                let value = 0.3 * sin(sweep + Double(channel)) + 0.2 * sin(2 * .pi * 500 * time)
                samples[frame * channels + channel] = Float(value)
            }
        }
        return samples
    }

    /// Encodes float samples as interleaved little-endian bytes of `format`.
    static func bytes(_ samples: [Float], as format: PCMSampleFormat) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(samples.count * format.bytesPerSample)
        for sample in samples {
            switch format {
            case .f32:
                let bits = sample.bitPattern
                for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: bits >> shift)) }
            case .s16, .s24, .s32:
                let scale = Double(Int64(1) << Int64(format.bitsPerChannel - 1))
                let value = Int64(min(max((Double(sample) * scale).rounded(), -scale), scale - 1))
                for shift in stride(from: 0, to: format.bitsPerChannel, by: 8) {
                    out.append(UInt8(truncatingIfNeeded: value >> Int64(shift)))
                }
            }
        }
        return out
    }

    /// Everything an encoder produced for one stream.
    struct EncodedStream {
        var packets: [[UInt8]] = []
        var firstSampleTimes: [Int64] = []
        var frameCounts: [Int] = []
        var remainderFrames = 0
        var tailPacketCount = 0

        var packetSizes: [UInt32] { packets.map { UInt32($0.count) } }
        var payload: [UInt8] { packets.flatMap { $0 } }

        mutating func add(_ encoded: EncodedPackets) {
            XCTAssertEqual(encoded.packetSizes.count, encoded.packetCount, "one size per packet")
            XCTAssertEqual(Int(encoded.packetSizes.reduce(0, +)), encoded.payload.count, "sizes add up to the payload")
            var offset = 0
            for size in encoded.packetSizes {
                packets.append(Array(encoded.payload[offset..<(offset + Int(size))]))
                offset += Int(size)
            }
            firstSampleTimes.append(encoded.firstSampleTime)
            frameCounts.append(encoded.frameCount)
        }
    }

    /// Feeds `bytes` (whole frames of `encoder.inputFormat`) to the encoder in buffers of `chunkFrames`
    /// frames (cycling through the list), with sample times counting from `startSampleTime`, then
    /// finishes the stream.
    static func encode(
        _ bytes: [UInt8], with encoder: AudioEncoder, chunkFrames: [Int], startSampleTime: Int64 = 0
    ) throws -> EncodedStream {
        let frameBytes = Int(encoder.inputFormat.bytesPerFrame)
        let totalFrames = bytes.count / frameBytes
        var stream = EncodedStream()
        var frame = 0
        var chunkIndex = 0
        try bytes.withUnsafeBytes { all in
            while frame < totalFrames {
                let count = min(chunkFrames[chunkIndex % chunkFrames.count], totalFrames - frame)
                chunkIndex += 1
                let slice = UnsafeRawBufferPointer(rebasing: all[(frame * frameBytes)..<((frame + count) * frameBytes)])
                let buffer = CapturedBuffer(
                    bytes: slice, startTime: CaptureTimestamp(sampleTime: startSampleTime + Int64(frame), hostTime: 0),
                    packetCount: count
                )
                if let encoded = try encoder.encode(buffer) { stream.add(encoded) }
                frame += count
            }
        }
        let tail = try encoder.finish()
        if let packets = tail.packets {
            stream.add(packets)
            stream.tailPacketCount = packets.packetCount
        }
        stream.remainderFrames = tail.remainderFrames
        return stream
    }

    /// Decodes packets with libopus (`opus_decode_float`, or the multistream decoder set up from
    /// the OpusHead cookie for more than 2 channels) at `sampleRate`; returns interleaved floats.
    static func decode(_ packets: [[UInt8]], cookie: [UInt8], channels: Int, sampleRate: Int = 48_000) throws -> [Float] {
        var error: Int32 = 0
        let maximumFrames = 5_760 * sampleRate / 48_000
        var output: [Float] = []
        var scratch = [Float](repeating: 0, count: maximumFrames * channels)
        if channels <= 2 {
            let decoder = try XCTUnwrap(opus_decoder_create(Int32(sampleRate), Int32(channels), &error))
            defer { opus_decoder_destroy(decoder) }
            XCTAssertEqual(error, OPUS_OK)
            for packet in packets {
                let frames = opus_decode_float(decoder, packet, Int32(packet.count), &scratch, Int32(maximumFrames), 0)
                XCTAssertGreaterThan(frames, 0, "libopus decodes every packet")
                output += scratch[0..<(Int(max(frames, 0)) * channels)]
            }
        } else {
            XCTAssertEqual(cookie[18], 1, "mapping family 1 in the cookie")
            var mapping = Array(cookie[21..<(21 + channels)])
            let decoder = try XCTUnwrap(opus_multistream_decoder_create(
                Int32(sampleRate), Int32(channels), Int32(cookie[19]), Int32(cookie[20]), &mapping, &error
            ))
            defer { opus_multistream_decoder_destroy(decoder) }
            XCTAssertEqual(error, OPUS_OK)
            for packet in packets {
                let frames = opus_multistream_decode_float(
                    decoder, packet, Int32(packet.count), &scratch, Int32(maximumFrames), 0
                )
                XCTAssertGreaterThan(frames, 0, "libopus decodes every packet")
                output += scratch[0..<(Int(max(frames, 0)) * channels)]
            }
        }
        return output
    }

    /// Signal-to-noise ratio in dB of `decoded` against `reference` (same length).
    static func snr(_ decoded: ArraySlice<Float>, _ reference: ArraySlice<Float>) -> Double {
        precondition(decoded.count == reference.count)
        var signal = 0.0
        var noise = 0.0
        for (output, input) in zip(decoded, reference) {
            signal += Double(input) * Double(input)
            noise += (Double(output) - Double(input)) * (Double(output) - Double(input))
        }
        return 10 * log10(signal / max(noise, 1e-20))
    }

    /// The lowest SNR over consecutive windows of `windowFrames` frames, so that a local loss or
    /// repetition shows even when the whole-stream figure would hide it.
    static func worstWindowSNR(_ decoded: [Float], _ reference: [Float], channels: Int, windowFrames: Int) -> Double {
        var worst = Double.infinity
        var start = 0
        let windowSamples = windowFrames * channels
        while start + windowSamples <= reference.count {
            worst = min(worst, snr(decoded[start..<(start + windowSamples)], reference[start..<(start + windowSamples)]))
            start += windowSamples
        }
        return worst
    }

    /// Runs a tool found in PATH; returns its standard output, throwing on a non-zero exit with the
    /// tool's standard error (kept in a temporary file, so neither pipe can fill up and block it).
    static func run(_ tool: String, _ arguments: [String]) throws -> Data {
        let errorURL = FileManager.default.temporaryDirectory.appendingPathComponent("opus-tool-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errorURL) }
        let errorHandle = try FileHandle(forWritingTo: errorURL)
        defer { try? errorHandle.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = errorHandle
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let errors = (try? String(contentsOf: errorURL, encoding: .utf8)) ?? ""
            throw ToolFailure(message: "\(tool) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(errors)")
        }
        return data
    }

    /// A tool that exited with an error.
    struct ToolFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
