/// The keys of `capture-send --interactive`, as a pure state machine: bytes from the terminal in,
/// what to do out. As `arecord -i`: space pauses and resumes; `m` starts a marker, whose optional
/// label is typed after it and ended by Enter (Escape drops the marker, Backspace erases); `q` stops
/// as the first Ctrl-C does. Other keys are ignored. The shell reads the terminal (non-canonical,
/// without echo; Ctrl-C still raises SIGINT) and carries the actions out.
public struct InteractiveKeys: Sendable, Equatable {
    /// Where the keys stand.
    public enum State: Sendable, Equatable {
        /// Waiting for a key; `paused`: capture is paused.
        case ready(paused: Bool)
        /// A marker's label is being typed (its UTF-8 bytes so far).
        case typingLabel(paused: Bool, label: [UInt8])
        /// `q` was pressed, or the terminal closed: no key does anything any more.
        case stopped
    }

    /// What to do.
    public enum Action: Sendable, Equatable {
        /// Pause capture.
        case pause
        /// Resume capture.
        case resume
        /// Show `prompt`, the label typed so far (a marker is being labelled).
        case showLabel(String)
        /// The label was dropped (Escape): hide the prompt, no marker.
        case cancelLabel
        /// Drop a marker with `label` (hide the prompt).
        case mark(label: String)
        /// Stop capture as the first SIGINT does.
        case stop
    }

    /// The longest label, in UTF-8 bytes (the protocol's limit, PROTOCOL.md §6.10).
    public let maximumLabelBytes: Int
    /// Where the keys stand.
    public private(set) var state: State = .ready(paused: false)

    public init(maximumLabelBytes: Int = 255) {
        self.maximumLabelBytes = maximumLabelBytes
    }

    static let escape: UInt8 = 0x1B
    static let backspaces: Set<UInt8> = [0x7F, 0x08]
    static let enters: Set<UInt8> = [0x0A, 0x0D]

    /// One byte read from the terminal.
    public mutating func handle(byte: UInt8) -> [Action] {
        switch state {
        case .stopped:
            return []
        case .ready(let paused):
            switch byte {
            case UInt8(ascii: " "):
                state = .ready(paused: !paused)
                return [paused ? .resume : .pause]
            case UInt8(ascii: "m"), UInt8(ascii: "M"):
                state = .typingLabel(paused: paused, label: [])
                return [.showLabel("")]
            case UInt8(ascii: "q"), UInt8(ascii: "Q"):
                state = .stopped
                return [.stop]
            default:
                return []
            }
        case .typingLabel(let paused, var label):
            if Self.enters.contains(byte) {
                state = .ready(paused: paused)
                return [.mark(label: text(of: label))]
            }
            if byte == Self.escape {
                state = .ready(paused: paused)
                return [.cancelLabel]
            }
            if Self.backspaces.contains(byte) {
                guard !label.isEmpty else { return [] }
                // One character: its continuation bytes (10xxxxxx), then its first byte.
                while let last = label.last, last & 0xC0 == 0x80 { label.removeLast() }
                if !label.isEmpty { label.removeLast() }
                state = .typingLabel(paused: paused, label: label)
                return [.showLabel(text(of: label))]
            }
            // Control characters (and NUL, which a label cannot hold) are ignored; a label stops
            // growing at its limit.
            guard byte >= 0x20, label.count < maximumLabelBytes else { return [] }
            label.append(byte)
            state = .typingLabel(paused: paused, label: label)
            return [.showLabel(text(of: label))]
        }
    }

    /// The label's text: its bytes as UTF-8, a character cut off at the limit dropped.
    private func text(of label: [UInt8]) -> String {
        var bytes = label
        if !bytes.isEmpty, !Self.isComplete(bytes) {
            while let last = bytes.last, last & 0xC0 == 0x80 { bytes.removeLast() }
            if !bytes.isEmpty { bytes.removeLast() }
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while text.utf8.count > maximumLabelBytes { text.removeLast() }
        return text
    }

    /// Whether `bytes` end on a whole UTF-8 character.
    private static func isComplete(_ bytes: [UInt8]) -> Bool {
        var index = bytes.count - 1
        var continuation = 0
        while index >= 0, bytes[index] & 0xC0 == 0x80 { continuation += 1; index -= 1 }
        guard index >= 0 else { return false }
        let lead = bytes[index]
        let length = lead < 0x80 ? 1 : lead & 0xE0 == 0xC0 ? 2 : lead & 0xF0 == 0xE0 ? 3 : lead & 0xF8 == 0xF0 ? 4 : 0
        return length == continuation + 1
    }

    /// The terminal closed (end of input): a label being typed is dropped, and no key comes again.
    public mutating func endOfInput() -> [Action] {
        let wasTyping: Bool
        if case .typingLabel = state { wasTyping = true } else { wasTyping = false }
        state = .stopped
        return wasTyping ? [.cancelLabel] : []
    }
}
