import CaptureCore
import CaptureSecurity
import CaptureWire
import Foundation

/// Who may record what: the decisions on a valid Hello, one connection's worth, as a pure value.
///
/// The order is fixed: the peer address's rate limit, then the token, then the stream table
/// (another connection records the stream; the stream limit). An address over the limit (shared by
/// many field units behind one NAT, one of them failing) is refused for now with RATE_LIMITED and a
/// retry-after, except for a Hello that carries a resume secret: it may still resume a stream it
/// owns. Its token is checked as usual, it may not create a stream, and storage must find the
/// stream and its owner, or the answer is RATE_LIMITED after all (`openFailed`). So streams that
/// authenticated before are not locked out by others' failures, while guessing gains nothing.
///
/// The handler gathers the facts (the limiter's remaining block, the token check, the stream
/// table's reservation, the storage's answer) and carries out what the gate returns; the gate
/// never looks at a clock, a lock or a file.
struct HelloGate: Equatable {
    /// The presented token against the receiver's tokens.
    enum TokenCheck: Equatable {
        /// The receiver requires no token.
        case notRequired
        /// The receiver requires one and the Hello has none.
        case missing
        /// The Hello's token is not one the receiver accepts.
        case wrong
        /// The Hello's token is one the receiver accepts.
        case accepted
    }

    /// A refusal for now, with when to try again.
    struct RateLimit: Equatable {
        var reason: String
        var retryAfterMilliseconds: UInt32
    }

    /// What the handler records with the rate limiter after authentication.
    enum Record: Equatable {
        case nothing
        /// A failed authentication from the peer's address.
        case failure
        /// A successful one: the address's failures are forgotten.
        case success
    }

    /// What authentication decided.
    enum Authentication: Equatable {
        /// Authenticated: reserve the stream in the stream table next (`reserved(_:)`).
        case admitted
        /// Refused for good: AUTHENTICATION_FAILED for this reason (`.missingToken`, `.wrongToken`).
        case refused(HelloRefusal)
        /// Refused for now: RATE_LIMITED.
        case rateLimited(RateLimit)
    }

    /// Set when the peer's address is rate limited but its Hello may still resume a stream it
    /// owns: what the refusal is if it does not.
    private(set) var ownershipRequired: RateLimit?

    /// Authenticates a valid Hello from `peer`: `blockedFor` is what the rate limiter says
    /// is left of the address's block (nil: not blocked), `carriesResumeSecret` whether the Hello
    /// has a resume secret, `token` how its token compares. Returns the decision and what to
    /// record with the limiter.
    mutating func authenticate(
        peer: String, blockedFor: Duration?, carriesResumeSecret: Bool, token: TokenCheck
    ) -> (Authentication, Record) {
        ownershipRequired = nil
        if let remaining = blockedFor?.inSeconds {
            let seconds = Int(exactly: remaining.rounded(.up)) ?? Int.max
            let limit = RateLimit(
                reason: "too many failed authentication attempts from \(peer); try again in \(seconds) s",
                retryAfterMilliseconds: UInt32(clamping: Int(exactly: (remaining * 1_000).rounded(.up)) ?? Int.max))
            guard carriesResumeSecret else { return (.rateLimited(limit), .nothing) }
            ownershipRequired = limit
        }
        let refusal: HelloRefusal
        switch token {
        case .notRequired:
            return (.admitted, .nothing)
        case .accepted:
            return (.admitted, ownershipRequired == nil ? .success : .nothing)
        case .missing:
            refusal = .missingToken
        case .wrong:
            refusal = .wrongToken
        }
        if let ownershipRequired { return (.rateLimited(ownershipRequired), .failure) }
        return (.refused(refusal), .failure)
    }

    /// The answer to the Hello: authentication's, or, once admitted, the stream table's
    /// `reservation` (nil when authentication did not admit it, so nothing was reserved).
    func decision(_ authentication: Authentication, reservation: StreamRegistry.Reservation?, streamID: UUID, maximumStreams: Int) -> HelloDecision {
        switch authentication {
        case .refused(let refusal):
            return .refused(refusal)
        case .rateLimited(let limit):
            return .rateLimited(limit.reason, retryAfterMilliseconds: limit.retryAfterMilliseconds)
        case .admitted:
            switch reservation {
            case .reserved?:
                return .accepted
            case .busy?:
                return .refused(.streamBusy(streamID: streamID))
            case .full?, nil:
                return .refused(.tooManyStreams(maximumStreams: maximumStreams))
            }
        }
    }

    /// Whether storage may create the stream's file (when the session allows it): not for a Hello
    /// admitted only to resume a stream it owns.
    func mayCreate(sessionAllows: Bool) -> Bool {
        sessionAllows && ownershipRequired == nil
    }

    /// What a failed open of the stream's file means: from a rate-limited address, a stream the
    /// Hello does not own (not resumable, or another owner's) is refused for the address's limit
    /// after all; any other failure is the storage's.
    func openFailed(_ error: StorageError) -> StorageError {
        guard let limit = ownershipRequired else { return error }
        switch error {
        case .notResumable, .notStreamOwner:
            return .rateLimited(limit.reason, retryAfterMilliseconds: limit.retryAfterMilliseconds)
        default:
            return error
        }
    }

    /// Who the connection is, when the receiver authenticates: its client certificate (mutual
    /// TLS), else its token when tokens are required; nil when neither. Streams are bound to it
    /// (`StreamOwner`).
    static func identity(certificate: CertificateFingerprint?, tokensRequired: Bool, token: String) -> String? {
        if let certificate { return StreamOwner.identity(certificate: certificate) }
        if tokensRequired, !token.isEmpty { return StreamOwner.identity(token: token) }
        return nil
    }
}
