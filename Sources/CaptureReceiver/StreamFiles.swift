import CAF
import CaptureCore
import CaptureWire
import Foundation

/// Creates the file for a newly accepted stream (a unique name in the output folder and a CAF file
/// with the stream's format, magic cookie and `info` entries, plus its position log), or reopens
/// the unfinalized file of a stream that resumes. Runs on a `WriterPool` lane, the one the stream's
/// writer is bound to.
enum StreamFiles {
    static func create(
        hello: ValidatedHello, start: Date, peer: String, configuration: ReceiverConfiguration,
        events: StreamWriterEvents, lane: WriterLane, pool: WriterPool
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
            let caf: CAFWriter
            do throws(CAFError) {
                caf = try CAFWriter(
                    path: path, format: hello.format, info: info, magicCookie: storedCookie(hello),
                    primingFrames: Int(message.primingFrames), synchronizing: false
                )
            } catch .fileExists {
                continue
            } catch {
                return .failure(.cannotCreate("cannot create \(path): \(error.description)"))
            }
            let origin = StreamPositionRecord(sequence: 0, sampleTime: message.startSampleTime, packets: 0)
            do throws(DurableFileError) {
                // No fsync here: the pool's next sync round (syncfs) makes the new files and their
                // folder entries durable before anything written to them is acknowledged.
                let positionLog = try StreamPositionLog.createForNewFile(cafPath: path, initial: origin)
                return .success(StreamWriter(
                    writer: caf, positionLog: positionLog,
                    start: DurablePosition(sequence: 0, sampleTime: message.startSampleTime),
                    lane: lane, pool: pool, events: events, metrics: pool.metrics, entriesDurable: false
                ))
            } catch {
                // The file holds no audio yet: leave nothing behind, so a retry starts cleanly.
                caf.close()
                try? DurableFile.remove(path)
                try? DurableFile.remove(path + ".pakt-journal")
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

    /// Reopens the unfinalized file of a stream that is coming back (after a lost connection or a
    /// receiver restart) at exactly what its position log says is durable, and returns the writer and
    /// where the sender must resume. Audio written after that point (never acknowledged) is cut off;
    /// the sender still holds it and resends it.
    static func reopen(
        path: String, hello: ValidatedHello, configuration: ReceiverConfiguration,
        events: StreamWriterEvents, lane: WriterLane, pool: WriterPool
    ) -> Result<(StreamWriter, ResumePoint), StorageError> {
        let record: StreamPositionRecord
        do throws(DurableFileError) {
            record = try StreamPositionLog.lastRecord(cafPath: path)
                ?? StreamPositionRecord(sequence: 0, sampleTime: hello.message.startSampleTime, packets: 0)
        } catch {
            return .failure(.cannotCreate("cannot read the position of \(path): \(error.description)"))
        }
        let caf: CAFWriter
        do throws(CAFError) {
            caf = try CAFWriter.resume(path: path, keepingPackets: record.packets)
        } catch {
            return .failure(.cannotCreate("cannot reopen \(path) to resume the stream: \(error.description)"))
        }
        guard caf.format == hello.format else {
            caf.close()
            return .failure(.formatChanged("stream \(hello.streamID) was recorded as \(caf.format) in \(path) but now sends \(hello.format); a resumed stream must keep its format (start a new stream)"))
        }
        do throws(DurableFileError) {
            let positionLog = try StreamPositionLog.create(cafPath: path, initial: record)
            let writer = StreamWriter(
                writer: caf, positionLog: positionLog,
                start: DurablePosition(sequence: record.sequence, sampleTime: record.sampleTime),
                lane: lane, pool: pool, events: events, metrics: pool.metrics
            )
            return .success((writer, ResumePoint(nextSequence: record.sequence + 1, nextSampleTime: record.sampleTime)))
        } catch {
            caf.close()
            return .failure(.cannotCreate("cannot reopen \(path) to resume the stream: \(error.description)"))
        }
    }
}
