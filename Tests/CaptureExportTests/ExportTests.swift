import CAF
import CaptureCodecs
import CaptureCore
@testable import CaptureExport
import Foundation
import TestSupport
import XCTest

/// `capture-recv export` (issue 17, item 4): Broadcast Wave with bext TimeReference and labelled cue
/// points (read back by a Python RIFF parser), RF64 beyond 4 GiB, FLAC and Ogg Opus decoding to the
/// same samples (ffmpeg), a 5.1 layout kept (ffprobe), 6-channel Opus playable from Ogg.
final class ExportTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// 10:00:01.5 UTC: 36,001.5 s after midnight, 1,728,072,000 samples at 48 kHz.
    private let info: [(key: String, value: String)] = [
        ("title", "field-a"), ("stream id", "6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b"), ("source host", "unit-7"),
        ("clock synchronized", "yes"), ("first sample time", "2026-11-24T10:00:01.500Z"), ("first valid sample", "72000"),
    ]

    /// A 2 s s16 PCM recording (a counter on `channels` channels) with two gap markers.
    private func pcmRecording(channels: Int = 2, bitmap: UInt32 = 0, name: String = "pcm") throws -> (path: String, samples: [Int16]) {
        let path = work.appendingPathComponent("\(name).caf").path
        let writer = try CAFWriter(
            path: path, format: .linearPCM(sampleRate: 48_000, channels: channels, sample: .s16),
            channelLayoutTag: bitmap == 0 ? nil : 0x10000, channelBitmap: bitmap, info: info)
        let samples = (0..<(96_000 * channels)).map { Int16(truncatingIfNeeded: $0 &* 7 &- 20_000) }
        try writer.append(samples.withUnsafeBytes { Array($0) }, frameCount: 96_000)
        try writer.addMarker(framePosition: 24_000, name: "gap: 480 frames not captured (overrun)")
        try writer.addMarker(framePosition: 60_000, name: "gap: 960 frames not captured (device-lost)")
        try writer.finalize()
        return (path, samples)
    }

    /// An Opus recording of a 440 + 1000 Hz tone on `channels` channels, `seconds` long.
    private func opusRecording(channels: Int, seconds: Double = 2, extraMarkers: [CAFMarker] = []) throws -> (path: String, validFrames: Int64, source: [Float]) {
        let frames = Int(48_000 * seconds)
        let source = (0..<frames).flatMap { index -> [Float] in
            let time = Double(index) / 48_000
            return (0..<channels).map { channel in Float(0.25 * sin(2 * .pi * 440 * time + Double(channel)) + 0.2 * sin(2 * .pi * 1_000 * time)) }
        }
        let encoder = try OpusEncoder(inputFormat: .linearPCM(sampleRate: 48_000, channels: channels, sample: .f32))
        var payload: [UInt8] = []
        var sizes: [UInt32] = []
        let bytes = source.withUnsafeBytes { Array($0) }
        let chunk = 4_800 * channels * 4
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + chunk, bytes.count)
            try bytes[offset..<end].withUnsafeBytes { raw in
                if let packets = try encoder.encode(CapturedBuffer(
                    bytes: raw, startTime: CaptureTimestamp(sampleTime: Int64(offset / (channels * 4)), hostTime: 0), packetCount: (end - offset) / (channels * 4))) {
                    payload += packets.payload
                    sizes += packets.packetSizes
                }
            }
            offset = end
        }
        let tail = try encoder.finish()
        if let packets = tail.packets {
            payload += packets.payload
            sizes += packets.packetSizes
        }
        let path = work.appendingPathComponent("opus\(channels).caf").path
        let writer = try CAFWriter(
            path: path, format: .opus(channels: channels, framesPerPacket: 960), info: info,
            magicCookie: channels > 2 ? encoder.magicCookie : [], primingFrames: encoder.primingFrames)
        try writer.append(payload, packetSizes: sizes, frameCount: sizes.count * 960)
        try writer.addMarker(framePosition: 312 + 48_000, name: "gap: 960 frames not captured (overrun)")
        for marker in extraMarkers { try writer.addMarker(framePosition: marker.framePosition, name: marker.name) }
        try writer.finalize(remainderFrames: tail.remainderFrames)
        return (path, Int64(frames), source)
    }

    /// The RIFF chunks of a WAV/RF64 file, parsed by Python (struct), as JSON.
    private func riff(_ path: String) throws -> [String: Any] {
        let script = """
            import json, os, struct, sys
            f = open(sys.argv[1], 'rb'); end = os.path.getsize(sys.argv[1])
            head = f.read(12)
            out = {'form': head[0:4].decode(), 'cues': [], 'labels': {}}
            i = 12
            while i + 8 <= end:
                f.seek(i); h = f.read(8)
                cid = h[0:4]; size = struct.unpack('<I', h[4:8])[0]
                if cid == b'data' and 'ds64' in out and size == 0xFFFFFFFF:
                    size = out['ds64'][1]
                body = f.read(size) if cid != b'data' else b''
                if cid == b'ds64':
                    out['ds64'] = struct.unpack('<QQQ', body[0:24])
                elif cid == b'bext':
                    out['description'] = body[0:256].rstrip(b'\\0').decode()
                    out['date'] = body[320:330].decode(); out['time'] = body[330:338].decode()
                    lo, hi = struct.unpack('<II', body[338:346]); out['time_reference'] = lo + (hi << 32)
                elif cid == b'cue ':
                    n = struct.unpack('<I', body[0:4])[0]
                    for k in range(n):
                        ident, pos, fcc, cs, bs, off = struct.unpack('<II4sIII', body[4+24*k:28+24*k])
                        out['cues'].append({'id': ident, 'position': pos, 'chunk': fcc.decode(), 'offset': off})
                elif cid == b'LIST' and body[0:4] == b'adtl':
                    j = 4
                    while j + 8 <= len(body):
                        sid = body[j:j+4]; ssz = struct.unpack('<I', body[j+4:j+8])[0]
                        if sid == b'labl':
                            ident = struct.unpack('<I', body[j+8:j+12])[0]
                            out['labels'][str(ident)] = body[j+12:j+8+ssz].rstrip(b'\\0').decode()
                        j += 8 + ssz + (ssz & 1)
                elif cid == b'data':
                    out['data'] = size
                i += 8 + size + (size & 1)
            print(json.dumps(out))
            """
        let result = try ToolRunner.run("python3", ["-c", script, path])
        XCTAssertTrue(result.succeeded, result.errorText)
        return try XCTUnwrap(result.jsonObject)
    }

    /// The audio of a file as ffmpeg decodes it, as 16-bit samples.
    private func ffmpegSamples16(_ path: String) throws -> [Int16] {
        let result = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", path, "-f", "s16le", "-"])
        XCTAssertTrue(result.succeeded, result.errorText)
        return result.standardOutput.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    private func ffmpegFloats(_ path: String) throws -> [Float] {
        let result = try ToolRunner.run("ffmpeg", ["-v", "error", "-i", path, "-f", "f32le", "-"])
        XCTAssertTrue(result.succeeded, result.errorText)
        return result.standardOutput.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    private func ffprobe(_ path: String) throws -> [String: Any] {
        let result = try ToolRunner.run("ffprobe", ["-v", "error", "-show_streams", "-show_format", "-of", "json", path])
        XCTAssertTrue(result.succeeded, result.errorText)
        let streams = try XCTUnwrap(result.jsonObject?["streams"] as? [[String: Any]])
        var stream = try XCTUnwrap(streams.first)
        // Ogg carries its comments on the stream, the others on the format: both, merged.
        let formatTags = (result.jsonObject?["format"] as? [String: Any])?["tags"] as? [String: String] ?? [:]
        let streamTags = stream["tags"] as? [String: String] ?? [:]
        stream["tags"] = formatTags.merging(streamTags) { first, _ in first }
        return stream
    }

    func testBroadcastWaveCarriesTheTimeReferenceAndLabelledCuePoints() throws {
        let recording = try pcmRecording()
        let wav = try RecordingExporter.export(cafPath: recording.path, as: .wav)
        XCTAssertEqual(wav, work.appendingPathComponent("pcm.wav").path)
        let chunks = try riff(wav)
        XCTAssertEqual(chunks["form"] as? String, "RIFF")
        XCTAssertEqual(chunks["time_reference"] as? Int, 1_728_072_000, "samples since UTC midnight of the first sample")
        XCTAssertEqual(chunks["date"] as? String, "2026-11-24")
        XCTAssertEqual(chunks["time"] as? String, "10:00:01")
        let description = try XCTUnwrap(chunks["description"] as? String)
        XCTAssertTrue(description.contains("unit-7") && description.contains("6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b") && description.contains("clock synchronized: yes"), description)
        let cues = try XCTUnwrap(chunks["cues"] as? [[String: Any]])
        XCTAssertEqual(cues.map { $0["position"] as? Int }, [24_000, 60_000])
        let labels = try XCTUnwrap(chunks["labels"] as? [String: String])
        XCTAssertEqual(cues.compactMap { ($0["id"] as? Int).flatMap { labels[String($0)] } },
                       ["gap: 480 frames not captured (overrun)", "gap: 960 frames not captured (device-lost)"])
        XCTAssertEqual(try ffmpegSamples16(wav), recording.samples, "the samples, bit-exact (ffmpeg)")
        XCTAssertEqual((try ffprobe(wav)["tags"] as? [String: String])?["time_reference"], "1728072000", "ffprobe reads the bext too")
    }

    func testFLACDecodesToTheSameSamplesWithTheTimesAsVorbisComments() throws {
        let recording = try pcmRecording()
        let flac = try RecordingExporter.export(cafPath: recording.path, as: .flac)
        XCTAssertEqual(try ffmpegSamples16(flac), recording.samples, "lossless")
        let tags = try XCTUnwrap(try ffprobe(flac)["tags"] as? [String: String])
        XCTAssertEqual(tags["DATE"] ?? tags["date"], "2026-11-24T10:00:01.500Z")
        let comment = try XCTUnwrap(tags["COMMENT"] ?? tags["comment"])
        XCTAssertTrue(comment.contains("time reference 1728072000") && comment.contains("sample index 72000"), comment)
        XCTAssertEqual(tags["TITLE"] ?? tags["title"], "field-a")
    }

    /// A PCM recording with the markers the person recording dropped beside the gap markers.
    private func markedRecording() throws -> (path: String, samples: [Int16]) {
        let path = work.appendingPathComponent("marked.caf").path
        let writer = try CAFWriter(path: path, format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16), info: info)
        let samples = (0..<(96_000 * 2)).map { Int16(truncatingIfNeeded: $0 &* 5 &- 9_000) }
        try writer.append(samples.withUnsafeBytes { Array($0) }, frameCount: 96_000)
        try writer.addMarker(framePosition: 12_000, name: CAFMarker.userMarkerName(label: "interview starts"))
        try writer.addMarker(framePosition: 24_000, name: CAFMarker.gapName(length: 4_800, reason: "paused"))
        try writer.addMarker(framePosition: 72_024, name: CAFMarker.userMarkerName(label: ""))
        try writer.addMarker(framePosition: 90_000, name: CAFMarker.userMarkerName(label: "Tor ✓ = 1:0"))
        try writer.finalize()
        return (path, samples)
    }

    /// The chapters ffprobe reads from an export, as (start in seconds, title).
    private func ffprobeChapters(_ path: String) throws -> [(start: String, title: String)] {
        let result = try ToolRunner.run("ffprobe", ["-v", "error", "-show_chapters", "-of", "json", path])
        XCTAssertTrue(result.succeeded, result.errorText)
        let chapters = try XCTUnwrap(result.jsonObject?["chapters"] as? [[String: Any]])
        return chapters.map { chapter in
            ((chapter["start_time"] as? String) ?? "?", ((chapter["tags"] as? [String: String])?["title"]) ?? "?")
        }
    }

    /// Dropped markers: Broadcast Wave cue points labelled with their labels (beside the gaps'),
    /// FLAC and Ogg chapters as Vorbis comments (CHAPTERnnn, CHAPTERnnnNAME) that ffprobe reads.
    func testDroppedMarkersBecomeLabelledCuePointsAndChapters() throws {
        let recording = try markedRecording()
        for format in [ExportFormat.wav, .rf64] {
            let exported = try RecordingExporter.export(cafPath: recording.path, as: format)
            let chunks = try riff(exported)
            let cues = try XCTUnwrap(chunks["cues"] as? [[String: Any]])
            XCTAssertEqual(cues.map { $0["position"] as? Int }, [12_000, 24_000, 72_024, 90_000], "\(format)")
            let labels = try XCTUnwrap(chunks["labels"] as? [String: String])
            XCTAssertEqual(cues.compactMap { ($0["id"] as? Int).flatMap { labels[String($0)] } },
                           ["interview starts", "gap: 4800 frames not captured (paused)", "marker", "Tor ✓ = 1:0"], "\(format)")
            XCTAssertEqual(try ffmpegSamples16(exported), recording.samples)
        }

        let flac = try RecordingExporter.export(cafPath: recording.path, as: .flac)
        XCTAssertEqual(try ffmpegSamples16(flac), recording.samples, "still lossless with the comments added")
        let tags = try XCTUnwrap(try ffprobe(flac)["tags"] as? [String: String])
        XCTAssertEqual(tags["TITLE"] ?? tags["title"], "field-a", "libsndfile's comments are kept")
        let chapters = try ffprobeChapters(flac)
        XCTAssertEqual(chapters.map(\.title), ["interview starts", "marker 2", "Tor ✓ = 1:0"], "gaps are not chapters")
        XCTAssertEqual(chapters.map(\.start), ["0.250000", "1.500000", "1.875000"])

        // Ogg Opus: the marker moved by the priming (312 frames), as the cue points are.
        let opus = try opusRecording(channels: 2, extraMarkers: [CAFMarker(framePosition: 312 + 24_000, name: "marker: half a second")])
        let ogg = try RecordingExporter.export(cafPath: opus.path, as: .ogg)
        let oggChapters = try ffprobeChapters(ogg)
        XCTAssertEqual(oggChapters.map(\.title), ["half a second"])
        XCTAssertEqual(oggChapters.map(\.start), ["0.500000"])
        XCTAssertEqual(try ffmpegFloats(ogg).count, Int(opus.validFrames) * 2, "the packets are unchanged")
    }

    /// Chapter times: HH:MM:SS.mmm, rounded down, hours past 99 when they must.
    func testChapterTimes() {
        let rows: [(frames: Int64, rate: Int, text: String)] = [
            (0, 48_000, "00:00:00.000"), (47, 48_000, "00:00:00.000"), (48, 48_000, "00:00:00.001"),
            (12_000, 48_000, "00:00:00.250"), (48_000 * 3_725 + 24_000, 48_000, "01:02:05.500"),
            (44_100 * 360_000, 44_100, "100:00:00.000"),
        ]
        for row in rows { XCTAssertEqual(ExportChapters.time(frames: row.frames, sampleRate: row.rate), row.text) }
        let markers = [
            CAFMarker(framePosition: 100, name: "marker: b"), CAFMarker(framePosition: 50, name: "gap: 1 frames not captured (overrun)"),
            CAFMarker(framePosition: 10, name: "marker"), CAFMarker(framePosition: 5, name: "marker: before the valid audio"),
        ]
        XCTAssertEqual(ExportChapters.comments(markers, leadingFrames: 8, validFrames: 1_000, sampleRate: 1_000), [
            "CHAPTER001=00:00:00.002", "CHAPTER001NAME=marker 1", "CHAPTER002=00:00:00.092", "CHAPTER002NAME=b",
        ])
    }

    func testRF64WritesItsSizesInDs64AndReadersBelieveThemBeyondFourGiB() throws {
        let recording = try pcmRecording()
        let rf64 = try RecordingExporter.export(cafPath: recording.path, as: .rf64)
        var chunks = try riff(rf64)
        XCTAssertEqual(chunks["form"] as? String, "RF64")
        let sizes = try XCTUnwrap(chunks["ds64"] as? [Int])
        XCTAssertEqual(sizes[1], 96_000 * 4, "ds64 data size")
        XCTAssertEqual(sizes[2], 96_000, "ds64 sample count")
        XCTAssertEqual(try ffmpegSamples16(rf64), recording.samples)
        XCTAssertEqual(chunks["time_reference"] as? Int, 1_728_072_000)
        // Synthetic: a data chunk of 4.5 GiB (a hole), its size only in ds64, as RF64 writes it
        // beyond 4 GiB; ffprobe must take the 64-bit size.
        let big: UInt64 = 4_500_000_000 / 4 * 4
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: rf64))
        // Find the data chunk: its header is 'data' then 0xFFFFFFFF in RF64.
        let head = try Data(contentsOf: URL(fileURLWithPath: rf64))
        let dataHeader = try XCTUnwrap(head.range(of: Data("data".utf8))?.lowerBound)
        XCTAssertEqual(Array(head[(dataHeader + 4)..<(dataHeader + 8)]), [0xFF, 0xFF, 0xFF, 0xFF], "RF64 leaves the 32-bit size to ds64")
        let newEnd = UInt64(dataHeader + 8) + big
        try handle.truncate(atOffset: newEnd)
        try handle.seek(toOffset: 20)
        try handle.write(contentsOf: RIFFLabels.le64(newEnd - 8) + RIFFLabels.le64(big) + RIFFLabels.le64(big / 4))
        try handle.close()
        chunks = try riff(rf64)
        XCTAssertEqual((chunks["ds64"] as? [Int])?[1], Int(big))
        let probe = try ToolRunner.run("ffprobe", ["-v", "error", "-show_entries", "stream=duration_ts", "-of", "csv=p=0", rf64])
        XCTAssertTrue(probe.succeeded, probe.errorText)
        XCTAssertEqual(probe.outputText.trimmingCharacters(in: .whitespacesAndNewlines), "\(big / 4)", "ffprobe reads the 64-bit size: \(Double(big) / 1_073_741_824) GiB")
    }

    func testAFiveOneRecordingKeepsItsLayoutInTheExport() throws {
        let recording = try pcmRecording(channels: 6, bitmap: 0x3F, name: "surround")
        XCTAssertEqual(try ffprobe(recording.path)["channel_layout"] as? String, "5.1", "the CAF itself")
        let wav = try RecordingExporter.export(cafPath: recording.path, as: .wav)
        XCTAssertEqual(try ffprobe(wav)["channel_layout"] as? String, "5.1", "the Broadcast Wave export")
        XCTAssertEqual(try ffmpegSamples16(wav), recording.samples)
        let rf64 = try RecordingExporter.export(cafPath: recording.path, as: .rf64)
        XCTAssertEqual(try ffprobe(rf64)["channel_layout"] as? String, "5.1", "the RF64 export")
    }

    func testOpusRemuxedToOggDecodesToExactlyTheValidFrames() throws {
        let recording = try opusRecording(channels: 2)
        let ogg = try RecordingExporter.export(cafPath: recording.path, as: .ogg)
        XCTAssertTrue(ogg.hasSuffix(".opus"))
        let decoded = try ffmpegFloats(ogg)
        XCTAssertEqual(decoded.count, Int(recording.validFrames) * 2, "pre-skip and end trimming: the captured frames, exactly")
        var signal = 0.0
        var noise = 0.0
        for (coded, original) in zip(decoded, recording.source) {
            signal += Double(original * original)
            noise += Double((coded - original) * (coded - original))
        }
        XCTAssertGreaterThan(10 * log10(signal / noise), 20, "aligned with the source")
        // The packets are the CAF's, not re-encoded.
        let caf = try CAFFile.read(path: recording.path)
        let pages = """
            import sys
            d = open(sys.argv[1], 'rb').read(); i = 0; packets = []; current = b''
            while i < len(d):
                assert d[i:i+4] == b'OggS'
                count = d[i+26]; lacing = d[i+27:i+27+count]; j = i + 27 + count
                for value in lacing:
                    current += d[j:j+value]; j += value
                    if value < 255: packets.append(len(current)); current = b''
                i = j
            print(' '.join(str(size) for size in packets[2:]))
            """
        let parsed = try ToolRunner.run("python3", ["-c", pages, ogg])
        XCTAssertTrue(parsed.succeeded, parsed.errorText)
        let sizes = parsed.outputText.split(separator: " ").compactMap { UInt32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        XCTAssertEqual(sizes, caf.packetTable?.packetSizes, "the Ogg pages hold the CAF's packets, byte counts equal")
        let tags = try XCTUnwrap(try ffprobe(ogg)["tags"] as? [String: String])
        XCTAssertEqual(tags["TIME_REFERENCE"] ?? tags["time_reference"], "1728072000", "\(tags)")
        // Decoded to WAV: the same length, the gap marker moved by the priming.
        let wav = try RecordingExporter.export(cafPath: recording.path, as: .wav)
        XCTAssertEqual(try ffmpegFloats(wav).count, Int(recording.validFrames) * 2)
        XCTAssertEqual((try riff(wav)["cues"] as? [[String: Any]])?.map { $0["position"] as? Int }, [48_000])
    }

    func testSixChannelOpusBecomesPlayableAsOgg() throws {
        let recording = try opusRecording(channels: 6, seconds: 1)
        let ogg = try RecordingExporter.export(cafPath: recording.path, as: .ogg)
        let stream = try ffprobe(ogg)
        XCTAssertEqual(stream["channels"] as? Int, 6)
        let decoded = try ffmpegFloats(ogg)
        XCTAssertEqual(decoded.count, Int(recording.validFrames) * 6, "every channel, every valid frame")
        XCTAssertGreaterThan(decoded.map { abs($0) }.max() ?? 0, 0.2, "audio, not silence")
    }

    func testRefusalsSayWhatToDo() throws {
        let recording = try pcmRecording()
        XCTAssertThrowsError(try RecordingExporter.export(cafPath: recording.path, as: .ogg)) { error in
            XCTAssertTrue("\(error)".contains("not an Opus recording"), "\(error)")
        }
        _ = try RecordingExporter.export(cafPath: recording.path, as: .wav)
        XCTAssertThrowsError(try RecordingExporter.export(cafPath: recording.path, as: .wav)) { error in
            XCTAssertTrue("\(error)".contains("pass replacing: true (RecordingExporter.export) to replace it"), "\(error)")
        }
        XCTAssertNoThrow(try RecordingExporter.export(cafPath: recording.path, as: .wav, replacing: true))
        let text = work.appendingPathComponent("notes.caf").path
        try Data("not audio".utf8).write(to: URL(fileURLWithPath: text))
        XCTAssertThrowsError(try RecordingExporter.export(cafPath: text, as: .wav)) { error in
            XCTAssertTrue("\(error)".contains("cannot read"), "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path).filter { $0.hasSuffix(".partial") }, [], "no half exports left")
    }
}
