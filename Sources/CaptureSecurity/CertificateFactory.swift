import CaptureErrorText
import Crypto
import Foundation
import X509

/// A certificate and its private key in PEM, as `capture-recv gen-cert` writes them.
public struct IssuedCertificate: Sendable {
    /// The certificate, PEM (`-----BEGIN CERTIFICATE-----`).
    public let certificatePEM: String
    /// The private key, PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    public let privateKeyPEM: String
    /// The SHA-256 fingerprint of the certificate, for `--pin`.
    public let fingerprint: CertificateFingerprint
    /// The certificate itself, to sign others with when it is a CA.
    let certificate: Certificate
    let privateKey: Certificate.PrivateKey
}

/// Makes ECDSA P-256 keys and X.509 certificates: the self-signed receiver certificate of
/// `capture-recv gen-cert`, and (for tests and small deployments) a CA and certificates it signs.
public enum CertificateFactory {
    /// What a certificate is for.
    public enum Role: Sendable {
        /// A certificate authority that signs other certificates.
        case authority
        /// A receiver (TLS server) or sender (TLS client) certificate.
        case endpoint
    }

    /// The validity gen-cert gives a certificate: 825 days, the longest that common TLS clients accept.
    public static let defaultValidityDays = 825

    /// Makes a new key and a certificate for it.
    /// - Parameters:
    ///   - commonName: the subject's common name.
    ///   - hosts: DNS names and IP addresses for the subject alternative names.
    ///   - role: a CA or an endpoint certificate.
    ///   - notBefore: start of validity (a little in the past by default, for clock skew).
    ///   - notAfter: end of validity.
    ///   - issuer: the CA that signs it; nil for a self-signed certificate.
    public static func make(
        commonName: String, hosts: [String], role: Role = .endpoint,
        notBefore: Date = Date().addingTimeInterval(-3600),
        notAfter: Date = Date().addingTimeInterval(Double(defaultValidityDays) * 86_400),
        issuer: IssuedCertificate? = nil
    ) throws(SecurityError) -> IssuedCertificate {
        do {
            let signingKey = P256.Signing.PrivateKey()
            let key = Certificate.PrivateKey(signingKey)
            let subject = try DistinguishedName { CommonName(commonName) }
            let names = try hosts.map { host throws(SecurityError) in try subjectAlternativeName(for: host) }
            let extensions = try Certificate.Extensions {
                switch role {
                case .authority:
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                    Critical(KeyUsage(digitalSignature: true, keyCertSign: true, cRLSign: true))
                case .endpoint:
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([.serverAuth, .clientAuth])
                }
                if !names.isEmpty { SubjectAlternativeNames(names) }
            }
            let certificate = try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: key.publicKey,
                notValidBefore: notBefore, notValidAfter: notAfter,
                issuer: issuer?.certificate.subject ?? subject, subject: subject,
                signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
                issuerPrivateKey: issuer?.privateKey ?? key
            )
            let pem = try certificate.serializeAsPEM()
            return IssuedCertificate(
                certificatePEM: pem.pemString, privateKeyPEM: signingKey.pemRepresentation,
                fingerprint: CertificateFingerprint(der: pem.derBytes), certificate: certificate, privateKey: key
            )
        } catch let error as SecurityError {
            throw error
        } catch {
            throw .certificateGeneration("\(error)")
        }
    }

    /// A DNS or IP subject alternative name for `host`.
    static func subjectAlternativeName(for host: String) throws(SecurityError) -> GeneralName {
        if let address = IPAddressBytes(host) {
            // [7] IMPLICIT OCTET STRING: the context-specific primitive tag 7, then the address bytes.
            do {
                return try GeneralName(derEncoded: [0x87, UInt8(address.bytes.count)] + address.bytes)
            } catch {
                throw .badHostName(host)
            }
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        let valid = !host.isEmpty && host.utf8.count <= 253 && labels.allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "*") }
        }
        guard valid else { throw .badHostName(host) }
        return .dnsName(host)
    }

    /// Writes `cert.pem` and `key.pem` (mode 0600) into `directory`, creating it; refuses to replace
    /// existing files unless `overwrite`.
    public static func write(_ issued: IssuedCertificate, to directory: String, overwrite: Bool) throws(SecurityError) -> (certificate: String, key: String) {
        let certificatePath = (directory as NSString).appendingPathComponent("cert.pem")
        let keyPath = (directory as NSString).appendingPathComponent("key.pem")
        let manager = FileManager.default
        if !overwrite, manager.fileExists(atPath: certificatePath) || manager.fileExists(atPath: keyPath) {
            throw .certificateFilesExist(directory: directory)
        }
        do {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try? manager.removeItem(atPath: keyPath)
            guard manager.createFile(atPath: keyPath, contents: Data(issued.privateKeyPEM.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw SecurityError.certificateGeneration("cannot write \(keyPath); check that the folder is writable")
            }
            try Data(issued.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath))
        } catch let error as SecurityError {
            throw error
        } catch {
            throw .certificateGeneration("cannot write into \(directory): \(SystemErrorText.describe(error))")
        }
        return (certificatePath, keyPath)
    }
}

/// The network-order bytes of an IPv4 or IPv6 address written as text.
struct IPAddressBytes {
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }
}
