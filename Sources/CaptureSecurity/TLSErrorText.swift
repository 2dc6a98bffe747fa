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
        return reasons.isEmpty ? text : reasons.joined(separator: ", ")
    }
}
