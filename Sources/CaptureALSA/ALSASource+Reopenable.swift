import CaptureCore

/// An ALSA device can be reopened after it was lost (`capture-send --reopen`).
extension ALSASource: ReopenableSource {}
