import Foundation

/// Short, readable reasons from BoringSSL's error descriptions, which are long lines with file
/// paths: "…OPENSSL_internal:SSLV3_ALERT_CERTIFICATE_UNKNOWN at …/tls_record.cc:491" becomes
/// "certificate unknown alert".
public enum TLSErrorText {
    /// The BoringSSL reason codes in `error`'s description, readable, joined; the description itself when it has none.
    public static func reason(of error: Error) -> String {
        let text = "\(error)"
        var reasons: [String] = []
        var rest = Substring(text)
        while let range = rest.range(of: "OPENSSL_internal:") {
            let code = rest[range.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
            rest = rest[range.upperBound...]
            var words = String(code)
            var isAlert = false
            for prefix in ["SSLV3_ALERT_", "TLSV1_ALERT_", "TLSV1_"] where words.hasPrefix(prefix) {
                words.removeFirst(prefix.count)
                isAlert = prefix.contains("ALERT")
                break
            }
            let readable = words.lowercased().replacingOccurrences(of: "_", with: " ") + (isAlert ? " alert" : "")
            if !readable.isEmpty, !reasons.contains(readable) { reasons.append(readable) }
        }
        if !reasons.isEmpty { return reasons.joined(separator: ", ") }
        return plainReason(text)
    }

    /// BoringSSL errors without a reason code, and SwiftNIO's TLS errors, in words:
    /// `handshakeFailed(NIOSSL.BoringSSLError.sslError([Error:  EOF during handshake]))` becomes
    /// "the connection was closed during the TLS handshake".
    private static func plainReason(_ text: String) -> String {
        if text.contains("EOF during handshake") || text.contains("eofDuringHandshake") {
            return "the connection was closed during the TLS handshake"
        }
        if text.contains("uncleanShutdown") {
            return "the connection was closed without ending TLS properly"
        }
        if text.contains("zeroReturn") {
            return "the other side ended TLS"
        }
        // "[Error: SOMETHING]": keep what BoringSSL said, without the Swift type names around it.
        if let open = text.range(of: "[Error:"), let close = text[open.upperBound...].firstIndex(of: "]") {
            let said = text[open.upperBound..<close].trimmingCharacters(in: .whitespaces)
            if !said.isEmpty { return "TLS error: \(said.lowercased())" }
        }
        if text.contains("NIOSSL") || text.contains("BoringSSL") {
            return "TLS error"
        }
        return text
    }
}
