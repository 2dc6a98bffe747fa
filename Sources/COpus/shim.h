#include <opus.h>
#include <opus_multistream.h>

/* opus_encoder_ctl is variadic, which Swift cannot call; these wrappers pass one integer argument. */
static inline int capture_opus_set_int(OpusEncoder *encoder, int request, opus_int32 value) {
    return opus_encoder_ctl(encoder, request, value);
}
static inline int capture_opus_get_int(OpusEncoder *encoder, int request, opus_int32 *value) {
    return opus_encoder_ctl(encoder, request, value);
}
static inline int capture_opus_ms_set_int(OpusMSEncoder *encoder, int request, opus_int32 value) {
    return opus_multistream_encoder_ctl(encoder, request, value);
}
static inline int capture_opus_ms_get_int(OpusMSEncoder *encoder, int request, opus_int32 *value) {
    return opus_multistream_encoder_ctl(encoder, request, value);
}
