import CaptureCore
import CaptureErrorText
import CaptureMetrics
import CaptureReceiver
import CaptureSecurity
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization

/// What the receiver's HTTP server serves and how (`capture-recv --http HOST:PORT`).
public struct ConsoleSettings: Sendable {
    /// The address to listen on (port 0 picks a free one).
    public var host: String
    public var port: Int
    /// Who may use it.
    public var access: ConsoleAccess
    /// Serve HTTPS with this certificate chain and key (the receiver's own, with `--tls-cert`).
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// A connection that sends no request for this long is closed (bounded resources per client).
    public var idleTimeout: Duration
    /// How refusals and errors name a setting to change: the library's words unless the program
    /// has its own (capture-recv: its flags).
    public var settingNames: any SettingNaming = LibrarySettingNames()

    public init(host: String, port: Int, access: ConsoleAccess, tlsCertificatePath: String? = nil, tlsKeyPath: String? = nil, idleTimeout: Duration = .seconds(30)) {
        self.host = host
        self.port = port
        self.access = access
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsKeyPath = tlsKeyPath
        self.idleTimeout = idleTimeout
    }
}

/// The receiver's one HTTP server, on Hummingbird: the console page at `/`, the streams API and its
/// events under `/api`, live listening, and Prometheus metrics at `/metrics`. Requests are answered
/// one at a time per connection (so pipelined requests wait in the socket, not in memory), idle
/// connections are closed, and access is as `ConsoleAccess` says. It runs as a `ConsoleService`
/// in the receiver's service group and stops with it.
public enum ConsoleServer {
    /// The server as a service. `onListening` is called with the port once it listens;
    /// `recordings` is the output folder's catalogue for the recordings view (`/api/recordings`).
    public static func make(
        settings: ConsoleSettings, metrics: ReceiverMetrics?, directory: StreamDirectory?, listening: (any LiveListening)? = nil,
        recordings: RecordingCatalogue? = nil, logger: Logger, onListening: @escaping @Sendable (Int) -> Void = { _ in }
    ) throws(ConsoleSetupError) -> ConsoleService {
        let router = Router()
        router.add(middleware: HostCheckMiddleware(hosts: settings.access.hosts, secure: settings.tlsCertificatePath != nil, settingNames: settings.settingNames))
        router.add(middleware: AccessMiddleware(access: settings.access, secure: settings.tlsCertificatePath != nil, settingNames: settings.settingNames))
        ConsoleRoutes(metrics: metrics, directory: directory, listening: listening, access: settings.access, secure: settings.tlsCertificatePath != nil)
            .register(on: router)
        RecordingRoutes(catalogue: recordings, settingNames: settings.settingNames).register(on: router)
        let http1 = HTTPServerBuilder.http1(configuration: .init(idleTimeout: .init(settings.idleTimeout)))
        let server: HTTPServerBuilder
        if let certificate = settings.tlsCertificatePath, let key = settings.tlsKeyPath {
            server = try tls(base: http1, certificate: certificate, key: key)
        } else {
            server = http1
        }
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let listening = ListeningFlag()
        let application = Application(
            router: router, server: server,
            configuration: ApplicationConfiguration(address: .hostname(settings.host, port: settings.port), serverName: "capture-recv"),
            onServerRunning: { channel in
                listening.set()
                onListening(channel.localAddress?.port ?? settings.port)
            },
            logger: quiet
        )
        return ConsoleService(application: application, host: settings.host, port: settings.port, listening: listening)
    }

    private static func tls(base: HTTPServerBuilder, certificate: String, key: String) throws(ConsoleSetupError) -> HTTPServerBuilder {
        do {
            let chain = try PEMFiles.certificates(at: certificate)
            let privateKey = try PEMFiles.privateKey(at: key)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
            configuration.minimumTLSVersion = .tlsv12
            // Hummingbird makes its TLS context when the server starts; made here first, a key that
            // does not belong to the certificate is refused by `make`, with the files named.
            _ = try NIOSSLContext(configuration: configuration)
            return try .tls(base, tlsConfiguration: configuration)
        } catch let error as SecurityError {
            throw .tls(.unusableFile(error))
        } catch {
            throw .tls(.cannotSetUp(certificatePath: certificate, privateKeyPath: key, reason: TLSErrorText.reason(of: error)))
        }
    }
}

/// Refuses, before anything else looks at it, a request for a name that is not one of the console's
/// (421 Misdirected Request: DNS rebinding), with more than one `Host` (400), or a state-changing
/// request from a page elsewhere (403), with a one-line `text/plain` body that says which option
/// allows the name (`ConsoleHostNames`).
struct HostCheckMiddleware<Context: RequestContext>: RouterMiddleware {
    let hosts: ConsoleHostNames
    let secure: Bool
    let settingNames: any SettingNaming

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The first Host is the request's authority; another one stays among the fields.
        if request.headers.contains(where: { $0.name.canonicalName == "host" }) {
            return Self.refusal(.badRequest, "capture-recv: the request has more than one Host header")
        }
        if let message = hosts.refusal(host: request.head.authority, secure: secure, settingNames: settingNames) {
            return Self.refusal(.misdirectedRequest, message)
        }
        if let message = hosts.refusal(origin: request.headers[.origin], method: request.method.rawValue, settingNames: settingNames) {
            return Self.refusal(.forbidden, message)
        }
        return try await next(request, context)
    }

    static func refusal(_ status: HTTPResponse.Status, _ message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: message + "\n")))
    }
}

/// Refuses requests `ConsoleAccess` does not allow: 401, with a login form for a browser and a
/// JSON error (and `WWW-Authenticate: Bearer`) for everything else. The login form itself is open.
struct AccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: ConsoleAccess
    let secure: Bool
    let settingNames: any SettingNaming

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The login form and its style sheet are open: they reveal nothing.
        if request.uri.path == "/login" || request.uri.path == "/console.css" { return try await next(request, context) }
        let allowed = access.allows(authorization: request.headers[.authorization], cookieHeader: request.headers[.cookie])
        guard allowed else { return Self.refusal(for: request, settingNames: settingNames) }
        return try await next(request, context)
    }

    static func refusal(for request: Request, settingNames: any SettingNaming) -> Response {
        let wantsPage = request.headers[.accept]?.contains("text/html") ?? false
        if wantsPage {
            return ConsoleRoutes.page(ConsolePage.login(message: nil), status: .unauthorized)
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.wwwAuthenticate] = #"Bearer realm="capture-recv""#
        let body = #"{"error":"this receiver's console needs a token: send Authorization: Bearer TOKEN (a token of its "#
            + settingNames.name(of: .consoleTokenFile) + #"), or log in at /login"}"#
        return Response(status: .unauthorized, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// The running HTTP server, as a service of the receiver's service group. A failure to listen (a
/// port in use, an address not on this machine) ends it with a `ConsoleSetupError` that says what to
/// do.
public struct ConsoleService: Service {
    let application: any ApplicationProtocol
    let host: String
    let port: Int
    let listening: ListeningFlag

    public func run() async throws {
        do {
            // `run()`, not `runService()`: the latter makes a service group of its own that also
            // catches SIGTERM and could end the server before the receiver's group shuts it down in
            // order (then the receiver exited 1, "a service has finished unexpectedly").
            try await application.run()
        } catch {
            guard listening.isSet else {
                throw ConsoleSetupError.cannotListen(host: host, port: port, reason: ListenErrorText.reason(error, host: host, port: port))
            }
            throw error
        }
    }
}

/// Whether the server got to listen (set once, from its start-up callback).
///
/// Sendability: whether it is set is kept in a `Mutex`.
final class ListeningFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
