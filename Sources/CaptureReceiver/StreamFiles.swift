import CAF
import CaptureWire
import Foundation

/// Creates the file for a newly accepted stream: a unique name in the output folder and a CAF file
/// with the stream's format, magic cookie and `info` entries.
enum StreamFiles {
    static func create(
        hello: ValidatedHello, start: Date, peer: String, configuration: ReceiverConfiguration,
        onDurable: @escaping @Sendable (DurablePosition) -> Void,
        onFailure: @escaping @Sendable (StorageError) -> Void
    ) -> Result<StreamWriter, StorageError> {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let message = hello.message
        var source = message.sourceHost.isEmpty ? peer : "\(message.sourceHost) (\(peer))"
        source = source.replacingOccurrences(of: "\0", with: "")
        let info: [(key: String, value: String)] = [
            ("title", message.streamName.replacingOccurrences(of: "\0", with: "")),
            ("recorded date", formatter.string(from: start)),
            ("source", source),
            ("encoding application", (message.application.isEmpty ? "unknown sender" : message.application).replacingOccurrences(of: "\0", with: "") + ", \(configuration.applicationName)"),
            ("stream id", hello.streamID.uuidString.lowercased()),
        ]
        for attempt in 1...100 {
            let name = StreamFileNaming.fileName(streamName: message.streamName, start: start, attempt: attempt)
            let path = (configuration.outputDirectory as NSString).appendingPathComponent(name)
            do {
                let writer = try StreamWriter(
                    path: path, format: hello.format, info: info, magicCookie: storedCookie(hello),
                    primingFrames: Int(message.primingFrames),
                    start: DurablePosition(sequence: 0, sampleTime: message.startSampleTime),
                    policy: configuration.syncPolicy, onDurable: onDurable, onFailure: onFailure
                )
                return .success(writer)
            } catch .fileExists {
                continue
            } catch {
                return .failure(.cannotCreate("cannot create \(path): \(error.description)"))
            }
        }
        return .failure(.cannotCreate("cannot find a free file name for stream \(message.streamName) in \(configuration.outputDirectory)"))
    }

    /// The magic cookie the file keeps (PROTOCOL.md §11): Opus mono and stereo files carry none, since
    /// no reader needs it and an Apple reader expects another layout; 3–8 channel Opus keeps the
    /// OpusHead for its channel mapping.
    static func storedCookie(_ hello: ValidatedHello) -> [UInt8] {
        if hello.format.formatID == .opus, hello.format.channelCount <= 2 { return [] }
        return Array(hello.message.magicCookie)
    }
}
