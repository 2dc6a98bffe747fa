#if canImport(Glibc)
import Glibc
#endif
import CaptureCore
import CaptureExport
import CaptureReceiver
import Foundation
import Hummingbird
import NIOCore
import NIOPosix
import Synchronization

/// The recordings view's API (docs/HTTP-API.md, "Recordings"): the output folder's finished
/// recordings (`GET /api/recordings`), each file with byte ranges (`/api/recordings/file/PATH`),
/// and its export streamed (`/api/recordings/export/PATH?format=`). Behind the same access as
/// every route (`AccessMiddleware` covers the router). Nothing here touches the disk on an event
/// loop: listings and path checks run on NIO's thread pool, file bodies are read by Hummingbird's
/// `FileIO` (the same pool), and an export runs on a thread of its own.
struct RecordingRoutes: Sendable {
    /// The output folder's recordings; nil when the receiver has none to show.
    let catalogue: RecordingCatalogue?
    /// Exports running at once (each decodes or copies a whole recording on a thread).
    let exports: ExportSlots
    /// How refused exports name a setting.
    let settingNames: any SettingNaming

    static let filePrefix = "/api/recordings/file/"
    static let exportPrefix = "/api/recordings/export/"

    init(catalogue: RecordingCatalogue?, simultaneousExports: Int = 2, settingNames: any SettingNaming = LibrarySettingNames()) {
        self.catalogue = catalogue
        self.settingNames = settingNames
        exports = ExportSlots(limit: simultaneousExports)
    }

