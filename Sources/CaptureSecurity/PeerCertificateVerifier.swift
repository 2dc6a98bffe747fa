import CaptureCore
import Foundation
import NIOCore
import NIOSSL
import Synchronization
import X509

/// What the peer certificate check found on one connection, so that a failed handshake can be
/// explained in words instead of BoringSSL's generic "certificate verify failed".
///
/// Sendability: what it found is kept in a `Mutex`.
public final class TLSVerificationReport: Sendable {
    private struct Findings {
        var failure: String?
        var names: String?
        var fingerprint: CertificateFingerprint?
    }

    private let findings = Mutex(Findings())

    public init() {}

    /// Why the peer's certificate was refused, when it was.
    public var failure: String? { findings.withLock { $0.failure } }
    /// The names the peer's certificate is for (subject alternative names, or its subject).
    public var certificateNames: String? { findings.withLock { $0.names } }
    /// The SHA-256 fingerprint of the peer's certificate, once it was accepted.
    public var certificateFingerprint: CertificateFingerprint? { findings.withLock { $0.fingerprint } }

    func record(failure: String) { findings.withLock { $0.failure = failure } }
    func record(names: String) { findings.withLock { $0.names = names } }
    func record(accepted fingerprint: CertificateFingerprint) { findings.withLock { $0.fingerprint = fingerprint } }
}

/// How one side decides whether to trust the other's certificate: a CA (or the system trust store)
/// with a full chain and validity check, or a pinned SHA-256 fingerprint.
public struct PeerCertificateVerifier: Sendable {
    /// What is trusted.
    public enum Trust: Sendable {
        /// Certificates that chain to one of these CA certificates.
        case authorities([Certificate])
        /// Certificates that chain to the system's trust store.
        case systemStore
        /// Exactly the certificate with this fingerprint (no CA, no expiry: the pin is the trust).
        case pin(CertificateFingerprint)
    }

    /// What is trusted.
    public let trust: Trust
    /// Who the peer is in messages: "the receiver" or "the sender".
    public let peerName: String
    /// The setting that names the trusted CA, for hints (`.certificateAuthority`, `.clientCertificateAuthority`).
    public let authority: Setting
    /// How hints name settings.
    public let settingNames: any SettingNaming

    public init(trust: Trust, peerName: String, authority: Setting, settingNames: any SettingNaming = LibrarySettingNames()) {
        self.trust = trust
        self.peerName = peerName
        self.authority = authority
        self.settingNames = settingNames
    }

    /// The NIOSSL callback that checks the peer's chain and leaves the reason for a refusal in `report`.
    public func callback(report: TLSVerificationReport) -> NIOSSLCustomVerificationCallback {
        let verifier = self
        return { chain, promise in
            verifier.verify(chain: chain, report: report, now: Date(), promise: promise)
        }
    }

    /// Checks `chain` and completes `promise`; the chain search runs in a Task, off the event loop.
    private func verify(chain: [NIOSSLCertificate], report: TLSVerificationReport, now: Date, promise: EventLoopPromise<NIOSSLVerificationResult>) {
        let refuse: (String) -> Void = { reason in
            report.record(failure: reason)
            promise.succeed(.failed)
        }
        guard let leafSource = chain.first, let leafDER = try? leafSource.toDERBytes() else {
            refuse("\(peerName) presented no certificate")
            return
        }
        let fingerprint = CertificateFingerprint(der: leafDER)
        guard let leaf = try? Certificate(derEncoded: leafDER) else {
            refuse("\(peerName)'s certificate cannot be parsed")
            return
        }
        report.record(names: Self.names(of: leaf))
        switch trust {
        case .pin(let pinned):
            if pinned.matches(der: leafDER) {
                report.record(accepted: fingerprint)
                promise.succeed(.certificateVerified)
            } else {
                refuse("pin mismatch: \(peerName)'s certificate has SHA-256 fingerprint \(fingerprint.hex), not the pinned \(pinned.hex);"
                    + " if the certificate was replaced on purpose, pin the new fingerprint")
            }
            return
        case .authorities, .systemStore:
            break
        }
        if now > leaf.notValidAfter {
            refuse("\(peerName)'s certificate expired on \(Self.format(leaf.notValidAfter)); renew it (capture-recv gen-cert, or your CA)")
            return
        }
        if now < leaf.notValidBefore {
            refuse("\(peerName)'s certificate is not valid before \(Self.format(leaf.notValidBefore)); check both machines' clocks")
            return
        }
        let roots: CertificateStore
        let trusted: String
        switch trust {
        case .authorities(let certificates):
            roots = CertificateStore(certificates)
            trusted = "the CA in \(settingNames.name(of: authority))"
        case .systemStore:
            roots = CertificateStore.systemTrustRoots
            trusted = "a CA in the system trust store"
        case .pin:
            return
        }
        let intermediates = CertificateStore(chain.dropFirst().compactMap { try? $0.toDERBytes() }.compactMap { try? Certificate(derEncoded: $0) })
        let peerName = self.peerName
        let authority = self.authority
        let settingNames = self.settingNames
        Task {
            var verifier = Verifier(rootCertificates: roots) { RFC5280Policy() }
            let result = await verifier.validate(leaf: leaf, intermediates: intermediates)
            switch result {
            case .validCertificate:
                report.record(accepted: fingerprint)
                promise.succeed(.certificateVerified)
            case .couldNotValidate:
                let selfSigned = leaf.issuer == leaf.subject
                let what = selfSigned ? "is self-signed" : "was issued by \(leaf.issuer)"
                refuse("untrusted certificate: \(peerName)'s certificate (\(leaf.subject)) \(what) and is not signed by \(trusted);"
                    + " pass the CA that signed it with \(settingNames.name(of: authority))"
                    + (authority == .certificateAuthority ? ", or pin it with \(settingNames.name(of: .certificatePin)) \(fingerprint.hex)" : ""))
            }
        }
    }

    /// The DNS names and IP addresses a certificate is for, or its subject when it names none.
    static func names(of certificate: Certificate) -> String {
        guard let alternatives = try? certificate.extensions.subjectAlternativeNames, !alternatives.isEmpty else {
            return "\(certificate.subject)"
        }
        return alternatives.map { name -> String in
            switch name {
            case .dnsName(let dns): return dns
            case .ipAddress(let octets):
                let bytes = Array(octets.bytes)
                if bytes.count == 4 { return bytes.map { "\($0)" }.joined(separator: ".") }
                return "IPv6 " + bytes.map { String($0, radix: 16) }.joined(separator: ":")
            default: return "\(name)"
            }
        }.joined(separator: ", ")
    }

    private static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: date)
    }
}
