import CaptureCore
import Foundation

/// How many streams this receiver can hold open at once, from its open-file limit and memory.
///
/// Each recording stream needs one file descriptor: its connection. Its claim is a byte in the
/// stream index's one lock file, and its packet journal and position log are opened only to write
/// them. Its CAF file's descriptor is held between writes only when the limit has room for one per
/// stream beside the connections (`holdsFileDescriptors`); otherwise the file is opened for each
/// write (of 8 KiB or more: see `ReceiverConfiguration.fileWriteBehind`), which costs an open and
/// a close per write (on a network file system, a round trip each). `reservedDescriptors` are kept
/// for everything else
/// (listening sockets, the metrics endpoint, logs, files being recovered, connections still in
/// their handshake). Memory bounds the default too: a stream's audio that is not yet durable may
/// reach a few MiB before its connection stops being read, so one stream per `memoryPerStream`.
public struct StreamCapacity: Sendable, Equatable {
    /// Descriptors one recording stream needs.
    public static let descriptorsPerStream = 1
    /// Descriptors one recording stream holds when it keeps its file open too.
    public static let descriptorsPerStreamHoldingFiles = 2
    /// Descriptors kept aside for everything but recording streams.
    public static let reservedDescriptors = 128
    /// Connections beyond the stream limit that may be in their handshake at once.
    public static let handshakeAllowance = 64
    /// Memory counted per stream for the default limit.
    public static let memoryPerStream: UInt64 = 1 << 20

    /// The soft open-file limit (after raising it).
    public var openFileLimit: Int
    /// The soft limit before it was raised.
    public var openFileLimitBefore: Int
    /// Physical memory in bytes.
    public var physicalMemory: UInt64

    public init(openFileLimit: Int, openFileLimitBefore: Int, physicalMemory: UInt64) {
        self.openFileLimit = openFileLimit
        self.openFileLimitBefore = openFileLimitBefore
        self.physicalMemory = physicalMemory
    }

    /// Streams the open-file limit allows.
    public var streamsAllowedByOpenFiles: Int {
        max(0, (openFileLimit - Self.reservedDescriptors - Self.handshakeAllowance) / Self.descriptorsPerStream)
    }

    /// Streams the memory allows.
    public var streamsAllowedByMemory: Int {
        Int(min(UInt64(Int.max), physicalMemory / Self.memoryPerStream))
    }

    /// `--max-streams` when not given: what both the open-file limit and the memory allow (at least 1).
    public var defaultMaximumStreams: Int {
        max(1, min(streamsAllowedByOpenFiles, streamsAllowedByMemory))
    }

    /// The stream limit to run with: `requested` (--max-streams), lowered to what the open-file
    /// limit allows (at least 1) so that a stream beyond it is refused as one too many rather than
    /// failing for a missing descriptor; `defaultMaximumStreams` when nothing was requested.
    public func maximumStreams(requested: Int?) -> Int {
        guard let requested else { return defaultMaximumStreams }
        return min(requested, max(1, streamsAllowedByOpenFiles))
    }

    /// Streams the open-file limit allows when each keeps its file's descriptor.
    public var streamsHoldingFiles: Int {
        max(0, (openFileLimit - Self.reservedDescriptors - Self.handshakeAllowance) / Self.descriptorsPerStreamHoldingFiles)
    }

    /// Whether `maximumStreams` streams can each keep their file's descriptor beside their connection.
    public func holdsFileDescriptors(maximumStreams: Int) -> Bool {
        maximumStreams * Self.descriptorsPerStreamHoldingFiles + Self.reservedDescriptors + Self.handshakeAllowance <= openFileLimit
    }

    /// The open-file limit a stream limit of `streams` needs.
    public static func openFilesNeeded(forStreams streams: Int) -> Int {
        streams * descriptorsPerStream + reservedDescriptors + handshakeAllowance
    }

    /// Raises this process's soft open-file limit to its hard limit (an unprivileged process may)
    /// and measures what the machine allows.
    public static func raiseAndMeasure() -> StreamCapacity {
        let limit = OpenFileLimit.raiseSoftToHard()
        return StreamCapacity(
            openFileLimit: limit.now, openFileLimitBefore: limit.before,
            physicalMemory: ProcessInfo.processInfo.physicalMemory)
    }
}
