/// An error an executable reports as its one line on standard error before exiting non-zero.
public struct CLIError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

