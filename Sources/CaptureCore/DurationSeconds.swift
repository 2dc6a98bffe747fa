extension Duration {
    /// The duration in seconds, as a `Double`: for log lines and error messages, and for the few
    /// APIs that take seconds (`Date`, `NSCondition.wait(until:)`).
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}
