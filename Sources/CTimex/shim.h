// The kernel clock's discipline state (adjtimex(2)), for the sender to report whether its clock is synchronized.
#include <sys/timex.h>
