import Crypto

/// Comparisons whose duration does not depend on where two secrets differ.
public enum ConstantTime {
    /// Whether `a` equals `b`. Runs over every byte of the longer input whatever the contents, so
    /// the time taken tells nothing about how much of a guess was right.
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let length = max(a.count, b.count)
        var difference: UInt8 = a.count == b.count ? 0 : 1
        for index in 0..<length {
            let left = index < a.count ? a[index] : 0
            let right = index < b.count ? b[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }

    /// Whether the UTF-8 bytes of `candidate` equal `secret`. Both are hashed first so that the
    /// comparison covers 32 bytes however long either is: not even the secret's length leaks.
    public static func tokenEquals(_ candidate: String, _ secret: String) -> Bool {
        equals(Array(SHA256.hash(data: Array(candidate.utf8))), Array(SHA256.hash(data: Array(secret.utf8))))
    }
}
