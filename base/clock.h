/* clock.h - the monotonic clock that times host phases */
#ifndef RS_CLOCK_H
#define RS_CLOCK_H

#include <time.h>

/* Seconds on the monotonic clock (arbitrary origin). */
static inline double clock_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds since the Unix epoch (wall clock, for timestamps only). */
static inline double clock_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
