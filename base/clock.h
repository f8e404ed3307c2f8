/* clock.h - the monotonic clock that times host phases */
#ifndef RS_CLOCK_H
#define RS_CLOCK_H

#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* The timer slack clock_precise_waits asks for, ns: a timed wait wakes this close to its deadline. */
#define CLOCK_WAIT_SLACK_NS 1000UL

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

/* Makes this thread's timed waits (poll and ppoll timeouts, nanosleep) wake within
 * CLOCK_WAIT_SLACK_NS of their deadline instead of the kernel's default 50 us late; threads it
 * starts afterwards, and processes it forks, inherit it. The emulated links wait for every
 * message's booked arrival, so at the default every message a rank waited for arrived up to 50 us
 * late, which a latency-bound figure carried (docs/benchmarks.md, "Timer slack"). Call it first in
 * main, before any thread. 0, or -1 where the system has no such setting. */
static inline int clock_precise_waits(void) {
#ifdef __linux__
    return prctl(PR_SET_TIMERSLACK, CLOCK_WAIT_SLACK_NS, 0, 0, 0) == 0 ? 0 : -1;
#else
    return -1;
#endif
}

#endif
