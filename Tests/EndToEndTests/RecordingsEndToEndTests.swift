import CAF
import Foundation
import TestSupport
import XCTest

/// The console's recordings view with the real executables: a stream whose sender stays away longer
/// than the resume window leaves a file finalized without its end (incomplete), and the stream that
/// continues it one that ends with its end (complete); a file being recorded is not listed; the
/// listing's frames are the files', a download is the file, an export decodes to its frames.
final class RecordingsEndToEndTests: XCTestCase {
    private func recordings(_ port: Int) -> [[String: Any]] {
        guard let response = try? OpsHTTPClient.request(port: port, path: "/api/recordings"), response.status == 200 else { return [] }
        return (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [[String: Any]] ?? []
    }

    func testTheRecordingsViewListsACompleteAndAnIncompleteRecordingAndServesThem() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("recordings-e2e-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(work)
        defer { try? FileManager.default.removeItem(at: work) }
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0", "--idle-timeout", "2", "--resume-window", "3"])
        let port = try receiver.httpPort()
        let link = try FaultProxy(upstreamPort: receiver.port, seed: 11)
        let sender = try ChildProcess(Products.send, [
            "127.0.0.1:\(link.port)", "--source", "tone", "--duration", "8", "--stream-name", "desk-e2e", "--buffer-seconds", "0.05",
            "--spool", work.appendingPathComponent("spool").path, "--reconnect-min", "0.05", "--reconnect-max", "0.3",
            "--idle-timeout", "30", "--log-level", "info",
        ])
        Resilience.waitUntil("the stream is recorded") { receiver.child.standardError.contains("stream opened") }
        Thread.sleep(forTimeInterval: 1)
        XCTAssertEqual(recordings(port).count, 0, "a file being recorded is not listed")
        link.mode = .stall
        Resilience.waitUntil("the receiver finalized the stream after its resume window") {
            receiver.child.standardError.contains("did not come back within the resume window; file finalized")
        }
        link.mode = .pass
        link.resetAll()
        XCTAssertEqual(Resilience.finish(sender, seconds: 60), 0, sender.standardError)

        var rows: [[String: Any]] = []
        XCTAssertTrue(waitFor(20) {
            rows = recordings(port)
            return rows.count == 2
        }, "\(rows)")
        guard rows.count == 2 else { return }
        // Newest first: the continuation, then the file its sender did not come back to in time.
        let (continuation, abandoned) = (rows[0], rows[1])
        XCTAssertEqual(abandoned["complete"] as? Bool, false, "the stream that continues it says so, after its index record went: \(abandoned)")
        XCTAssertEqual(continuation["complete"] as? Bool, true, "\(continuation)")
        for row in rows {
            XCTAssertEqual(row["stream"] as? String, "desk-e2e")
            XCTAssertEqual(row["format"] as? String, "s16 48000 Hz 2 ch")
            let path = try XCTUnwrap(row["path"] as? String)
            let file = try CAFFile.read(path: receiver.directory.appendingPathComponent(path).path)
            XCTAssertEqual(row["frames"] as? Int, Int(file.totalFrames ?? -1), path)
            XCTAssertEqual(row["duration_seconds"] as? Double ?? 0, Double(file.totalFrames ?? 0) / 48_000, accuracy: 1e-9)
            XCTAssertEqual(row["bytes"] as? Int, (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.intValue)
            let info = Dictionary(file.info.map { ($0.key, $0.value) }) { first, _ in first }
            XCTAssertEqual(row["stream_id"] as? String, info["stream id"])
            XCTAssertEqual(row["start"] as? String, info["first sample time"])
        }
        XCTAssertEqual((abandoned["frames"] as? Int ?? 0) + (continuation["frames"] as? Int ?? 0), 8 * 48_000, "the two files hold the stream")
        let day = String((continuation["start"] as? String ?? "").prefix(10))
        let filtered = try OpsHTTPClient.request(port: port, path: "/api/recordings?stream=desk-e2e&day=\(day)")
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(filtered.body.utf8)) as? [Any])?.count, 2, filtered.body)
        let other = try OpsHTTPClient.request(port: port, path: "/api/recordings?stream=nobody")
        XCTAssertEqual(other.body, "[]")

        // A download is the file; an export decodes to its frames.
        let path = try XCTUnwrap(continuation["path"] as? String)
        let url = "http://127.0.0.1:\(port)/api/recordings/file/\(path)"
        if let curl = ToolRunner.find("curl") {
            let downloaded = work.appendingPathComponent("download.caf").path
            let result = try ToolRunner.run(curl, ["-s", "-S", "-f", "-o", downloaded, url])
            XCTAssertEqual(result.exitStatus, 0, result.errorText)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: downloaded)), try Data(contentsOf: receiver.directory.appendingPathComponent(path)))
            let exported = work.appendingPathComponent("export.wav").path
            let export = try ToolRunner.run(curl, ["-s", "-S", "-f", "-o", exported, "http://127.0.0.1:\(port)/api/recordings/export/\(path)?format=wav"])
            XCTAssertEqual(export.exitStatus, 0, export.errorText)
            if let soxi = ToolRunner.find("soxi") {
                let frames = try ToolRunner.run(soxi, ["-s", exported])
                XCTAssertEqual(frames.outputText.trimmingCharacters(in: .whitespacesAndNewlines), "\(continuation["frames"] as? Int ?? -1)", frames.errorText)
            }
        }
        let left = try FileManager.default.subpathsOfDirectory(atPath: receiver.directory.path).filter { !$0.hasPrefix(".") && !$0.hasSuffix(".caf") }
        XCTAssertEqual(left, [], "nothing exported into the output folder")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}
