import CALSA

/// Controls what libasound itself prints.
public enum ALSALibraryOutput {
    /// Stops libasound from printing its own diagnostics to standard error (for example
    /// "ALSA lib pcm.c:2666:(snd_pcm_open_noupdate) Unknown PCM default"); the caller reports errors
    /// itself, from the error codes.
    public static func silenceDiagnostics() {
        capture_alsa_silence_library_errors()
    }
}
