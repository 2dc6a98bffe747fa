import CALSA
import CaptureCore
#if canImport(Glibc)
import Glibc
#endif

/// The wording of the errors the ALSA source throws, kept in one place so each one says what to do.
enum ALSAErrorText {
    /// What the user can do when no capture device is usable.
    static func noDeviceAdvice(_ naming: any SettingNaming) -> String {
        "Run `\(naming.name(of: .deviceList))` to see the capture devices, or use `\(naming.name(of: .toneSource))` to send a test tone without a sound card."
    }

    /// libasound's text for a negative error code.
    static func describe(_ code: Int32) -> String {
        String(cString: snd_strerror(code))
    }

    /// The device could not be opened at all.
    static func openFailed(device: String, code: Int32, naming: any SettingNaming) -> CaptureError {
        var reason = describe(code)
        if code == -EBUSY {
            reason += " (another program is capturing from it)"
        } else if code == -ENOENT || code == -ENODEV {
            reason += " (no such capture device; there may be no sound card)"
        }
        return .openFailed("cannot open ALSA capture device '\(device)': \(reason). \(noDeviceAdvice(naming))")
    }

    /// A setup step after opening failed.
    static func setupFailed(device: String, step: String, code: Int32, naming: any SettingNaming) -> CaptureError {
        .openFailed("cannot set up ALSA capture device '\(device)' (\(step)): \(describe(code)). Try another device, for example a `plughw:` one. \(noDeviceAdvice(naming))")
    }

    /// The device went away or stopped working.
    static func deviceLost(device: String, code: Int32, during: String, naming: any SettingNaming) -> CaptureError {
        .deviceLost("ALSA capture device '\(device)' was lost while \(during): \(describe(code)). Check that it is still connected; with `\(naming.name(of: .reopenDevice))` capture-send reopens it and records the gap.")
    }
}

/// What a failed `snd_pcm_readi` means for the source.
enum ALSAReadFailure: Equatable {
    /// Nothing happened yet (`-EAGAIN`) or a signal interrupted the wait (`-EINTR`): read again.
    case retry
    /// The ring buffer overflowed (`-EPIPE`): recover and report the lost frames.
    case overrun
    /// The system suspended the device (`-ESTRPIPE`): resume or prepare it, and report the lost frames.
    case suspended
    /// The device is gone (`-ENODEV`), in a bad state (`-EBADFD`) or failed otherwise: give up.
    case lost

    /// Classifies a negative libasound return code.
    init(code: Int) {
        switch -code {
        case Int(EAGAIN), Int(EINTR): self = .retry
        case Int(EPIPE): self = .overrun
        case Int(ESTRPIPE): self = .suspended
        default: self = .lost
        }
    }
}
