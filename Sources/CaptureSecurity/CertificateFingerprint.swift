import Crypto
import Foundation

/// The SHA-256 fingerprint of a certificate's DER encoding, as `--pin` takes it and
/// `capture-recv gen-cert` prints it.
public struct CertificateFingerprint: Equatable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes.
    public let bytes: [UInt8]

    /// The fingerprint of a certificate given as DER bytes.
    public init(der: [UInt8]) {
        bytes = Array(SHA256.hash(data: der))
    }

    /// Parses a fingerprint as a user writes it: 64 hexadecimal digits, upper or lower case,
    /// optionally in pairs separated by colons (`AB:CD:...`), optionally prefixed `sha256:`.
    public init(parsing text: String) throws(SecurityError) {
        var digits = text.trimmingCharacters(in: .whitespaces).lowercased()
        if digits.hasPrefix("sha256:") { digits.removeFirst("sha256:".count) }
        if digits.contains(":") {
            let pairs = digits.split(separator: ":", omittingEmptySubsequences: false)
            guard pairs.count == 32, pairs.allSatisfy({ $0.count == 2 }) else { throw .badPin(text) }
            digits = pairs.joined()
        }
        guard digits.count == 64 else { throw .badPin(text) }
        var parsed: [UInt8] = []
        parsed.reserveCapacity(32)
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { throw .badPin(text) }
            parsed.append(byte)
            index = next
        }
        bytes = parsed
    }

    /// Lower-case hexadecimal, 64 digits, no separators: the form to pass to `--pin`.
    public var hex: String {
        bytes.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    /// Whether `der` is exactly the pinned certificate; compares in constant time.
    public func matches(der: [UInt8]) -> Bool {
        ConstantTime.equals(CertificateFingerprint(der: der).bytes, bytes)
    }

    public var description: String { hex }
}
