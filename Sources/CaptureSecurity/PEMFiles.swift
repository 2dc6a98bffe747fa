import CaptureErrorText
import Foundation
import NIOSSL
import X509

/// Reads certificates and keys from PEM files with errors that name the file.
public enum PEMFiles {
    /// The certificates in a PEM file (a chain: leaf first), for NIOSSL.
    public static func certificates(at path: String) throws(SecurityError) -> [NIOSSLCertificate] {
        let bytes = try read(path)
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(bytes), !certificates.isEmpty else {
            throw .noCertificate(path: path)
        }
        return certificates
    }

    /// The certificates in a PEM file, parsed for verification with swift-certificates.
    public static func x509Certificates(at path: String) throws(SecurityError) -> [Certificate] {
        var parsed: [Certificate] = []
        for certificate in try certificates(at: path) {
            guard let der = try? certificate.toDERBytes(), let x509 = try? Certificate(derEncoded: der) else {
                throw .noCertificate(path: path)
            }
            parsed.append(x509)
        }
        return parsed
    }

    /// The certificate authorities in a PEM file, for `--ca` and `--client-ca`. A self-signed
    /// certificate that is not a CA (a receiver's own, from `capture-recv gen-cert`) is refused with
    /// the fingerprint to pin instead.
    public static func certificateAuthorities(at path: String) throws(SecurityError) -> [Certificate] {
        let certificates = try x509Certificates(at: path)
        for certificate in certificates where certificate.issuer == certificate.subject {
            let constraints = try? certificate.extensions.basicConstraints
            if case .isCertificateAuthority? = constraints { continue }
            guard let der = try? certificate.serializeAsPEM().derBytes else { continue }
            throw .notAnAuthority(path: path, fingerprint: CertificateFingerprint(der: der).hex)
        }
        return certificates
    }

    /// The private key in a PEM file.
    public static func privateKey(at path: String) throws(SecurityError) -> NIOSSLPrivateKey {
        let bytes = try read(path)
        do {
            return try NIOSSLPrivateKey(bytes: bytes, format: .pem)
        } catch {
            throw .badPrivateKey(path: path, reason: "\(error)")
        }
    }

    private static func read(_ path: String) throws(SecurityError) -> [UInt8] {
        do {
            return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw .unreadableFile(path: path, reason: SystemErrorText.describe(error))
        }
    }
}
