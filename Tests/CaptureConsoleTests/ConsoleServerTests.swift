import CaptureConsole
import CaptureCore
@testable import CaptureReceiver
import CaptureSecurity
import CaptureWire
import Foundation
import Logging
import TestSupport
import XCTest

/// The receiver's HTTP server as clients see it: who gets in, what the API answers, the events
/// feed, and that idle connections do not stay open.
final class ConsoleServerTests: XCTestCase {
    private static let token = "field-crew-7f3a9c"
    private static let stream = UUID(uuidString: "6F1C2A9E-4B3D-4E5F-8A7B-9C0D1E2F3A4B") ?? UUID()

    // MARK: - Access (pure)

    func testAccessTable() throws {
        let tokens = AuthTokens(tokens: [Self.token])
        let open = try ConsoleAccess(host: "127.0.0.1", tokens: nil)
        let guarded = try ConsoleAccess(host: "0.0.0.0", tokens: tokens)
        let cookie = "\(ConsoleAccess.cookieName)=\(ConsoleAccess.sessionValue(for: Self.token))"
        let cases: [(ConsoleAccess, String?, String?, Bool, String)] = [
            (open, nil, nil, true, "loopback needs nothing"),
            (guarded, nil, nil, false, "no credentials"),
            (guarded, "Bearer \(Self.token)", nil, true, "the bearer token"),
            (guarded, "bearer \(Self.token)", nil, true, "the scheme is case-insensitive"),
            (guarded, "Bearer wrong", nil, false, "a wrong token"),
            (guarded, "Basic \(Self.token)", nil, false, "another scheme"),
            (guarded, nil, cookie, true, "the login cookie"),
            (guarded, nil, "theme=dark; \(cookie)", true, "the login cookie among others"),
            (guarded, nil, "\(ConsoleAccess.cookieName)=\(Self.token)", false, "the raw token is not a session"),
            (guarded, nil, "\(ConsoleAccess.cookieName)=", false, "an empty session"),
        ]
        for (access, authorization, cookieHeader, allowed, what) in cases {
            XCTAssertEqual(access.allows(authorization: authorization, cookieHeader: cookieHeader), allowed, what)
        }
        for host in ["127.0.0.1", "127.8.9.10", "::1", "localhost"] { XCTAssertTrue(ConsoleAccess.isLoopback(host), host) }
        for host in ["0.0.0.0", "192.0.2.1", "::", "example.org", "127.0.0.1.example.org"] { XCTAssertFalse(ConsoleAccess.isLoopback(host), host) }
        XCTAssertThrowsError(try ConsoleAccess(host: "0.0.0.0", tokens: nil)) { error in
            XCTAssertEqual("\(error)", "the console's address (ConsoleSettings.host, .port) 0.0.0.0 is reachable from other machines, and the console plays live audio:"
                + " give the console's tokens (ConsoleAccess tokens) (the tokens that may use it), or listen on 127.0.0.1")
        }
    }

    // MARK: - Over HTTP

