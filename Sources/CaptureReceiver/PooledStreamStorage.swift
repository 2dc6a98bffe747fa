import CaptureWire
import Foundation

extension StreamWriter: StreamFile {
    func write(_ audio: AudioWrite) {
        write(sequence: audio.sequence, payload: audio.payload, packetSizes: audio.packetSizes, frameCount: audio.frameCount, endSampleTime: audio.endSampleTime)
    }
}

/// The session handlers' storage: stream files opened (continued or created) by the receiver's
/// `StreamFiles` on its `WriterPool`, claimed in the output folder's `StreamIndex`.
struct PooledStreamStorage: StreamStorage {
    let files: StreamFiles

    func open(
        _ hello: ValidatedHello, mayCreate: Bool, owner: StreamOwner, peer: String, events: StreamWriterEvents,
        completion: @escaping @Sendable (Result<OpenedStreamFile, StorageError>) -> Void
    ) {
        let start = hello.message.startTimeUnixNs > 0
            ? Date(timeIntervalSince1970: Double(hello.message.startTimeUnixNs) / 1e9) : Date()
        files.open(hello: hello, mayCreate: mayCreate, owner: owner, start: start, peer: peer, events: events) { result in
            completion(result.map { OpenedStreamFile(file: $0.writer, resume: $0.resume, resumed: $0.resumed, naming: $0.naming, continuation: $0.continuation) })
        }
    }
}
