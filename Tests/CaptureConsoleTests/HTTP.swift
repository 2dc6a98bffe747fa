import Foundation
import TestSupport

/// The blocking test HTTP client, run off the cooperative thread pool (the server's handlers need it).
enum HTTP {
    static func get(
        method: String = "GET", port: Int, path: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> OpsHTTPResponse {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try OpsHTTPClient.request(method: method, port: port, path: path, headers: headers, body: body) })
            }
        }
    }

    /// The text a streaming response sends within `seconds`.
    static func stream(port: Int, path: String, headers: [String: String] = [:], seconds: Double, sendNothing: Bool = false) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result {
                    String(decoding: try OpsHTTPClient.stream(port: port, path: path, headers: headers, seconds: seconds, sendNothing: sendNothing), as: UTF8.self)
                })
            }
        }
    }
}
