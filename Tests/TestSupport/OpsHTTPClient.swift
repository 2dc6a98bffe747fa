import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain HTTP/1.1 response as read off a socket.
public struct OpsHTTPResponse: Sendable {
    /// The status code (200, 404…).
    public var status: Int
    /// Header names lowercased, with their values.
    public var headers: [String: String]
    /// The body as text.
    public var body: String

    /// The body's lines.
    public var lines: [String] { body.split(separator: "\n").map(String.init) }
}

/// Why a test HTTP request failed.
public struct OpsHTTPError: Error, CustomStringConvertible {
    public let description: String
}

/// A minimal HTTP client over a raw loopback socket (URLSession needs FoundationNetworking on Linux):
/// sends one request with `Connection: close` and reads the response to the end.
public enum OpsHTTPClient {
    public static func request(
        method: String = "GET", host: String = "127.0.0.1", port: Int, path: String, headers: [String: String] = [:], body: String? = nil,
        timeoutSeconds: Int = 10
    ) throws -> OpsHTTPResponse {
        let received = try exchange(method: method, host: host, port: port, path: path, headers: headers, body: body, timeoutSeconds: timeoutSeconds, readFor: nil)
        return try parse(received)
    }

    /// What a streaming response (Server-Sent Events, live audio) sends within `seconds`: the raw
    /// bytes after the request, headers included.
    /// With `sendNothing` it connects and sends no request at all (an idle client).
    public static func stream(
        host: String = "127.0.0.1", port: Int, path: String, headers: [String: String] = [:], seconds: Double, sendNothing: Bool = false
    ) throws -> [UInt8] {
        try exchange(method: "GET", host: host, port: port, path: path, headers: headers, body: nil, timeoutSeconds: 10, readFor: seconds, sendNothing: sendNothing)
    }

    private static func exchange(
        method: String, host: String, port: Int, path: String, headers: [String: String], body: String?, timeoutSeconds: Int, readFor: Double?,
        sendNothing: Bool = false
    ) throws -> [UInt8] {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw OpsHTTPError(description: "socket failed: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw OpsHTTPError(description: "connect to \(host):\(port) failed: errno \(errno)") }
        var timeout = readFor.map { _ in timeval(tv_sec: 0, tv_usec: 100_000) } ?? timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.utf8.count)\r\n" }
        let request = sendNothing ? [] : Array((head + "\r\n" + (body ?? "")).utf8)
        var sent = 0
        while sent < request.count {
            let result = request[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard result > 0 else { throw OpsHTTPError(description: "send failed: errno \(errno)") }
            sent += result
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let deadline = readFor.map { Date().addingTimeInterval($0) }
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if let deadline {
                if count == 0 || Date() >= deadline { break }
                if count < 0 { continue }
            } else {
                if count < 0 { throw OpsHTTPError(description: "no complete response within \(timeoutSeconds) s") }
                if count == 0 { break }
            }
            received += chunk[0..<count]
        }
        return received
    }

    static func parse(_ bytes: [UInt8]) throws -> OpsHTTPResponse {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw OpsHTTPError(description: "no header end in: \(text)") }
        let headerLines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusParts = headerLines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw OpsHTTPError(description: "bad status line in: \(text)") }
        var headers: [String: String] = [:]
        for line in headerLines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return OpsHTTPResponse(status: status, headers: headers, body: String(text[split.upperBound...]))
    }
}
