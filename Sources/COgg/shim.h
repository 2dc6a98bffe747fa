/* libogg: the Ogg page framing the listen stream is carried in (RFC 3533). */
#include <ogg/ogg.h>
