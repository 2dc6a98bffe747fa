/// The random bytes a stream's resume secret is made of (PROTOCOL.md §6.1.1).
public enum ResumeSecret {
    /// Bytes in a secret capture-send makes.
    public static let length = 32

    /// A new secret from the system's cryptographically secure generator (`getrandom(2)`).
    public static func make() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
