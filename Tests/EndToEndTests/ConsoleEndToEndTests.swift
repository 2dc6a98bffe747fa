import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// capture-recv --http with the real executables: the streams API and its events show a live tone
/// at the level it was sent, and access off loopback needs a token.
final class ConsoleEndToEndTests: XCTestCase {
    private func httpPort(of receiver: ReceiverUnderTest) throws -> Int {
        var port: Int?
        XCTAssertTrue(waitFor {
            port = receiver.child.standardOutput.split(separator: "\n")
                .first { $0.hasPrefix("http on ") }.flatMap { Int($0.split(separator: ":").last ?? "") }
            return port != nil
        }, receiver.child.standardOutput)
        return try XCTUnwrap(port)
    }

    private func rows(_ port: Int, headers: [String: String] = [:]) -> [[String: Any]] {
        guard let response = try? OpsHTTPClient.request(port: port, path: "/api/streams", headers: headers), response.status == 200 else { return [] }
        return (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [[String: Any]] ?? []
    }

    func testTheAPIShowsALiveToneAtItsLevelAndItsEventsStream() throws {
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "127.0.0.1:0"])
        let port = try httpPort(of: receiver)
        // capture-send's tone: 440 Hz, peak -12 dBFS (a sine: RMS 3 dB lower).
        let sender = try ChildProcess(Products.send, [receiver.address, "--source", "tone", "--duration", "6", "--stream-name", "levels-e2e", "--buffer-seconds", "0.1"])
        var row: [String: Any] = [:]
        XCTAssertTrue(waitFor(20) {
            row = rows(port).first ?? [:]
            return row["levels"] is [String: Any] && (row["seconds_acknowledged"] as? Double ?? 0) > 0.5
        }, "\(row)")
        XCTAssertEqual(row["name"] as? String, "levels-e2e")
        XCTAssertEqual(row["state"] as? String, "live")
        XCTAssertEqual(row["format"] as? String, "s16 48000 Hz 2 ch")
        XCTAssertTrue((row["file"] as? String ?? "").hasPrefix("levels-e2e_"), "\(row)")
        XCTAssertTrue((row["peer"] as? String ?? "").hasPrefix("127.0.0.1:"), "\(row)")
        XCTAssertNotNil(row["last_audio_received"] as? String)
        XCTAssertEqual(row["gap_count"] as? Int, 0)
        XCTAssertLessThanOrEqual(row["seconds_acknowledged"] as? Double ?? 99, row["seconds_on_disk"] as? Double ?? 0)
        let levels = try XCTUnwrap(row["levels"] as? [String: [Double]])
        XCTAssertEqual(levels["peak_dbfs"]?.count, 2)
        for peak in levels["peak_dbfs"] ?? [] { XCTAssertEqual(peak, -12, accuracy: 0.5, "peak of a -12 dBFS tone") }
        for rms in levels["rms_dbfs"] ?? [] { XCTAssertEqual(rms, -15, accuracy: 0.5, "RMS of a sine 3 dB below its peak") }
        let id = try XCTUnwrap(row["id"] as? String)
        let one = try OpsHTTPClient.request(port: port, path: "/api/streams/\(id)")
        XCTAssertEqual(one.status, 200)

        // About ten levels events a second while the tone plays.
        let events = String(decoding: try OpsHTTPClient.stream(port: port, path: "/api/events", seconds: 2), as: UTF8.self)
            .replacingOccurrences(of: "\r\n", with: "\n")
        let levelLines = events.components(separatedBy: "\n\n").filter { $0.contains("event: levels") }
        XCTAssertGreaterThanOrEqual(levelLines.count, 8, events)
        XCTAssertLessThanOrEqual(levelLines.count, 24, "coalesced to about 10 a second: \(levelLines.count)")
        let data = try XCTUnwrap(levelLines.first?.components(separatedBy: "\n").first { $0.hasPrefix("data: ") })
        let update = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(data.dropFirst(6).utf8)) as? [String: Any])
        XCTAssertEqual(update["id"] as? String, id)
        XCTAssertEqual((update["peak_dbfs"] as? [Double])?.first ?? 0, -12, accuracy: 0.5)

        XCTAssertEqual(sender.wait(seconds: 30), 0, sender.standardError)
        XCTAssertTrue(waitFor { (rows(port).first?["state"] as? String) == "finished" })
        XCTAssertEqual(rows(port).first?["seconds_on_disk"] as? Double ?? 0, 6, accuracy: 0.001)
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }

    func testAnAddressBeyondLoopbackNeedsATokenAndIsOpenWithIt() throws {
        let refused = try ToolRunner.run(Products.recv, ["--out", NSTemporaryDirectory() + "never-\(UUID().uuidString)", "--http", "0.0.0.0:0"])
        XCTAssertNotEqual(refused.exitStatus, 0)
        let lines = refused.errorText.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, refused.errorText)
        XCTAssertTrue(refused.errorText.contains("--http 0.0.0.0 is reachable from other machines, and the console plays live audio: give --http-token-file FILE"), refused.errorText)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("console-token-\(UUID().uuidString)")
        try Unprivileged.makeDirectory(folder)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokenFile = folder.appendingPathComponent("tokens")
        try "console-secret-token-1\n".write(to: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile.path, 0o600)
        Unprivileged.handOver(tokenFile.path)
        let receiver = try ReceiverUnderTest(extraArguments: ["--http", "0.0.0.0:0", "--http-token-file", tokenFile.path])
        let port = try httpPort(of: receiver)
        XCTAssertEqual(try OpsHTTPClient.request(port: port, path: "/api/streams").status, 401)
        XCTAssertEqual(try OpsHTTPClient.request(port: port, path: "/metrics").status, 401)
        let allowed = try OpsHTTPClient.request(port: port, path: "/api/streams", headers: ["Authorization": "Bearer console-secret-token-1"])
        XCTAssertEqual(allowed.status, 200)
        XCTAssertEqual(allowed.body, "[]")
        XCTAssertEqual(receiver.stop(), 0, receiver.child.standardError)
    }
}
