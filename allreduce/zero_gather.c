/* zero_gather.c - ZeRO-3's parameter gathers on a thread and a ring of their own, in the order they are asked for */
#include "zero_gather.h"
#include "../base/clock.h"
#include "../base/err.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ZG_BACK = 0, ZG_ASKED = 1, ZG_WHOLE = 2 };

#define ZG_SPANS 512 /* the gathers' intervals kept between two zgather_spans calls */

struct ZeroGather {
    Ring *ring;
    float *params;
    const Bucket *buckets;
    int nb;
    double timeout;
    ZeroGatherDone done;
    void *arg;
    pthread_t thread;
    int started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned char *state;     /* [nb]: ZG_BACK, ZG_ASKED, ZG_WHOLE */
    int *queue, head, tail;   /* the asked buckets in order, a ring buffer of nb + 1 */
    int running;              /* a gather in progress (taken off the queue) */
    int err;                  /* the first failure; every later wait returns it */
    char errmsg[512];
    double spans[ZG_SPANS][2];
    int nspans;
};

static void *zgather_main(void *arg) {
    ZeroGather *g = arg;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->stop && g->head == g->tail) pthread_cond_wait(&g->cv, &g->mu);
        if (g->stop) break;
        int b = g->queue[g->head];
        g->head = (g->head + 1) % (g->nb + 1);
        g->running = 1;
        int skip = g->err != 0;
        pthread_mutex_unlock(&g->mu);
        const Bucket *bk = &g->buckets[b];
        double t0 = clock_now();
        int rc = skip ? RS_OK : ring_all_gather(g->ring, g->params + bk->lo, bk->hi - bk->lo);
        double t1 = clock_now();
        if (rc == RS_OK && !skip && g->done) g->done(g->arg);
        pthread_mutex_lock(&g->mu);
        g->running = 0;
        if (rc && !g->err) {
            g->err = rc;
            snprintf(g->errmsg, sizeof g->errmsg, "%s", rs_errmsg());
        }
        if (rc == RS_OK && !skip) {
            g->state[b] = ZG_WHOLE;
            if (g->nspans < ZG_SPANS) g->spans[g->nspans][0] = t0, g->spans[g->nspans++][1] = t1;
        }
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int zgather_create(ZeroGather **out, Ring *ring, float *params, const Bucket *buckets, int nb, double timeout,
                   ZeroGatherDone done, void *arg) {
    *out = NULL;
    ZeroGather *g = calloc(1, sizeof *g);
    if (!g || !(g->state = calloc((size_t)nb + 1, 1)) || !(g->queue = calloc((size_t)nb + 1, sizeof *g->queue))) {
        if (g) free(g->state);
        free(g);
        return rs_error(RS_ERR_RUNTIME, "zero: out of memory for the gathers of %d layers", nb);
    }
    *g = (ZeroGather){.ring = ring, .params = params, .buckets = buckets, .nb = nb, .timeout = timeout, .done = done,
                      .arg = arg, .state = g->state, .queue = g->queue};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (ring && pthread_create(&g->thread, NULL, zgather_main, g) != 0) {
        zgather_destroy(g);
        return rs_error(RS_ERR_RUNTIME, "zero: cannot start the gather thread");
    }
    g->started = ring != NULL;
    *out = g;
    return RS_OK;
}

void zgather_ask(ZeroGather *g, int b) {
    pthread_mutex_lock(&g->mu);
    if (g->state[b] == ZG_BACK) {
        if (!g->ring) g->state[b] = ZG_WHOLE; /* one rank: its parameters are all its own */
        else {
            g->state[b] = ZG_ASKED;
            g->queue[g->tail] = b;
            g->tail = (g->tail + 1) % (g->nb + 1);
            pthread_cond_broadcast(&g->cv);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

/* Waits on g->cv (locked) until pred holds, an error, or the timeout: 0, or RS_ERR_*. */
static int zgather_until(ZeroGather *g, int b) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(g->timeout + 1);
    for (;;) {
        int ready = b >= 0 ? g->state[b] == ZG_WHOLE : g->head == g->tail && !g->running;
        if (g->err) return rs_error(g->err, "%s", g->errmsg);
        if (ready) return RS_OK;
        if (b >= 0 && g->state[b] == ZG_BACK)
            return rs_error(RS_ERR_RUNTIME, "zero: a wait for layer bucket %d, which nobody asked for", b);
        if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) != 0)
            return rs_error(RS_ERR_PEER, "zero: a parameter gather took more than %.0f s (is every rank alive?)", g->timeout);
    }
}

int zgather_wait(ZeroGather *g, int b) {
    pthread_mutex_lock(&g->mu);
    int rc = zgather_until(g, b);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int zgather_idle(ZeroGather *g) { return zgather_wait(g, -1); }

int zgather_whole(const ZeroGather *g, int b) {
    pthread_mutex_lock((pthread_mutex_t *)&g->mu);
    int w = g->state[b] == ZG_WHOLE;
    pthread_mutex_unlock((pthread_mutex_t *)&g->mu);
    return w;
}

void zgather_forget(ZeroGather *g, int b) {
    pthread_mutex_lock(&g->mu);
    if (g->state[b] == ZG_WHOLE) g->state[b] = ZG_BACK;
    pthread_mutex_unlock(&g->mu);
}

int zgather_spans(ZeroGather *g, double (*out)[2], int max) {
    pthread_mutex_lock(&g->mu);
    int n = g->nspans < max ? g->nspans : max;
    if (n > 0) memcpy(out, g->spans, (size_t)n * sizeof g->spans[0]);
    g->nspans = 0;
    pthread_mutex_unlock(&g->mu);
    return n;
}

void zgather_destroy(ZeroGather *g) {
    if (!g) return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL); /* at most one ring wait (its timeout) when a peer died */
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->state);
    free(g->queue);
    free(g);
}
