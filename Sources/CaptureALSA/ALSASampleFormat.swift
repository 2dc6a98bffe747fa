import CALSA
import CaptureCore

/// The mapping between the sample formats capture-send carries and ALSA's format codes, and the
/// order in which the others are tried when a device refuses the one asked for.
enum ALSASampleFormat {
    /// The ALSA format code of a sample format: interleaved little-endian, 24-bit packed in 3 bytes.
    static func alsaFormat(of sample: PCMSampleFormat) -> snd_pcm_format_t {
        switch sample {
        case .s16: return SND_PCM_FORMAT_S16_LE
        case .s24: return SND_PCM_FORMAT_S24_3LE
        case .s32: return SND_PCM_FORMAT_S32_LE
        case .f32: return SND_PCM_FORMAT_FLOAT_LE
        }
    }

    /// The sample format of an ALSA format code, or `nil` for a format capture-send does not carry.
    static func sampleFormat(of format: snd_pcm_format_t) -> PCMSampleFormat? {
        PCMSampleFormat.allCases.first { alsaFormat(of: $0) == format }
    }

    /// The sample formats to try, best first, when `requested` is asked for: the request itself,
    /// then formats that keep at least its precision, then the rest.
    static func preferenceOrder(for requested: PCMSampleFormat) -> [PCMSampleFormat] {
        switch requested {
        case .s16: return [.s16, .s24, .s32, .f32]
        case .s24: return [.s24, .s32, .f32, .s16]
        case .s32: return [.s32, .s24, .f32, .s16]
        case .f32: return [.f32, .s32, .s24, .s16]
        }
    }
}
