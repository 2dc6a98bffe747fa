/* libsoxr: resamples PCM at rates Opus does not take (44.1 kHz, 96 kHz...) to 48 kHz for listening. */
#include <soxr.h>
