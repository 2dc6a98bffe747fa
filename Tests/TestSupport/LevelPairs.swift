import Foundation

/// The numbers in each rendered `peak/rms` pair of a status line, such as ` -6.0/ -9.0`, for each
/// channel, in order (`-∞` reads as minus infinity).
public func levelPairs(in line: String) -> [(peak: Double, rms: Double)] {
    let pattern = try? NSRegularExpression(pattern: #"(-?[0-9]+\.[0-9]|-∞)/ *(-?[0-9]+\.[0-9]|-∞)"#)
    let range = NSRange(line.startIndex..., in: line)
    return (pattern?.matches(in: line, range: range) ?? []).compactMap { match in
        guard let peakRange = Range(match.range(at: 1), in: line), let rmsRange = Range(match.range(at: 2), in: line) else { return nil }
        func number(_ text: Substring) -> Double { text == "-∞" ? -.infinity : Double(text) ?? .nan }
        return (number(line[peakRange]), number(line[rmsRange]))
    }
}
