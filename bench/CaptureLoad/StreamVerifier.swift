import CAF
import Foundation

/// Checks, after a run, that the receiver's output folder holds for every stream of the run exactly
/// one finished CAF file with exactly the packets sent: format, packet count, each packet's size and
/// bytes, frame count, and no extra data. The expected content is made again from each
/// `StreamPlan`, so nothing of the audio has to be kept.
struct StreamVerifier {
    let directory: String
    let plans: [StreamPlan]

    /// What the verification found.
    struct Outcome: Sendable {
        var verified = 0
        /// One line per stream whose file is missing or differs, naming the stream and the difference.
        var problems: [String] = []
        /// CAF files in the folder that belong to no stream of this run.
        var foreignFiles = 0
    }

    func run() -> Outcome {
        var outcome = Outcome()
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".caf") }.sorted()
        var byStream: [UUID: [String]] = [:]
        var unreadable: [String: String] = [:]
        for name in names {
            let path = (directory as NSString).appendingPathComponent(name)
            do throws(CAFError) {
                let file = try CAFFile.read(path: path)
                guard let id = file.info.first(where: { $0.key == "stream id" }).flatMap({ UUID(uuidString: $0.value) }) else {
                    outcome.foreignFiles += 1
                    continue
                }
                byStream[id, default: []].append(path)
            } catch {
                unreadable[name] = error.description
            }
        }
        for plan in plans {
            let paths = byStream[plan.streamID] ?? []
            if paths.isEmpty {
                let prefix = StreamVerifier.filePrefix(plan.name)
                if let (name, reason) = unreadable.first(where: { $0.key.hasPrefix(prefix) }) {
                    outcome.problems.append("stream \(plan.name): \(name) cannot be read: \(reason)")
                } else {
                    outcome.problems.append("stream \(plan.name): no file in \(directory)")
                }
                continue
            }
            guard paths.count == 1 else {
                outcome.problems.append("stream \(plan.name): \(paths.count) files instead of one: \(paths.map(Self.summary).joined(separator: ", "))")
                continue
            }
            if let problem = check(plan: plan, path: paths[0]) {
                outcome.problems.append("stream \(plan.name): \((paths[0] as NSString).lastPathComponent): \(problem)")
            } else {
                outcome.verified += 1
            }
        }
        let known = Set(plans.map(\.streamID))
        outcome.foreignFiles += byStream.keys.filter { !known.contains($0) }.count
        return outcome
    }

    /// A file's name, whether it is finished and how many packets it holds: "NAME (unfinished, 0 packets)".
    static func summary(_ path: String) -> String {
        let name = (path as NSString).lastPathComponent
        do throws(CAFError) {
            let file = try CAFFile.read(path: path)
            let packets = file.packetCount.map { "\($0) packets" } ?? "no packet table"
            return "\(name) (\(file.isFinalized ? "finished" : "unfinished"), \(packets))"
        } catch {
            return "\(name) (unreadable)"
        }
    }

    /// The start of the file names the receiver gives a stream's files.
    static func filePrefix(_ streamName: String) -> String { streamName + "_" }

    /// Nil when the file holds exactly the stream's packets; otherwise what differs.
    func check(plan: StreamPlan, path: String) -> String? {
        let file: CAFFile
        do throws(CAFError) {
            file = try CAFFile.read(path: path)
        } catch {
            return "cannot be read: \(error.description)"
        }
        guard file.isFinalized else { return "the file is unfinished (its data size is not set)" }
        guard file.format == plan.format else { return "its format is \(file.format), \(plan.format) was sent" }
        let expectedBytes: Int
        switch plan.codec {
        case .opus:
            guard let table = file.packetTable else { return "it has no packet table" }
            guard table.numberPackets == Int64(plan.packetCount) else {
                return "it holds \(table.numberPackets) packets, \(plan.packetCount) were sent"
            }
            if table.primingFrames != Int32(plan.primingFrames) || table.remainderFrames != Int32(plan.remainderFrames) {
                return "priming/remainder frames are \(table.primingFrames)/\(table.remainderFrames), \(plan.primingFrames)/\(plan.remainderFrames) were sent"
            }
            if table.validFrames != Int64(plan.capturedFrames) {
                return "it has \(table.validFrames) valid frames, \(plan.capturedFrames) were sent"
            }
            var total = 0
            for packet in 0..<plan.packetCount {
                let size = plan.opusPacketSize(packet)
                if table.packetSizes[packet] != UInt32(size) {
                    return "packet \(packet) has \(table.packetSizes[packet]) bytes, \(size) were sent"
                }
                total += size
            }
            expectedBytes = total
        case .pcm:
            expectedBytes = plan.packetCount * Int(plan.format.bytesPerFrame)
            guard let frames = file.totalFrames, frames == Int64(plan.packetCount) else {
                return "it holds \(file.totalFrames.map(String.init) ?? "an unknown number of") frames, \(plan.packetCount) were sent"
            }
        }
        guard file.dataSize == Int64(expectedBytes) else {
            return "its audio data has \(file.dataSize) bytes, \(expectedBytes) were sent"
        }
        var offset: Int64 = 0
        for sequence in 1...UInt64(plan.messageCount) {
            let sizes = plan.packetSizes(ofSequence: sequence)
            let expected = plan.payload(ofSequence: sequence, sizes: sizes)
            let actual: [UInt8]
            do throws(CAFError) {
                actual = try file.readAudioBytes(offset: offset, count: expected.count)
            } catch {
                return "cannot read its audio: \(error.description)"
            }
            if let at = firstDifference(expected, actual) {
                return "bytes differ from what was sent: " + describe(byte: at, sequence: sequence, plan: plan, sizes: sizes)
            }
            offset += Int64(expected.count)
        }
        return nil
    }

    private func firstDifference(_ expected: Data, _ actual: [UInt8]) -> Int? {
        guard expected.count == actual.count else { return min(expected.count, actual.count) }
        return expected.withUnsafeBytes { bytes -> Int? in
            actual.withUnsafeBytes { other -> Int? in
                if let left = bytes.baseAddress, let right = other.baseAddress, memcmp(left, right, bytes.count) == 0 { return nil }
                if bytes.isEmpty { return nil }
                return (0..<bytes.count).first { bytes[$0] != other[$0] }
            }
        }
    }

    /// Names the packet (and sequence) a differing byte of a message's payload belongs to.
    private func describe(byte: Int, sequence: UInt64, plan: StreamPlan, sizes: [UInt32]) -> String {
        let packets = plan.packets(ofSequence: sequence)
        guard plan.codec == .opus else {
            let frame = packets.lowerBound + byte / Int(plan.format.bytesPerFrame)
            return "frame \(frame) (AudioData sequence \(sequence))"
        }
        var start = 0
        for (packet, size) in zip(packets, sizes) {
            if byte < start + Int(size) { return "packet \(packet), byte \(byte - start) (AudioData sequence \(sequence))" }
            start += Int(size)
        }
        return "after the last packet of AudioData sequence \(sequence)"
    }
}
