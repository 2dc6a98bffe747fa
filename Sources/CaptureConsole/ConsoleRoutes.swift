import CaptureMetrics
import CaptureReceiver
import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

/// The HTTP server's routes (docs/HTTP-API.md): what each answers, from the receiver's metrics, its
/// stream directory and its live listening.
struct ConsoleRoutes: Sendable {
    let metrics: ReceiverMetrics?
    let directory: StreamDirectory?
    let listening: (any LiveListening)?
    let access: ConsoleAccess
    let secure: Bool

    func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("/metrics") { _, _ in
            guard let metrics else { return Self.notFound("no metrics here") }
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            // The live streams' levels are read now, from the directory the console already keeps.
            let levels = directory.map { ReceiverMetrics.StreamLevelReading.live(in: $0.snapshot()) } ?? []
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: metrics.exposition(streamLevels: levels))))
        }
        router.get("/api/streams") { _, _ in
            try Self.json(directory?.snapshot() ?? [])
        }
        router.get("/api/streams/{id}") { _, context in
            guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
                return Self.error(.badRequest, "a stream id is a UUID, e.g. /api/streams/6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b")
            }
            guard let row = directory?.snapshot(of: id) else { return Self.notFound("no stream \(id.uuidString.lowercased()) on this receiver") }
            return try Self.json(row)
        }
        router.get("/api/streams/{id}/timeline") { _, context in
            guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
                return Self.error(.badRequest, "a stream id is a UUID, e.g. /api/streams/6f1c2a9e-4b3d-4e5f-8a7b-9c0d1e2f3a4b/timeline")
            }
            guard let timeline = directory?.timeline(of: id) else { return Self.notFound("no stream \(id.uuidString.lowercased()) on this receiver") }
            return try Self.json(timeline)
        }
        router.get("/api/events") { _, _ in
            guard let directory else { return Self.notFound("no stream directory here") }
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream; charset=utf-8"
            headers[.cacheControl] = "no-cache"
            return Response(status: .ok, headers: headers, body: ResponseBody(asyncSequence: ServerSentEvents.chunks(from: directory.events()).cancelOnGracefulShutdown()))
        }
        router.get("/api/streams/{id}/listen") { _, context in
            guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else {
                return Self.error(.badRequest, "a stream id is a UUID")
            }
            guard let audio = listening?.listen(to: id) else {
                return Self.notFound("stream \(id.uuidString.lowercased()) is not live on this receiver")
            }
            var headers = HTTPFields()
            headers[.contentType] = "audio/ogg"
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers, body: ResponseBody(asyncSequence: audio.cancelOnGracefulShutdown()))
        }
        router.get("/api/openapi.yaml") { _, _ in
            Self.text(OpenAPIDocument.yaml, type: "application/yaml; charset=utf-8")
        }
        router.get("/") { _, _ in Self.page(ConsolePage.html) }
        router.get("/console.css") { _, _ in Self.text(ConsolePage.css, type: "text/css; charset=utf-8") }
        router.get("/console.js") { _, _ in Self.text(ConsolePage.script, type: "text/javascript; charset=utf-8") }
        router.get("/login") { _, _ in Self.page(ConsolePage.login(message: nil)) }
        router.post("/login") { request, _ in
            let body = try await request.body.collect(upTo: 8_192)
            let token = Self.formValue("token", in: String(buffer: body)) ?? ""
            guard let tokens = access.tokens else { return Self.redirect(to: "/") }
            guard tokens.accepts(token) else {
                return Self.page(ConsolePage.login(message: "That is not one of this receiver's tokens."), status: .unauthorized)
            }
            var response = Self.redirect(to: "/")
            let secureFlag = secure ? "; Secure" : ""
            response.headers[.setCookie] = "\(ConsoleAccess.cookieName)=\(ConsoleAccess.sessionValue(for: token)); Path=/; HttpOnly; SameSite=Strict\(secureFlag)"
            return response
        }
    }

    // MARK: - Responses

    static func json(_ value: some Encodable) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(data: try StreamEvent.encoder.encode(value))))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        let body = (try? JSONEncoder().encode(["error": message])) ?? Data()
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(data: body)))
    }

    static func notFound(_ message: String) -> Response { error(.notFound, message) }

    static func text(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func page(_ html: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        // Nothing from elsewhere: scripts and styles from this server only.
        headers[.contentSecurityPolicy] = "default-src 'self'; media-src 'self'; img-src 'self' data:"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(to location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }

    /// A field of an `application/x-www-form-urlencoded` body.
    static func formValue(_ name: String, in body: String) -> String? {
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.first == name else { continue }
            let raw = parts.count > 1 ? parts[1] : ""
            return raw.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        return nil
    }
}
