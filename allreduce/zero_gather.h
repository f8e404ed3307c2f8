/* zero_gather.h - ZeRO-3's parameter gathers: a thread of their own all-gathers layers on a ring of their own, in the order the compute thread asks for them, so the next layer's gather runs while this one computes */
#ifndef RS_ZERO_GATHER_H
#define RS_ZERO_GATHER_H

#include <stddef.h>

#include "ring.h"
#include "../engine/sync.h"

/* ---- Types ---- */

/* The gathers of one rank. Every rank asks for the same buckets in the same order (its passes'
 * program order), and the thread runs them in that order, so the ring's collectives match on every
 * rank. A bucket is, in turn: given back (its pages outside the rank's chunk gone), asked (queued
 * or running), whole. Only the compute thread calls the functions below. */
typedef struct ZeroGather ZeroGather;

/* Called on the gather thread after each gather (the memory count). */
typedef void (*ZeroGatherDone)(void *arg);

/* ---- Prototypes ---- */

/* Starts the gathers of buckets[0..nb) of params over ring (NULL for one rank: every ask is whole
 * at once), each wait bounded by timeout seconds; done(arg) after each (may be NULL). 0, or
 * RS_ERR_RUNTIME (out of memory, no thread). */
int zgather_create(ZeroGather **out, Ring *ring, float *params, const Bucket *buckets, int nb, double timeout,
                   ZeroGatherDone done, void *arg);

/* Queues bucket b's all-gather unless it is asked or whole. */
void zgather_ask(ZeroGather *g, int b);

/* Waits until bucket b is whole (ask it first): 0, the gather's error (RS_ERR_*, message set), or
 * RS_ERR_PEER when it is not whole within the timeout. */
int zgather_wait(ZeroGather *g, int b);

/* 1 when bucket b is whole. */
int zgather_whole(const ZeroGather *g, int b);

/* Bucket b is given back (a whole bucket: the caller releases its pages); the next ask gathers it
 * again. Asked buckets are left as they are. */
void zgather_forget(ZeroGather *g, int b);

/* Waits until nothing is queued or running: 0, or as zgather_wait. */
int zgather_idle(ZeroGather *g);

/* The gathers' intervals (clock_now) since the last call, at most max of them into out: their
 * count (the rest are dropped). */
int zgather_spans(ZeroGather *g, double (*out)[2], int max);

/* Stops the thread (after the gather it is running) and frees everything. NULL is a no-op. */
void zgather_destroy(ZeroGather *g);

#endif
