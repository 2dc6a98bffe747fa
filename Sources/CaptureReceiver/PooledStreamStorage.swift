import CaptureWire
import Foundation

extension StreamWriter: StreamFile {
    func write(_ audio: AudioWrite) {
        write(sequence: audio.sequence, payload: audio.payload, packetSizes: audio.packetSizes, frameCount: audio.frameCount, endSampleTime: audio.endSampleTime)
    }
}

/// The session handlers' storage: stream files created and reopened on the receiver's `WriterPool`.
struct PooledStreamStorage: StreamStorage {
    let pool: WriterPool
    let configuration: ReceiverConfiguration

    func open(
        _ hello: ValidatedHello, resumingFrom: String?, peer: String, events: StreamWriterEvents,
        completion: @escaping @Sendable (Result<(any StreamFile, ResumePoint), StorageError>) -> Void
    ) {
        if let resumingFrom {
            pool.reopen(path: resumingFrom, hello: hello, configuration: configuration, events: events) { result in
                completion(result.map { ($0.0 as any StreamFile, $0.1) })
            }
        } else {
            let start = hello.message.startTimeUnixNs > 0
                ? Date(timeIntervalSince1970: Double(hello.message.startTimeUnixNs) / 1e9) : Date()
            pool.create(hello: hello, start: start, peer: peer, configuration: configuration, events: events) { result in
                completion(result.map { ($0 as any StreamFile, ResumePoint.newStream(hello)) })
            }
        }
    }
}
