import CaptureWire
import Foundation

extension StreamWriter: StreamFile {
    func write(_ audio: AudioWrite) {
        write(sequence: audio.sequence, payload: audio.payload, packetSizes: audio.packetSizes, frameCount: audio.frameCount, endSampleTime: audio.endSampleTime)
    }
}

/// Opens stream files with `StreamFiles` off the event loop.
struct StreamFilesStorage: StreamStorage {
    let configuration: ReceiverConfiguration

    func open(
        _ hello: ValidatedHello, resumingFrom: String?, peer: String, events: StreamWriterEvents,
        completion: @escaping @Sendable (Result<(any StreamFile, ResumePoint), StorageError>) -> Void
    ) {
        let configuration = self.configuration
        DispatchQueue.global().async {
            let start = hello.message.startTimeUnixNs > 0
                ? Date(timeIntervalSince1970: Double(hello.message.startTimeUnixNs) / 1e9) : Date()
            if let resumingFrom {
                completion(StreamFiles.reopen(path: resumingFrom, hello: hello, configuration: configuration, onDurable: events.durable, onFailure: events.failed)
                    .map { ($0.0 as any StreamFile, $0.1) })
            } else {
                completion(StreamFiles.create(hello: hello, start: start, peer: peer, configuration: configuration, onDurable: events.durable, onFailure: events.failed)
                    .map { ($0 as any StreamFile, ResumePoint.newStream(hello)) })
            }
        }
    }
}
