import CaptureCore
import Foundation
import NIOCore
import NIOSSL
import Synchronization
import X509

/// Why a peer's certificate was refused, as data: who the peer is, the setting that names the
/// trusted CA, and what was wrong. `message(naming:)` words it, naming settings as the caller's
/// `SettingNaming` spells them, where the refusal is shown.
public struct CertificateRefusal: Sendable, Equatable {
    /// What was wrong with the certificate.
    public enum Reason: Sendable, Equatable {
        /// The peer presented no certificate.
        case noCertificate
        /// The peer's certificate cannot be parsed.
        case unparseable
        /// The certificate is not the pinned one.
        case pinMismatch(presented: CertificateFingerprint, pinned: CertificateFingerprint)
        /// The certificate expired at `notValidAfter`.
        case expired(notValidAfter: Date)
        /// The certificate is not valid before `notValidBefore` (a clock is wrong, or it is new).
        case notYetValid(notValidBefore: Date)
        /// The certificate (`subject`) does not chain to what is trusted; `issuer` is nil when it is
        /// self-signed. `fingerprint` is the certificate's, for a pin instead.
        case untrusted(subject: String, issuer: String?, trustedBy: TrustedBy, fingerprint: CertificateFingerprint)
    }

    /// What a certificate must chain to.
    public enum TrustedBy: Sendable, Equatable {
        /// The CA certificates given in the `authority` setting.
        case authorities
        /// The system's trust store.
        case systemStore
    }

    /// Who the peer is in messages: "the receiver" or "the sender".
    public var peerName: String
    /// The setting that names the trusted CA (`.certificateAuthority`, `.clientCertificateAuthority`).
    public var authority: Setting
    /// What was wrong.
    public var reason: Reason

    /// `peerName`'s certificate was refused for `reason`; `authority` names the trusted CA's setting.
    public init(peerName: String, authority: Setting, reason: Reason) {
        self.peerName = peerName
        self.authority = authority
        self.reason = reason
    }

    /// The refusal's text, naming the settings to change as `naming` spells them.
    public func message(naming: any SettingNaming) -> String {
        switch reason {
        case .noCertificate:
            return "\(peerName) presented no certificate"
        case .unparseable:
            return "\(peerName)'s certificate cannot be parsed"
        case .pinMismatch(let presented, let pinned):
            return "pin mismatch: \(peerName)'s certificate has SHA-256 fingerprint \(presented.hex), not the pinned \(pinned.hex);"
                + " if the certificate was replaced on purpose, pin the new fingerprint"
        case .expired(let notValidAfter):
            return "\(peerName)'s certificate expired on \(Self.format(notValidAfter)); renew it (capture-recv gen-cert, or your CA)"
        case .notYetValid(let notValidBefore):
            return "\(peerName)'s certificate is not valid before \(Self.format(notValidBefore)); check both machines' clocks"
        case .untrusted(let subject, let issuer, let trustedBy, let fingerprint):
            let what = issuer.map { "was issued by \($0)" } ?? "is self-signed"
            let trusted = trustedBy == .authorities ? "the CA in \(naming.name(of: authority))" : "a CA in the system trust store"
            return "untrusted certificate: \(peerName)'s certificate (\(subject)) \(what) and is not signed by \(trusted);"
                + " pass the CA that signed it with \(naming.name(of: authority))"
                + (authority == .certificateAuthority ? ", or pin it with \(naming.name(of: .certificatePin)) \(fingerprint.hex)" : "")
        }
    }

    private static func format(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)
    }
}

/// What the peer certificate check found on one connection, so that a failed handshake can be
/// explained in words instead of BoringSSL's generic "certificate verify failed".
///
/// Sendability: what it found is kept in a `Mutex`.
public final class TLSVerificationReport: Sendable {
    private struct Findings {
        var failure: CertificateRefusal?
        var names: String?
        var fingerprint: CertificateFingerprint?
    }

    private let findings = Mutex(Findings())

    public init() {}

    /// Why the peer's certificate was refused, when it was.
    public var failure: CertificateRefusal? { findings.withLock { $0.failure } }
    /// The names the peer's certificate is for (subject alternative names, or its subject).
    public var certificateNames: String? { findings.withLock { $0.names } }
    /// The SHA-256 fingerprint of the peer's certificate, once it was accepted.
    public var certificateFingerprint: CertificateFingerprint? { findings.withLock { $0.fingerprint } }

    func record(failure: CertificateRefusal) { findings.withLock { $0.failure = failure } }
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

    public init(trust: Trust, peerName: String, authority: Setting) {
        self.trust = trust
        self.peerName = peerName
        self.authority = authority
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
        let peerName = self.peerName, authority = self.authority
        let refuse: @Sendable (CertificateRefusal.Reason) -> Void = { reason in
            report.record(failure: CertificateRefusal(peerName: peerName, authority: authority, reason: reason))
            promise.succeed(.failed)
        }
        guard let leafSource = chain.first, let leafDER = try? leafSource.toDERBytes() else {
            refuse(.noCertificate)
            return
        }
        let fingerprint = CertificateFingerprint(der: leafDER)
        guard let leaf = try? Certificate(derEncoded: leafDER) else {
            refuse(.unparseable)
            return
        }
        report.record(names: Self.names(of: leaf))
        switch trust {
        case .pin(let pinned):
            if pinned.matches(der: leafDER) {
                report.record(accepted: fingerprint)
                promise.succeed(.certificateVerified)
            } else {
                refuse(.pinMismatch(presented: fingerprint, pinned: pinned))
            }
            return
        case .authorities, .systemStore:
            break
        }
        if now > leaf.notValidAfter {
            refuse(.expired(notValidAfter: leaf.notValidAfter))
            return
        }
        if now < leaf.notValidBefore {
            refuse(.notYetValid(notValidBefore: leaf.notValidBefore))
            return
        }
        let roots: CertificateStore
        let trustedBy: CertificateRefusal.TrustedBy
        switch trust {
        case .authorities(let certificates):
            roots = CertificateStore(certificates)
            trustedBy = .authorities
        case .systemStore:
            roots = CertificateStore.systemTrustRoots
            trustedBy = .systemStore
        case .pin:
            return
        }
        let intermediates = CertificateStore(chain.dropFirst().compactMap { try? $0.toDERBytes() }.compactMap { try? Certificate(derEncoded: $0) })
        Task {
            var verifier = Verifier(rootCertificates: roots) { RFC5280Policy() }
            let result = await verifier.validate(leaf: leaf, intermediates: intermediates)
            switch result {
            case .validCertificate:
                report.record(accepted: fingerprint)
                promise.succeed(.certificateVerified)
            case .couldNotValidate:
                let issuer = leaf.issuer == leaf.subject ? nil : "\(leaf.issuer)"
                refuse(.untrusted(subject: "\(leaf.subject)", issuer: issuer, trustedBy: trustedBy, fingerprint: fingerprint))
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
}
