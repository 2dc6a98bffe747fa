import CALSA
import CaptureCore
#if canImport(Glibc)
import Glibc
#endif

/// The errors the ALSA source throws, as data (`DeviceFailure`): `CaptureError.message(naming:)`
/// words them where they are shown.
enum ALSAErrorText {
    /// libasound's text for a negative error code.
    static func describe(_ code: Int32) -> String {
        String(cString: snd_strerror(code))
    }

    /// The device could not be opened at all.
    static func openFailed(device: String, code: Int32) -> CaptureError {
        .deviceUnavailable(DeviceFailure(device: device, activity: .opening, code: code, reason: describe(code)))
    }

    /// A setup step after opening failed.
    static func setupFailed(device: String, step: String, code: Int32) -> CaptureError {
        .deviceUnavailable(DeviceFailure(device: device, activity: .settingUp(step: step), code: code, reason: describe(code)))
    }

    /// The device went away or stopped working.
    static func deviceLost(device: String, code: Int32, during: String) -> CaptureError {
        .deviceLost(DeviceFailure(device: device, activity: .using(during), code: code, reason: describe(code)))
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