    func testWithTokensEveryRequestNeedsOneAndTheLoginFormSetsASession() async throws {
        let console = try await RunningConsole(access: try ConsoleAccess(host: "127.0.0.1", tokens: AuthTokens(tokens: [Self.token])), directory: StreamDirectory(settings: .init(resumeWindow: .seconds(60))))
        addTeardownBlock { await console.stop() }

        let refused = try await HTTP.get(port: console.port, path: "/api/streams")
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.headers["www-authenticate"], #"Bearer realm="capture-recv""#)
        XCTAssertTrue(refused.body.contains("needs a token"), refused.body)
        let metrics = try await HTTP.get(port: console.port, path: "/metrics")
        XCTAssertEqual(metrics.status, 401, "metrics are behind the token too")
        let page = try await HTTP.get(port: console.port, path: "/", headers: ["Accept": "text/html"])
        XCTAssertEqual(page.status, 401)
        XCTAssertTrue(page.body.contains(#"<form method="post" action="/login">"#), "a browser gets the login form")

        let allowed = try await HTTP.get(port: console.port, path: "/api/streams", headers: ["Authorization": "Bearer \(Self.token)"])
        XCTAssertEqual(allowed.status, 200)
        XCTAssertEqual(allowed.body, "[]")

        let wrong = try await HTTP.get(method: "POST", port: console.port, path: "/login",
                                       headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=guess")
        XCTAssertEqual(wrong.status, 401)
        XCTAssertTrue(wrong.body.contains("That is not one of this receiver&#39;s tokens") || wrong.body.contains("That is not one of this receiver's tokens."), wrong.body)
        XCTAssertNil(wrong.headers["set-cookie"])

        let login = try await HTTP.get(method: "POST", port: console.port, path: "/login",
                                       headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=\(Self.token)")
        XCTAssertEqual(login.status, 303)
        XCTAssertEqual(login.headers["location"], "/")
        let setCookie = try XCTUnwrap(login.headers["set-cookie"])
        XCTAssertTrue(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"), setCookie)
        XCTAssertFalse(setCookie.contains(Self.token), "the token itself never goes into the browser")
        let session = try XCTUnwrap(setCookie.split(separator: ";").first).trimmingCharacters(in: .whitespaces)
        let withSession = try await HTTP.get(port: console.port, path: "/", headers: ["Cookie": session, "Accept": "text/html"])
        XCTAssertEqual(withSession.status, 200)
        XCTAssertTrue(withSession.body.contains(#"<script src="/console.js"></script>"#))
        XCTAssertEqual(withSession.headers["content-security-policy"], "default-src 'self'; media-src 'self'; img-src 'self' data:", "nothing from elsewhere")
    }

    func testTheStreamsAPIAnswersFromTheDirectory() async throws {
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60)))
        let recorder = directory.streamOpened(StreamOpening(
            id: Self.stream, name: "studio-a", peer: "127.0.0.1:50000", format: .linearPCM(sampleRate: 48_000, channels: 2, sample: .s16),
            started: Date(timeIntervalSince1970: 1_767_225_600), startSampleTime: 0, file: "studio-a_20260101T000000Z.caf",
            resumed: false, durableSampleTime: 0))
        recorder.audioReceived(endSampleTime: 24_000, levels: AudioLevels(linearPeaks: [0.25, 0.5], linearRMS: [0.125, 0.25]))
        recorder.positionsChanged(durableSampleTime: 24_000, acknowledgedSampleTime: 24_000)
        let console = try await RunningConsole(directory: directory)
        addTeardownBlock { await console.stop() }

        let list = try await HTTP.get(port: console.port, path: "/api/streams")
        XCTAssertEqual(list.status, 200)
        XCTAssertEqual(list.headers["content-type"], "application/json; charset=utf-8")
        let rows = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(list.body.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.count, 1)
        let row = try XCTUnwrap(rows.first)
        XCTAssertEqual(row["id"] as? String, "6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b")
        XCTAssertEqual(row["name"] as? String, "studio-a")
        XCTAssertEqual(row["state"] as? String, "live")
        XCTAssertEqual(row["file"] as? String, "studio-a_20260101T000000Z.caf")
        XCTAssertEqual(row["seconds_on_disk"] as? Double, 0.5)
        XCTAssertEqual(row["seconds_acknowledged"] as? Double, 0.5)
        let levels = try XCTUnwrap(row["levels"] as? [String: [Double]])
        XCTAssertEqual(try XCTUnwrap(levels["peak_dbfs"]?.first), -12.04, accuracy: 0.01)
        XCTAssertEqual(try XCTUnwrap(levels["rms_dbfs"]?.last), -12.04, accuracy: 0.01)
        XCTAssertEqual(Set(levels.keys), ["peak_dbfs", "rms_dbfs"], "no loudness from a sender that measures none")

        // A sender that measures loudness: the row shows its figures beside the peaks.
        recorder.audioReceived(endSampleTime: 48_000, levels: AudioLevels(
            linearPeaks: [0.25, 0.5], linearRMS: [0.125, 0.25],
            loudness: Loudness(momentaryLUFS: -21.5, shortTermLUFS: -23.04, truePeakDBTP: [-11.9, -.infinity])))
        let measured = try await HTTP.get(port: console.port, path: "/api/streams")
        let measuredRow = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(measured.body.utf8)) as? [[String: Any]])?.first)
        let loudness = try XCTUnwrap(measuredRow["levels"] as? [String: Any])
        XCTAssertEqual(loudness["momentary_lufs"] as? Double, -21.5)
        XCTAssertEqual(loudness["short_term_lufs"] as? Double, -23.04)
        XCTAssertEqual(loudness["true_peak_dbtp"] as? [Double], [-11.9, -120])

        let one = try await HTTP.get(port: console.port, path: "/api/streams/6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b")
        XCTAssertEqual(one.status, 200)
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(one.body.utf8)) as? [String: Any])?["name"] as? String, "studio-a")
        let unknown = try await HTTP.get(port: console.port, path: "/api/streams/\(UUID().uuidString)")
        XCTAssertEqual(unknown.status, 404)
        XCTAssertTrue(unknown.body.contains("no stream"), unknown.body)
        let bad = try await HTTP.get(port: console.port, path: "/api/streams/not-a-uuid")
        XCTAssertEqual(bad.status, 400)
        let notLive = try await HTTP.get(port: console.port, path: "/api/streams/\(UUID().uuidString)/listen")
        XCTAssertEqual(notLive.status, 404)

        // The stream's timeline.
        recorder.gapRecorded(sampleTime: 24_000, lengthFrames: 4_800, reason: "overrun")
        let timeline = try await HTTP.get(port: console.port, path: "/api/streams/6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b/timeline")
        XCTAssertEqual(timeline.status, 200)
        let body = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(timeline.body.utf8)) as? [String: Any])
        let entries = try XCTUnwrap(body["entries"] as? [[String: Any]])
        XCTAssertEqual(entries.compactMap { $0["kind"] as? String }, ["opened", "gap"])
        XCTAssertEqual(entries.last?["stream_seconds"] as? Double, 0.5)
        XCTAssertEqual(entries.last?["detail"] as? String, "0.100 s, overrun")
        let unknownTimeline = try await HTTP.get(port: console.port, path: "/api/streams/\(UUID().uuidString)/timeline")
        XCTAssertEqual(unknownTimeline.status, 404)
        let badTimeline = try await HTTP.get(port: console.port, path: "/api/streams/x/timeline")
        XCTAssertEqual(badTimeline.status, 400)
    }

    func testEventsArriveAsServerSentEventsInOrder() async throws {
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60), levelsInterval: .zero))
        let console = try await RunningConsole(directory: directory)
        addTeardownBlock { await console.stop() }
        Thread.detachNewThread {
            // The stream's life starts once the request below has subscribed to the events.
            let deadline = Date().addingTimeInterval(30)
            while directory.subscriberCount == 0, Date() < deadline { usleep(1_000) }
            let recorder = directory.streamOpened(StreamOpening(
                id: Self.stream, name: "studio-a", peer: "127.0.0.1:50000", format: .linearPCM(sampleRate: 48_000, channels: 1, sample: .s16),
                started: Date(), startSampleTime: 0, file: "a.caf", resumed: false, durableSampleTime: 0))
            recorder.audioReceived(endSampleTime: 4_800, levels: AudioLevels(linearPeaks: [0.5], linearRMS: [0.25]))
            recorder.gapRecorded(sampleTime: 4_800, lengthFrames: 4_800, reason: "overrun")
            recorder.connectionEnded(resumable: true)
        }
        // Chunked transfer: the chunk sizes sit on lines of their own once CR LF is a plain line break.
        let text = try await HTTP.stream(port: console.port, path: "/api/events", seconds: 2).replacingOccurrences(of: "\r\n", with: "\n")
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 200"), text)
        XCTAssertTrue(text.lowercased().contains("content-type: text/event-stream"), text)
        let names = text.components(separatedBy: "\n").filter { $0.hasPrefix("event: ") }.map { String($0.dropFirst(7)) }
        XCTAssertEqual(names, ["opened", "levels", "gap", "closed"], text)
        let gapData = try XCTUnwrap(text.components(separatedBy: "\n").first { $0.hasPrefix("data: ") && $0.contains("overrun") })
        let gap = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(gapData.dropFirst(6).utf8)) as? [String: Any])
        XCTAssertEqual(gap["seconds"] as? Double, 0.1)
        XCTAssertEqual(gap["gap_count"] as? Int, 1)
    }

    func testWithTheReceiversCertificateItSpeaksHTTPSOnly() async throws {
        let folder = NSTemporaryDirectory() + "console-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let issued = try CertificateFactory.make(commonName: "receiver", hosts: ["127.0.0.1"])
        let files = try CertificateFactory.write(issued, to: folder, overwrite: true)
        let console = try await RunningConsole(tlsCertificatePath: files.certificate, tlsKeyPath: files.key)
        addTeardownBlock { await console.stop() }
        // curl as an independent client, trusting exactly the receiver's certificate.
        let https = try await Self.curl(["--cacert", files.certificate, "https://127.0.0.1:\(console.port)/metrics"])
        XCTAssertTrue(https.succeeded, https.errorText)
        XCTAssertTrue(https.outputText.contains("capture_active_streams"), https.outputText)
        let plain = try await Self.curl(["http://127.0.0.1:\(console.port)/metrics"])
        XCTAssertFalse(plain.succeeded && plain.outputText.contains("capture_active_streams"), "no plain HTTP on the TLS port")
    }

    /// Unusable TLS files stop the console before it listens, with the file and what to do: a
    /// missing certificate, and a key that belongs to another certificate.
    func testUnusableTLSFilesAreRefusedWithTheFileAndWhatToDo() throws {
        let folder = NSTemporaryDirectory() + "console-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let files = try CertificateFactory.write(try CertificateFactory.make(commonName: "receiver", hosts: ["127.0.0.1"]), to: folder, overwrite: true)
        let otherFolder = folder + "/other"
        try FileManager.default.createDirectory(atPath: otherFolder, withIntermediateDirectories: true)
        let other = try CertificateFactory.write(try CertificateFactory.make(commonName: "other", hosts: ["127.0.0.1"]), to: otherFolder, overwrite: true)
        let access = try ConsoleAccess(host: "127.0.0.1", tokens: nil)
        func make(certificate: String, key: String) -> ConsoleSetupError? {
            let settings = ConsoleSettings(host: "127.0.0.1", port: 0, access: access, tlsCertificatePath: certificate, tlsKeyPath: key)
            do throws(ConsoleSetupError) {
                _ = try ConsoleServer.make(settings: settings, metrics: nil, directory: nil, logger: Logger(label: "console-test"))
                return nil
            } catch {
                return error
            }
        }
        let missing = folder + "/missing.pem"
        let unreadable = try XCTUnwrap(make(certificate: missing, key: files.key))
        guard case .tls(.unusableFile(.unreadableFile(let path, _))) = unreadable else { return XCTFail("\(unreadable)") }
        XCTAssertEqual(path, missing)
        XCTAssertTrue(unreadable.description.hasPrefix("cannot serve the console over TLS: "), unreadable.description)
        XCTAssertTrue(unreadable.description.contains(missing), unreadable.description)
        let mismatched = try XCTUnwrap(make(certificate: files.certificate, key: other.key))
        guard case .tls(.cannotSetUp(let certificatePath, let keyPath, let reason)) = mismatched else { return XCTFail("\(mismatched)") }
        XCTAssertEqual([certificatePath, keyPath], [files.certificate, other.key])
        XCTAssertFalse(reason.isEmpty)
        XCTAssertEqual(
            mismatched.description,
            "cannot serve the console over TLS: cannot set up TLS with \(files.certificate) and \(other.key): \(reason); check that the key belongs to the certificate")
    }

    private static func curl(_ arguments: [String]) async throws -> ToolResult {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try ToolRunner.run("curl", ["-sS", "--max-time", "10"] + arguments) })
            }
        }
    }

    func testHostileRequestsAreRefusedAndTheServerGoesOn() async throws {
        let console = try await RunningConsole(access: try ConsoleAccess(host: "127.0.0.1", tokens: AuthTokens(tokens: [Self.token])))
        addTeardownBlock { await console.stop() }
        // A login body far beyond any token: refused, not read into memory.
        let huge = try await HTTP.get(method: "POST", port: console.port, path: "/login",
                                      headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "token=" + String(repeating: "A", count: 200_000))
        XCTAssertEqual(huge.status, 413)
        XCTAssertNil(huge.headers["set-cookie"])
        // A header block beyond the server's limit, an absurd path, a token-shaped flood.
        let header = try? await HTTP.get(port: console.port, path: "/metrics", headers: ["X-Flood": String(repeating: "x", count: 200_000)])
        XCTAssertNotEqual(header?.status, 200, "an oversized header block is not served")
        let path = try await HTTP.get(port: console.port, path: "/api/streams/" + String(repeating: "9", count: 10_000), headers: ["Authorization": "Bearer \(Self.token)"])
        XCTAssertEqual(path.status, 400)
        let longToken = try await HTTP.get(port: console.port, path: "/api/streams", headers: ["Authorization": "Bearer " + String(repeating: "t", count: 50_000)])
        XCTAssertEqual(longToken.status, 401)
        // A second Host (the client sends 127.0.0.1:PORT first): which one would a proxy have used?
        let twoHosts = try await HTTP.get(port: console.port, path: "/api/streams", headers: ["Host": "attacker.example", "Authorization": "Bearer \(Self.token)"])
        XCTAssertEqual(twoHosts.status, 400)
        XCTAssertEqual(twoHosts.body, "capture-recv: the request has more than one Host header\n")
        // And the server still answers.
        let after = try await HTTP.get(port: console.port, path: "/api/streams", headers: ["Authorization": "Bearer \(Self.token)"])
        XCTAssertEqual(after.status, 200)
    }

    func testAnIdleConnectionIsClosed() async throws {
        let console = try await RunningConsole(idleTimeout: .seconds(1))
        addTeardownBlock { await console.stop() }
        let started = Date()
        // Connect and send nothing: the server closes the connection (recv returns 0).
        let received = try await HTTP.stream(port: console.port, path: "", seconds: 8, sendNothing: true)
        XCTAssertEqual(received, "")
        XCTAssertLessThan(Date().timeIntervalSince(started), 7.5, "closed by the server, not by the test's own deadline")
    }

    func testTheOpenAPIDocumentNamesEveryRouteAndField() async throws {
        let console = try await RunningConsole()
        addTeardownBlock { await console.stop() }
        let document = try await HTTP.get(port: console.port, path: "/api/openapi.yaml")
        XCTAssertEqual(document.status, 200)
        for path in ["/api/streams:", "/api/streams/{id}:", "/api/streams/{id}/listen:", "/api/streams/{id}/timeline:", "/api/events:", "/metrics:"] {
            XCTAssertTrue(document.body.contains("  \(path)\n"), path)
        }
        let directory = StreamDirectory(settings: .init(resumeWindow: .seconds(60)))
        _ = directory.streamOpened(StreamOpening(
            id: Self.stream, name: "a", peer: "p", format: .linearPCM(sampleRate: 48_000, channels: 1, sample: .s16),
            started: Date(), startSampleTime: 0, file: "a.caf", resumed: false, durableSampleTime: 0))
        let row = try XCTUnwrap(JSONSerialization.jsonObject(with: try StreamEvent.encoder.encode(directory.snapshot())) as? [[String: Any]]).first ?? [:]
        for key in row.keys {
            XCTAssertTrue(document.body.contains("\n        \(key):"), "the document describes \(key)")
        }
    }
}
