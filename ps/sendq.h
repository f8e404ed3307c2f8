/* sendq.h - a worker's queue of pushes held back behind a credit of its link, so that its process's replies go first */
#ifndef RS_PS_SENDQ_H
#define RS_PS_SENDQ_H

#include <stdlib.h>

#include "../base/err.h"
#include "../net/msg.h"

/* ---- Types ---- */

/* Pushes not yet handed to the interface, first in first out. A process whose worker pushes
 * while a server in it answers (a sharded shard, byteps's, the colocated server's rank 0) books
 * both on one interface; booked first come first served, a reply waits behind every push the
 * worker has already queued there (head-of-line blocking). Held here, a push is booked only while
 * the interface's backlog is under the credit (ByteScheduler's credit: bytes in flight per link,
 * here in seconds of the link), so a reply, booked at once, waits at most the credit. */
typedef struct {
    int *slice;          /* [cap] the plan's slice of each push */
    const void **data;   /* [cap] its payload (lent: unchanged until the push is answered) */
    size_t *bytes;       /* [cap] */
    int head, n, cap;    /* pushes [head, n) wait */
} PsSendQ;

/* Sends one push: 0 or RS_ERR_*. */
typedef int (*PsSendFn)(void *arg, int slice, const void *data, size_t bytes);

/* ---- Helpers ---- */

/* Room for cap pushes (a step's slices). 0 or RS_ERR_RUNTIME; sendq_free frees it. */
static inline int sendq_init(PsSendQ *q, int cap) {
    q->head = q->n = 0;
    q->cap = cap > 0 ? cap : 1;
    q->slice = calloc((size_t)q->cap, sizeof *q->slice);
    q->data = calloc((size_t)q->cap, sizeof *q->data);
    q->bytes = calloc((size_t)q->cap, sizeof *q->bytes);
    if (q->slice && q->data && q->bytes) return RS_OK;
    return rs_error(RS_ERR_RUNTIME, "out of memory for a send queue of %d", q->cap);
}

static inline void sendq_free(PsSendQ *q) {
    free(q->slice);
    free(q->data);
    free(q->bytes);
    q->slice = NULL;
    q->data = NULL;
    q->bytes = NULL;
    q->head = q->n = q->cap = 0;
}

/* Pushes waiting. */
static inline int sendq_waiting(const PsSendQ *q) { return q->n - q->head; }

/* Queues a push; a full queue (more than a step's slices) is the caller's bug: RS_ERR_RUNTIME. */
static inline int sendq_put(PsSendQ *q, int slice, const void *data, size_t bytes) {
    if (q->head == q->n) q->head = q->n = 0; /* empty: start over at the front */
    if (q->n == q->cap) return rs_error(RS_ERR_RUNTIME, "ps: send queue full (%d pushes)", q->cap);
    q->slice[q->n] = slice;
    q->data[q->n] = data;
    q->bytes[q->n] = bytes;
    q->n++;
    return RS_OK;
}

/* Sends waiting pushes in order while this process's interface has less than credit seconds
 * booked ahead (msg_backlog); credit <= 0 (no link to schedule) sends them all. 0, or the first
 * failing send's status (the push stays queued). */
static inline int sendq_flush(PsSendQ *q, double credit, PsSendFn send, void *arg) {
    while (q->head < q->n && (credit <= 0 || msg_backlog() < credit)) {
        RS_TRY(send(arg, q->slice[q->head], q->data[q->head], q->bytes[q->head]));
        q->head++;
    }
    return RS_OK;
}

/* Seconds until the head push may go (0: now or nothing waits; credit <= 0: now). */
static inline double sendq_due_in(const PsSendQ *q, double credit) {
    if (credit <= 0 || q->head == q->n) return 0;
    double b = msg_backlog() - credit;
    return b > 0 ? b : 0;
}

#endif
