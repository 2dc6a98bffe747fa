import CaptureSecurity
import NIOSSL
import Foundation

/// The receiver a spooled stream belongs to: the address as the user gave it and, with TLS, the
/// identity the receiver's certificate was verified against. A stream is only ever delivered to
/// its own destination, so audio meant for one receiver never reaches another, and a token given
/// for one receiver is never presented to another. Stored in the stream's `meta.json`; holds no
/// secret (a pin and a CA fingerprint are public).
public struct SpoolDestination: Codable, Sendable, Equatable, CustomStringConvertible {
    /// What the receiver's TLS certificate was checked against.
    public struct TLSIdentity: Codable, Sendable, Equatable {
        /// SHA-256 fingerprint (lower-case hex) of the pinned receiver certificate (`--pin`).
        public var pin: String?
        /// SHA-256 fingerprints (lower-case hex, sorted) of the CA certificates of `--ca`; nil with a
        /// pin or the system trust store.
        public var authorities: [String]?
        /// The host name the certificate must carry (CA or system trust store; nil with a pin).
        public var serverName: String?

        public init(pin: String? = nil, authorities: [String]? = nil, serverName: String? = nil) {
            self.pin = pin
            self.authorities = authorities.map { $0.sorted() }
            self.serverName = serverName
        }

        /// Verified against a pinned certificate fingerprint.
        public static func pinned(_ fingerprint: String) -> TLSIdentity { TLSIdentity(pin: fingerprint.lowercased()) }

        /// Verified against the CA certificates with these fingerprints, for `serverName`.
        public static func authorities(_ fingerprints: [String], serverName: String) -> TLSIdentity {
            TLSIdentity(authorities: fingerprints.map { $0.lowercased() }, serverName: serverName)
        }

        /// Verified against the system trust store, for `serverName`.
        public static func systemTrust(serverName: String) -> TLSIdentity { TLSIdentity(serverName: serverName) }
    }

    /// `HOST:PORT`, as given on the command line.
    public var address: String
    /// The TLS identity, nil for a plain TCP connection.
    public var tls: TLSIdentity?

    public init(address: String, tls: TLSIdentity? = nil) {
        self.address = address
        self.tls = tls
    }

    /// One line for people and for `spool list`: the address, then how TLS was verified, e.g.
    /// `127.0.0.1:7373`, `rec.example:7373 tls:pin=3f2a…`, `rec.example:7373 tls:ca=91bc…,name=rec.example`,
    /// `rec.example:7373 tls:system,name=rec.example`. Never holds two spaces in a row.
    public var description: String {
        guard let tls else { return address }
        var parts: [String] = []
        if let pin = tls.pin { parts.append("pin=\(Self.abbreviate(pin))") }
        if let authorities = tls.authorities { parts.append("ca=" + authorities.map(Self.abbreviate).joined(separator: "+")) }
        if tls.pin == nil, tls.authorities == nil { parts.append("system") }
        if let serverName = tls.serverName { parts.append("name=\(serverName)") }
        return "\(address) tls:" + parts.joined(separator: ",")
    }

    private static func abbreviate(_ fingerprint: String) -> String {
        fingerprint.count > 16 ? String(fingerprint.prefix(16)) + "…" : fingerprint
    }
}

extension SpoolDestination {
    /// The SHA-256 fingerprints (lower-case hex) of the certificates in a PEM file (`--ca`).
    public static func fingerprints(ofCertificatesIn path: String) throws(SecurityError) -> [String] {
        var result: [String] = []
        for certificate in try PEMFiles.certificates(at: path) {
            guard let der = try? certificate.toDERBytes() else { throw .noCertificate(path: path) }
            result.append(CertificateFingerprint(der: der).hex)
        }
        return result.sorted()
    }

    /// The destination of a send to `address` (`HOST:PORT` as given, whose host is `host`) with the
    /// given TLS trust settings: none (plain TCP), a pin, a CA file, or the system trust store.
    public static func of(address: String, host: String, tls: Bool, pin: CertificateFingerprint?, caPath: String?) throws(SecurityError) -> SpoolDestination {
        guard tls else { return SpoolDestination(address: address) }
        if let pin { return SpoolDestination(address: address, tls: .pinned(pin.hex)) }
        if let caPath { return SpoolDestination(address: address, tls: .authorities(try fingerprints(ofCertificatesIn: caPath), serverName: host)) }
        return SpoolDestination(address: address, tls: .systemTrust(serverName: host))
    }
}
