#include <alsa/asoundlib.h>

/* libasound prints its own diagnostics to standard error; capture-send reports errors itself, in one
   line. The handler is variadic, which Swift cannot define, hence this shim. */
static void capture_alsa_discard_error(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
static inline void capture_alsa_silence_library_errors(void) {
    snd_lib_error_set_handler(capture_alsa_discard_error);
}
