import CAF
import CaptureCodecs
import Foundation

/// Where captured audio goes when the packet log is full (the receiver has been unreachable for
/// longer than `--spool-max` bytes of audio): a CAF file of the sender's own, beside the spool,
/// `<stream name>_<stream id>_overflow-<n>.caf`, one per episode. The stream sent to the receiver
/// records the episode as a Gap whose reason names this file, so nothing is dropped silently.
///
/// Used from the log's producer thread only.
///
/// Sendability (`@unchecked Sendable`): its writer and episode count are used only by its
/// `PacketLog`'s producer, one thread after the other: the capture queue's delivery thread
/// (`append`), then, once capture has ended, the thread that finishes the log (`finish`); the
/// compiler cannot see that ownership.
public final class OverflowRecorder: @unchecked Sendable {
    private let directory: String
    private let baseName: String
    private let description: StreamDescription
    private var writer: CAFWriter?
    private var episode = 0

    /// An overflow recorder writing into `directory` (nothing is created until the first overflow).
    public init(directory: String, streamName: String, streamID: UUID, description: StreamDescription) {
        self.directory = directory
        let safeName = String(streamName.unicodeScalars.map { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-") ? Character($0) : "_" })
        baseName = "\(safeName.isEmpty ? "stream" : safeName)_\(streamID.uuidString.lowercased())_overflow"
        self.description = description
    }

    /// Starts a new overflow file; returns its path.
    func begin() throws(CAFError) -> String {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        while true {
            episode += 1
            let path = (directory as NSString).appendingPathComponent("\(baseName)-\(episode).caf")
            do throws(CAFError) {
                writer = try CAFWriter(
                    path: path, format: description.format,
                    info: [("title", baseName), ("comment", "audio capture-send could not spool: its spool was full")],
                    magicCookie: description.magicCookie, primingFrames: 0)
                return path
            } catch .fileExists {
                continue
            }
        }
    }

    /// Appends packets to the current overflow file.
    func write(_ packets: EncodedPackets) throws(CAFError) {
        guard let writer else { throw .writerClosed(path: directory) }
        try writer.append(packets.payload, packetSizes: packets.packetSizes, frameCount: packets.frameCount)
    }

    /// Finishes the current overflow file.
    func end() throws(CAFError) {
        defer { writer = nil }
        try writer?.finalize()
    }
}