    func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("/api/recordings") { request, _ in
            guard let catalogue else { return ConsoleRoutes.notFound("no recordings here") }
            let query: RecordingQuery
            do throws(RecordingQueryError) {
                query = try RecordingQuery(stream: Self.parameter("stream", of: request), day: Self.parameter("day", of: request))
            } catch {
                return ConsoleRoutes.error(.badRequest, error.description)
            }
            let listings = try await NIOThreadPool.singleton.runIfActive { catalogue.recordings(matching: query) }
            return try ConsoleRoutes.json(listings)
        }
        router.get("/api/recordings/file/**") { request, context in
            let file: FinishedRecordingFile
            switch await resolve(request.uri.path, prefix: Self.filePrefix) {
            case .success(let found): file = found
            case .failure(let refusal): return refusal.response
            }
            return try await Self.serve(file, request: request, context: context)
        }
        // The same answer without its body (download managers and `curl -I` ask first).
        router.head("/api/recordings/file/**") { request, context in
            let file: FinishedRecordingFile
            switch await resolve(request.uri.path, prefix: Self.filePrefix) {
            case .success(let found): file = found
            case .failure(let refusal): return refusal.response
            }
            return try await Self.serve(file, request: request, context: context, headOnly: true)
        }
        router.get("/api/recordings/export/**") { request, context in
            let formats = ExportFormat.allCases.map(\.rawValue).joined(separator: ", ")
            guard let name = Self.parameter("format", of: request) else {
                return ConsoleRoutes.error(.badRequest, "say which export with ?format=FORMAT, one of \(formats)")
            }
            guard let format = ExportFormat(rawValue: name) else {
                return ConsoleRoutes.error(.badRequest, "no export format \(name.debugDescription): use one of \(formats)")
            }
            let file: FinishedRecordingFile
            switch await resolve(request.uri.path, prefix: Self.exportPrefix) {
            case .success(let found): file = found
            case .failure(let refusal): return refusal.response
            }
            return try await export(file, as: format, context: context)
        }
    }

    // MARK: - Paths

    /// Why a path is not served, as a response.
    struct Refusal: Error {
        var response: Response
    }

    /// The finished recording a request's path names after `prefix` (percent-decoded), or the
    /// response that refuses it.
    private func resolve(_ requestPath: String, prefix: String) async -> Result<FinishedRecordingFile, Refusal> {
        guard let catalogue else { return .failure(Refusal(response: ConsoleRoutes.notFound("no recordings here"))) }
        guard requestPath.hasPrefix(prefix), let relative = String(requestPath.dropFirst(prefix.count)).removingPercentEncoding else {
            return .failure(Refusal(response: ConsoleRoutes.error(.badRequest, "the path is not percent-encoded UTF-8")))
        }
        do {
            let outcome = try await NIOThreadPool.singleton.runIfActive { () -> Result<FinishedRecordingFile, RecordingPathError> in
                do throws(RecordingPathError) {
                    return .success(try catalogue.resolve(relativePath: relative))
                } catch {
                    return .failure(error)
                }
            }
            switch outcome {
            case .success(let file): return .success(file)
            case .failure(let error):
                let status: HTTPResponse.Status
                switch error {
                case .invalid: status = .badRequest
                case .notFound: status = .notFound
                case .inProgress: status = .conflict
                }
                return .failure(Refusal(response: ConsoleRoutes.error(status, error.description)))
            }
        } catch {
            return .failure(Refusal(response: ConsoleRoutes.error(.serviceUnavailable, "the receiver is stopping")))
        }
    }

    // MARK: - Downloads

    /// The file, whole or the part its `Range` asks for, streamed from the disk.
    private static func serve(_ file: FinishedRecordingFile, request: Request, context: some RequestContext, headOnly: Bool = false) async throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "audio/x-caf"
        headers[.acceptRanges] = "bytes"
        headers[.contentDisposition] = contentDisposition(file.name)
        headers[.eTag] = file.entityTag
        headers[.lastModified] = Self.httpDate(file.modified)
        headers[.cacheControl] = "no-cache"
        var range = ByteRange.resolve(header: request.headers[.range], size: file.size)
        // A range of another version of the file is no range of this one (RFC 9110 §13.1.5).
        if let condition = request.headers[.ifRange], condition != file.entityTag, condition != headers[.lastModified] { range = .whole }
        let io = FileIO(threadPool: .singleton)
        if headOnly {
            switch range {
            case .whole: headers[.contentLength] = "\(file.size)"
            case .partial(let bytes):
                headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(file.size)"
                headers[.contentLength] = "\(bytes.count)"
                return Response(status: .partialContent, headers: headers)
            case .unsatisfiable:
                headers[.contentRange] = "bytes */\(file.size)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
            return Response(status: .ok, headers: headers)
        }
        switch range {
        case .whole:
            headers[.contentLength] = "\(file.size)"
            return Response(status: .ok, headers: headers, body: try await io.loadFile(path: file.path, context: context))
        case .partial(let bytes):
            headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(file.size)"
            headers[.contentLength] = "\(bytes.count)"
            let body = try await io.loadFile(path: file.path, range: Int(bytes.lowerBound)...Int(bytes.upperBound), context: context)
            return Response(status: .partialContent, headers: headers, body: body)
        case .unsatisfiable:
            var refusal = ConsoleRoutes.error(.rangeNotSatisfiable, "the range \(request.headers[.range] ?? "") lies outside the file's \(file.size) bytes")
            refusal.headers[.contentRange] = "bytes */\(file.size)"
            refusal.headers[.acceptRanges] = "bytes"
            return refusal
        }
    }

    /// `attachment` with the file's name: plain when it is printable ASCII, with its UTF-8 form
    /// (RFC 6266, RFC 8187) otherwise.
    static func contentDisposition(_ name: String) -> String {
        let plain = String(name.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" && $0.value != 0x7F ? Character($0) : "_" })
        var value = "attachment; filename=\"\(plain)\""
        if plain != name {
            let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$&+-.^_`|~")
            value += "; filename*=UTF-8''" + (name.addingPercentEncoding(withAllowedCharacters: allowed) ?? plain)
        }
        return value
    }

    // MARK: - Exports

    /// The export of `file` as `format`, written to a folder of its own under the system's
    /// temporary folder (never beside the recording, never in the output folder), streamed, and
    /// removed once sent, or when sending fails or never starts.
    private func export(_ file: FinishedRecordingFile, as format: ExportFormat, context: some RequestContext) async throws -> Response {
        guard exports.take() else {
            var busy = ConsoleRoutes.error(.serviceUnavailable, "\(exports.limit) exports are running; try again when one has finished")
            busy.headers[.retryAfter] = "5"
            return busy
        }
        let outcome: Result<(TemporaryExport, String, Int64?), ExportRefusal>
        defer { exports.give() }
        // On a thread of its own: an export can take minutes, and must hold neither an event loop
        // nor one of the few threads of NIO's pool that serve file reads.
        let settingNames = self.settingNames
        outcome = await BlockingWork.run("export") { () -> Result<(TemporaryExport, String, Int64?), ExportRefusal> in
            let folder: TemporaryExport
            do {
                folder = try TemporaryExport.make()
            } catch {
                return .failure(ExportRefusal(status: .internalServerError, message: "cannot make a temporary folder for the export: \(error)"))
            }
            do throws(ExportError) {
                let written = try RecordingExporter.export(cafPath: file.path, as: format, outputDirectory: folder.path)
                let size = (try? FileManager.default.attributesOfItem(atPath: written)[.size] as? NSNumber)?.int64Value
                return .success((folder, written, size))
            } catch {
                folder.remove()
                switch error {
                case .unreadable, .unsupported, .oggNeedsOpus: return .failure(ExportRefusal(status: .unprocessableContent, message: error.message(naming: settingNames)))
                case .exists, .writeFailed: return .failure(ExportRefusal(status: .internalServerError, message: error.message(naming: settingNames)))
                }
            }
        }
        let folder: TemporaryExport
        let written: String
        let size: Int64?
        switch outcome {
        case .success(let done): (folder, written, size) = done
        case .failure(let refusal): return ConsoleRoutes.error(refusal.status, refusal.message)
        }
        let inner: ResponseBody
        do {
            inner = try await FileIO(threadPool: .singleton).loadFile(path: written, context: context)
        } catch {
            await Self.discard(folder)
            throw error
        }
        let body = ResponseBody(contentLength: inner.contentLength) { writer in
            // Removed once sent or failed; `folder`'s deinit removes it if the body is never sent.
            do {
                try await inner.write(writer)
            } catch {
                await Self.discard(folder)
                throw error
            }
            await Self.discard(folder)
        }
        var headers = HTTPFields()
        headers[.contentType] = Self.contentType(format)
        headers[.contentDisposition] = Self.contentDisposition((written as NSString).lastPathComponent)
        headers[.cacheControl] = "no-store"
        if let size { headers[.contentLength] = "\(size)" }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// Removes a temporary export on NIO's thread pool (or, once the pool has stopped, when the
    /// last reference to it goes).
    private static func discard(_ folder: TemporaryExport) async {
        _ = try? await NIOThreadPool.singleton.runIfActive { folder.remove() }
    }

    static func contentType(_ format: ExportFormat) -> String {
        switch format {
        case .wav, .rf64: return "audio/wav"
        case .flac: return "audio/flac"
        case .ogg: return "audio/ogg; codecs=opus"
        }
    }

    struct ExportRefusal: Error {
        var status: HTTPResponse.Status
        var message: String
    }

    /// `date` as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7).
    static func httpDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "Thu, 01 Jan 1970 00:00:00 GMT" }
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let time = String(format: "%02d %04d %02d:%02d:%02d", Int(parts.tm_mday), Int(parts.tm_year) + 1900, Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        let fields = time.split(separator: " ")
        return "\(days[Int(parts.tm_wday) % 7]), \(fields[0]) \(months[Int(parts.tm_mon) % 12]) \(fields[1]) \(fields[2]) GMT"
    }

    /// A query parameter, decoded as a form field (`+` is a space, as `URLSearchParams` writes it;
    /// `%2B` a plus); nil when absent or empty.
    static func parameter(_ name: String, of request: Request) -> String? {
        guard let value = ConsoleRoutes.formValue(name, in: request.uri.query ?? ""), !value.isEmpty else { return nil }
        return value
    }
}

/// How many exports may run at once.
final class ExportSlots: Sendable {
    let limit: Int
    private let running = Mutex(0)

    init(limit: Int) { self.limit = max(1, limit) }

    /// Takes a slot; false when all are taken.
    func take() -> Bool {
        running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func give() { running.withLock { $0 -= 1 } }
}

/// A temporary folder holding one export, removed once (by `remove()`, or when the last reference
/// goes).
final class TemporaryExport: Sendable {
    let path: String
    private let removed = Atomic<Bool>(false)

    private init(path: String) { self.path = path }

    /// A new folder `capture-export-XXXXXX` in the system's temporary folder (`TMPDIR`).
    static func make() throws(TemporaryExportError) -> TemporaryExport {
        let template = (NSTemporaryDirectory() as NSString).appendingPathComponent("capture-export-XXXXXX")
        var bytes = Array(template.utf8CString)
        let made = bytes.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return mkdtemp(base) != nil
        }
        guard made else { throw TemporaryExportError(path: template, code: errno) }
        return TemporaryExport(path: String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Removes the folder and the export in it (once).
    func remove() {
        guard !removed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    deinit { remove() }
}

/// A temporary folder that could not be made.
struct TemporaryExportError: Error, CustomStringConvertible {
    var path: String
    var code: Int32
    var description: String { "cannot create \(path): \(String(cString: strerror(code)))" }
}

/// What a request's `Range` header asks of a file of a known size (RFC 9110 §14): one range of
/// bytes, the whole file, or nothing it has. Pure; tested by table.
enum ByteRange: Equatable, Sendable {
    /// No `Range`, or one this server ignores and answers with the whole file: another unit, several
    /// ranges, or a header that does not parse (RFC 9110 allows ignoring them).
    case whole
    /// The inclusive byte range to send (206).
    case partial(ClosedRange<Int64>)
    /// A range the file has no byte of (416, `Content-Range: bytes */SIZE`).
    case unsatisfiable

    /// `bytes=a-b`, `bytes=a-` and `bytes=-n` (the last n bytes) of a file of `size` bytes.
    static func resolve(header: String?, size: Int64) -> ByteRange {
        guard let header else { return .whole }
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard let equals = trimmed.firstIndex(of: "="),
              trimmed[..<equals].trimmingCharacters(in: .whitespaces).lowercased() == "bytes"
        else { return .whole }
        let spec = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        guard first.allSatisfy(\.isASCIIDigit), last.allSatisfy(\.isASCIIDigit), !(first.isEmpty && last.isEmpty) else { return .whole }
        if first.isEmpty {
            // The last n bytes; more than the file has is the whole file.
            let count = saturated(last)
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - count)...(size - 1))
        }
        let start = saturated(first)
        if last.isEmpty {
            return start < size ? .partial(start...(size - 1)) : .unsatisfiable
        }
        let end = saturated(last)
        guard start <= end else { return .whole }
        return start < size ? .partial(start...min(end, size - 1)) : .unsatisfiable
    }

    /// Decimal digits as an Int64, `Int64.max` when they are more.
    private static func saturated(_ digits: String) -> Int64 {
        Int64(digits) ?? Int64.max
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
