/* engine.c - the training engine: bucket hand-over, the communication thread, host staging, the optimizer and the per-step timeline, for every back end */
/*
 * Threads. The caller's (compute) thread owns every device call. A host back end's exchange
 * (start, poll, end_step) runs on the engine's communication thread, which touches host memory
 * only; the compute thread stages a bucket to pinned host memory (where the device's memory is
 * not host-visible) before it hands the bucket over, and copies the results back after the
 * last bucket. A device back end (nccl) is called on the compute thread: start enqueues, the
 * wait at the step's end polls.
 *
 * The communication thread's loop: start every bucket handed over, in order; while buckets
 * started are not done, poll the oldest (back ends with poll: ps) for a millisecond at a time,
 * so that a bucket handed over meanwhile is started at once; after the last bucket, end_step.
 * A failure stops the step: later buckets are skipped, and the compute thread's wait returns
 * the first error.
 */
#define _GNU_SOURCE
#include "engine.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../net/ctrl.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "trace.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Communication intervals a step may record beside its buckets' (Engine.ivals). */
#define ENGINE_IVALS (2 * MODEL_MAX_LAYERS + 72)

struct Engine {
    EngineArgs a;
    const SyncOps *ops;
    void *st;                  /* the back end's state */
    void *dst;                 /* the driver's state */
    SyncJob job;
    Ctrl *ctrl;
    Bucket *buckets;
    int nb;
    int on_host;               /* a host back end whose buffers are the model's (host-visible device) */
    float *stage_g, *stage_p;  /* pinned host mirrors of the gradients and (updates) the parameters */
    size_t stage_bytes;
    double *offset, *uncert;   /* rank 0: members' clock offsets */
    DevEvent *ev[4];
    /* the step (compute thread) */
    int step, next_bucket, nsteps;
    StepTimes *times;
    double ivals[ENGINE_IVALS][2]; /* communication intervals of the step beside the buckets': a driver's, and the
                                    * gathers of a back end's param_need (up to 2 a layer and one at each pass's end) */
    int nivals;
    double gather_s;           /* the step's seconds in the back end's param_need (all its passes) */
    /* the communication thread and the step's buckets, guarded by mu */
    pthread_t thread;
    int started_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int handed, begun, done, ended, stop, cur_step;
    int err;
    char errmsg[1024];
    double *t0, *t1;           /* [nb] each bucket's communication interval (clock_now) */
    double (*iv)[2];           /* [nb + 64] scratch of engine_comm_total (no allocation per step) */
    double t_begin;            /* when the first step could start (--time-budget counts from it) */
    /* --accum-steps K > 1: the first K-1 micro-batches' gradients, summed (MEM_GRADS) */
    float *acc;
    int micro;                 /* micro-batches of the step done so far */
    double mark;               /* when the caller began staging the current micro-batch */
    float *vote;               /* --time-budget in lockstep: one float on the device (MEM_COMM) */
    int fp8;                   /* the wire is FP8: an infinite gradient is sent as NaN (engine_inf_to_nan) */
    int inf_step;              /* RINGSIDE_TEST_INF_GRAD: the step whose gradient gets an Inf here; -1 none */
    int inf_said;              /* the first such gradient was logged */
};

/* ---- pointers ------------------------------------------------------------------------------- */

/* Where bucket b's gradients are exchanged from and its result lands. */
static void engine_slices(Engine *e, int b, float **grad, float **out) {
    Model *m = e->a.model;
    const Bucket *bk = &e->buckets[b];
    if (e->ops->place == SYNC_ON_DEVICE || e->on_host) {
        *grad = m->grads + bk->lo;
        *out = e->ops->result == SYNC_SUMS ? *grad : m->params + bk->lo;
    } else {
        *grad = e->stage_g + bk->lo;
        *out = e->ops->result == SYNC_SUMS ? *grad : e->stage_p + bk->lo;
    }
}

/* ---- the communication thread --------------------------------------------------------------- */

static void engine_fail_locked(Engine *e, int rc, int b) {
    if (e->err) return;
    e->err = rc;
    snprintf(e->errmsg, sizeof e->errmsg, "%s", rs_errmsg());
    (void)b;
}

static void *engine_thread_main(void *arg) {
    Engine *e = arg;
    const SyncOps *o = e->ops;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && e->begun == e->handed && e->done == e->begun && !(e->done == e->nb && !e->ended))
            pthread_cond_wait(&e->cv, &e->mu);
        if (e->stop) break;
        int step = e->cur_step;
        if (e->done == e->nb && !e->ended) { /* the step's last bucket is done */
            int skip = e->err != 0;
            pthread_mutex_unlock(&e->mu);
            int rc = !skip && o->end_step ? o->end_step(e->st, step) : RS_OK;
            pthread_mutex_lock(&e->mu);
            if (rc) engine_fail_locked(e, rc, -1);
            e->ended = 1;
            pthread_cond_broadcast(&e->cv);
            continue;
        }
        if (e->begun < e->handed) { /* start the next bucket */
            int b = e->begun++, skip = e->err != 0;
            pthread_mutex_unlock(&e->mu);
            float *grad, *out;
            engine_slices(e, b, &grad, &out);
            double t = clock_now();
            int rc = skip ? RS_OK : o->start(e->st, step, b, grad, out);
            double t_end = clock_now();
            pthread_mutex_lock(&e->mu);
            e->t0[b] = t;
            if (rc) engine_fail_locked(e, rc, b);
            if (rc || skip || !o->poll) {
                e->t1[b] = t_end;
                e->done++;
            }
            pthread_cond_broadcast(&e->cv);
            continue;
        }
        /* started buckets are not done: wait a little for the oldest, then look again */
        int b = e->done;
        pthread_mutex_unlock(&e->mu);
        int r = e->err ? 1 : o->poll(e->st, b, 1);
        double t = clock_now();
        pthread_mutex_lock(&e->mu);
        if (r < 0) engine_fail_locked(e, -r, b);
        if (r != 0) {
            e->t1[b] = t;
            e->done++;
            if (r < 0) /* the rest are skipped */
                while (e->done < e->begun) e->t1[e->done] = t, e->done++;
            pthread_cond_broadcast(&e->cv);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* An FP8 wire has no infinity: encoding saturates +-Inf to the largest finite code, scaled by the
 * message's finite amax, so an overflow in backward would reach the parameters as an ordinary
 * gradient and the run would go on as if nothing had happened. The FP8 formats do carry NaN, so
 * each infinite element of x[0..n) becomes NaN before it is encoded: the sum and every rank's
 * parameters are then not finite, as an Inf makes them under fp32, bf16 and fp16, and the next
 * step's loss marks the run diverged at the same step as there. Returns how many it changed. */
static size_t engine_inf_to_nan(float *x, size_t n) {
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) { /* a read-only pass first (vectorised): infinities are rare */
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        hits += (u & 0x7fffffffu) == 0x7f800000u;
    }
    for (size_t i = 0; hits && i < n; i++)
        if (isinf(x[i])) x[i] = NAN;
    return hits;
}

/* Hands bucket b to the back end: staged to host first where needed; a device back end starts
 * it here. */
static int engine_hand(Engine *e, int b) {
    Model *m = e->a.model;
    const Bucket *bk = &e->buckets[b];
    if (e->acc) /* the step's last micro-batch: the bucket gets the others' sum before it leaves */
        m->dev->k->axpy(m->dev->kctx, m->grads + bk->lo, 1.0f, e->acc + bk->lo, bk->hi - bk->lo);
    if (b == 0 && e->step == e->inf_step) /* the tests' overflow in backward */
        m->dev->k->fill(m->dev->kctx, m->grads + bk->hi - 1, -INFINITY, 1);
    if (e->ops->place == SYNC_ON_DEVICE) {
        float *grad, *out;
        engine_slices(e, b, &grad, &out);
        e->t0[b] = clock_now();
        return e->ops->start(e->st, e->step, b, grad, out);
    }
    if (!e->on_host) RS_TRY(device_d2h(m->dev, e->stage_g + bk->lo, m->grads + bk->lo, (bk->hi - bk->lo) * sizeof(float)));
    if (e->fp8) {
        float *grad, *out;
        engine_slices(e, b, &grad, &out);
        size_t hits = engine_inf_to_nan(grad, bk->hi - bk->lo);
        if (hits && !e->inf_said++)
            log_warn("rank %d: step %d: %zu gradient element%s infinite (an overflow in backward), which --wire %s "
                     "would deliver as a finite value: sent as NaN, so the run diverges as under fp32", e->a.rank,
                     e->step, hits, hits > 1 ? "s are" : " is", e->a.cfg->wire);
    }
    pthread_mutex_lock(&e->mu);
    e->handed++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return RS_OK;
}

/* Backward's callback: hands over every bucket whose slice is complete (layer l and above). */
static int engine_layer_done(void *arg, int l) {
    Engine *e = arg;
    if (!e->a.cfg->overlap) return RS_OK;
    size_t from = e->a.model->off[l];
    while (e->next_bucket < e->nb && e->buckets[e->next_bucket].lo >= from) RS_TRY(engine_hand(e, e->next_bucket++));
    return RS_OK;
}

/* Waits until every bucket of the step is done (host back ends: the thread has also called
 * end_step). Bounded: back ends time out their own waits; this guard ends a wait in which no
 * bucket finished for 2 timeouts. */
static int engine_wait_host(Engine *e) {
    double limit = 2 * e->a.cfg->timeout + 5, last = clock_now();
    int last_done = -1, rc = RS_OK;
    pthread_mutex_lock(&e->mu);
    while (!e->ended) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
        if (e->done != last_done) {
            last_done = e->done;
            last = clock_now();
        } else if (clock_now() - last > limit) {
            rc = rs_error(RS_ERR_PEER, "rank %d: step %d stalled: %d of %d buckets done and none for %.0f s",
                          e->a.rank, e->step, e->done, e->nb, limit);
            break;
        }
    }
    if (rc == RS_OK && e->err) rc = rs_error(e->err, "%s", e->errmsg);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* A device back end: polls every bucket, then end_step (on this thread). */
static int engine_wait_device(Engine *e) {
    for (int b = 0; b < e->nb; b++) {
        int r;
        while ((r = e->ops->poll ? e->ops->poll(e->st, b, 1) : 1) == 0) {
        }
        if (r < 0) return -r;
        e->t1[b] = clock_now();
    }
    if (e->ops->bucket_time) /* the device's own intervals */
        for (int b = 0; b < e->nb; b++) RS_TRY(e->ops->bucket_time(e->st, b, &e->t0[b], &e->t1[b]));
    return e->ops->end_step ? e->ops->end_step(e->st, e->step) : RS_OK;
}

/* ---- the timeline ---------------------------------------------------------------------------- */

/* Length of the union of n intervals iv[i] = {t0, t1} (sorted in place by t0: an insertion
 * sort, as they come nearly in order and qsort may allocate its buffer on every step). */
static double engine_union(double (*iv)[2], int n) {
    for (int i = 1; i < n; i++) {
        double x0 = iv[i][0], x1 = iv[i][1];
        int j = i;
        for (; j > 0 && iv[j - 1][0] > x0; j--) iv[j][0] = iv[j - 1][0], iv[j][1] = iv[j - 1][1];
        iv[j][0] = x0, iv[j][1] = x1;
    }
    double total = 0, a = 0, b = 0;
    int open = 0;
    for (int i = 0; i < n; i++) {
        if (iv[i][1] <= iv[i][0]) continue;
        if (!open || iv[i][0] > b) {
            if (open) total += b - a;
            a = iv[i][0], b = iv[i][1], open = 1;
        } else if (iv[i][1] > b) {
            b = iv[i][1];
        }
    }
    return open ? total + b - a : total;
}

static void engine_add_ival(Engine *e, double t0, double t1) {
    if (t1 > t0 && e->nivals < ENGINE_IVALS) e->ivals[e->nivals][0] = t0, e->ivals[e->nivals++][1] = t1;
}

/* comm_total of the step: the buckets' intervals and the driver's. */
static double engine_comm_total(Engine *e) {
    int n = e->nb + e->nivals;
    double (*iv)[2] = e->iv;
    for (int b = 0; b < e->nb; b++) iv[b][0] = e->t0[b], iv[b][1] = e->t1[b];
    for (int i = 0; i < e->nivals; i++) iv[e->nb + i][0] = e->ivals[i][0], iv[e->nb + i][1] = e->ivals[i][1];
    return engine_union(iv, n);
}

static void engine_trace(Engine *e, const char *name, int tid, double t0, double t1) {
    if (e->a.trace && t1 > t0) trace_span(e->a.trace, name, tid, t0 + e->a.wall_offset, t1 + e->a.wall_offset);
}

/* One bucket a layer, from the last (zero's stage 3: a layer is the unit gathered and reduce-
 * scattered, as FSDP's per-layer units are). The count, or -1 on OOM. */
static int engine_plan_layers(const Model *m, Bucket **out) {
    int n = m->nlayers;
    if (!(*out = calloc((size_t)n, sizeof **out))) return -1;
    for (int b = 0; b < n; b++) (*out)[b] = (Bucket){m->off[n - 1 - b], m->off[n - b]};
    return n;
}

/* The model's parameter hook (model.h's param_need), timed: what a back end's gathers take is
 * communication the pass waited on (blocked, comm_total), not compute. */
static int engine_param_need(void *arg, int l) {
    Engine *e = arg;
    double t0 = clock_now();
    int rc = e->ops->param_need(e->st, l);
    double t1 = clock_now();
    if (t1 - t0 > 2e-6) { /* a layer already in place costs a lookup */
        e->gather_s += t1 - t0;
        engine_add_ival(e, t0, t1);
        engine_trace(e, l < 0 ? "reshard" : "gather", 1, t0, t1);
    }
    return rc;
}

int engine_params_full(Engine *e) { return e->st && e->ops->params_full ? e->ops->params_full(e->st) : RS_OK; }

/* ---- the step -------------------------------------------------------------------------------- */

int engine_scatters(const Engine *e) { return e->a.driver && e->a.driver->scatter; }

void engine_step_begin(Engine *e, int step) {
    e->step = step;
    e->micro = 0;
    e->nivals = 0;
    e->gather_s = 0;
    e->mark = clock_now();
    if (step < e->nsteps) e->times[step] = (StepTimes){.start = e->mark};
}

static int engine_health(void *arg);

/* --straggler's sleep after a forward pass; the seconds slept (0 for a rank that is not one),
 * and in *t0 when it began. Slept in slices of at most 50 ms, between which it looks whether
 * the job is still on: rank 0's END on the control plane (it has closed it: the job ended,
 * finished or failed, while this rank slept) or the back end's own failure end it early with
 * RS_ERR_PEER, so that a straggler of an async or ssp job started by hand (no launcher to stop
 * it) does not sleep on for minutes after the job ended. */
static int engine_straggle(Engine *e, double *slept, double *t0) {
    Device *d = e->a.model->dev;
    double ms = config_straggler_ms(e->a.cfg, e->a.rank);
    *slept = *t0 = 0;
    if (ms <= 0) return RS_OK;
    RS_TRY(d->k->sync(d->kctx));
    *t0 = clock_now();
    for (double left = ms / 1e3; left > 0; left = *t0 + ms / 1e3 - clock_now()) {
        double s = left < 0.05 ? left : 0.05;
        struct timespec ts = {0, (long)(s * 1e9)};
        nanosleep(&ts, NULL); /* a signal cuts a slice short: the clock says what is left */
        if (left <= 0.05) break;
        if (e->ctrl && ctrl_ended(e->ctrl))
            return rs_error(RS_ERR_PEER, "rank %d: rank 0 ended the job during --straggler's sleep (step %d, %.1f s "
                            "of %.1f s slept)", e->a.rank, e->step, clock_now() - *t0, ms / 1e3);
        RS_TRY(engine_health(e));
    }
    *slept = clock_now() - *t0;
    return RS_OK;
}

int engine_accumulate(Engine *e, int step, int rows) {
    Model *m = e->a.model;
    Device *d = m->dev;
    int K = e->a.cfg->accum_steps;
    if (step != e->step || step >= e->nsteps || !e->acc || e->micro >= K - 1)
        return rs_error(RS_ERR_RUNTIME, "engine: micro-batch %d of step %d out of order (expected step %d, %d of %d "
                        "micro-batches before the step's last)", e->micro, step, e->step, K - 1, K);
    StepTimes *T = &e->times[step];
    double tf = clock_now();
    T->data += tf - e->mark;
    if (e->micro == 0) { /* the step's loss sums start with its first micro-batch */
        float zero[2] = {0, 0};
        RS_TRY(device_h2d(d, m->stats, zero, sizeof zero));
    }
    double g0 = e->gather_s;
    d->ops->event_record(d, e->ev[0], NULL);
    RS_TRY(model_forward(m, rows));
    model_loss(m, rows);
    d->ops->event_record(d, e->ev[1], NULL);
    double slept, ts0, gf = e->gather_s - g0;
    RS_TRY(engine_straggle(e, &slept, &ts0));
    double tb = clock_now(), g1 = e->gather_s;
    d->ops->event_record(d, e->ev[2], NULL);
    RS_TRY(model_backward(m, rows, NULL, NULL)); /* no hand-over: DDP's no_sync */
    double gb = e->gather_s - g1;
    if (e->micro == 0) d->k->fill(d->kctx, e->acc, 0.0f, m->nparams);
    d->k->axpy(d->kctx, e->acc, 1.0f, m->grads, m->nparams);
    d->ops->event_record(d, e->ev[3], NULL);
    /* a back end's gathers are its waits, not compute (engine_step adds them to blocked) */
    double fwd = d->ops->event_elapsed(d, e->ev[0], e->ev[1]) - gf, bwd = d->ops->event_elapsed(d, e->ev[2], e->ev[3]) - gb;
    fwd = fwd > 0 ? fwd : 0, bwd = bwd > 0 ? bwd : 0;
    T->forward += fwd + slept;
    T->backward += bwd;
    if (e->a.trace) {
        engine_trace(e, "data", 0, e->mark, tf);
        engine_trace(e, "forward", 0, tf, tf + fwd);
        if (ts0 > 0) engine_trace(e, "straggler", 0, ts0, ts0 + slept);
        engine_trace(e, "backward", 0, tb, tb + bwd);
    }
    e->micro++;
    e->mark = clock_now();
    return RS_OK;
}

/* The optimizer over every parameter (grads summed over the step's samples). */
static int engine_optimize(Engine *e, int global_samples, double *secs) {
    Model *m = e->a.model;
    double t0 = clock_now();
    model_optimize(m, 0, m->nparams, e->a.cfg, global_samples > 0 ? 1.0f / (float)global_samples : 0.0f, e->step + 1);
    int rc = m->dev->k->sync(m->dev->kctx);
    *secs = clock_now() - t0;
    return rc;
}

int engine_step(Engine *e, int step, const float *x, const int *y, int rows, int global_samples, int *local_rows) {
    Model *m = e->a.model;
    Device *d = m->dev;
    const StepDriver *drv = e->a.driver;
    if (step != e->step || step >= e->nsteps)
        return rs_error(RS_ERR_RUNTIME, "engine: step %d out of order (expected %d of %d)", step, e->step, e->nsteps);
    if (e->micro != e->a.cfg->accum_steps - 1)
        return rs_error(RS_ERR_RUNTIME, "engine: step %d after %d of its %d micro-batches", step, e->micro,
                        e->a.cfg->accum_steps);
    StepTimes *T = &e->times[step];
    double t_data = clock_now();
    T->data += t_data - e->mark;
    e->next_bucket = 0;
    pthread_mutex_lock(&e->mu);
    e->handed = e->begun = e->done = e->ended = 0;
    e->cur_step = step;
    pthread_mutex_unlock(&e->mu);
    if (e->ops->begin_step) RS_TRY(e->ops->begin_step(e->st, step, global_samples));
    if (e->micro == 0) {
        float zero[2] = {0, 0};
        RS_TRY(device_h2d(d, m->stats, zero, sizeof zero));
    }
    double blocked = 0, extra_fwd = 0, arrival = 0;
    DriverSpan sp = {0};
    *local_rows = rows;
    if (engine_scatters(e)) {
        RS_TRY(drv->scatter(e->dst, step, x, y, rows, local_rows, &sp));
        blocked += sp.blocked;
        engine_add_ival(e, sp.comm_t0, sp.comm_t1);
        engine_trace(e, "scatter", 1, sp.comm_t0, sp.comm_t1);
    }
    int B = *local_rows;
    double tf = clock_now(), g0 = e->gather_s;
    d->ops->event_record(d, e->ev[0], NULL);
    RS_TRY(model_forward(m, B));
    if (!(drv && drv->loss)) model_loss(m, B);
    d->ops->event_record(d, e->ev[1], NULL);
    double gf = e->gather_s - g0;
    double slept, ts0; /* a slow worker on purpose: its forward takes this much longer */
    RS_TRY(engine_straggle(e, &slept, &ts0));
    extra_fwd += slept;
    double tl0 = clock_now(), tl1 = tl0;
    if (drv && drv->loss) {
        DriverSpan ls = {0};
        RS_TRY(drv->loss(e->dst, B, &ls));
        tl1 = clock_now();
        blocked += ls.blocked;
        extra_fwd += ls.compute;
        arrival = ls.arrival;
        engine_add_ival(e, ls.comm_t0, ls.comm_t1);
        engine_trace(e, "gather+loss", 1, ls.comm_t0, ls.comm_t1);
    }
    d->ops->event_record(d, e->ev[2], NULL);
    double g1 = e->gather_s;
    RS_TRY(model_backward(m, B, engine_layer_done, e));
    d->ops->event_record(d, e->ev[3], NULL);
    double gb = e->gather_s - g1;
    while (e->next_bucket < e->nb) RS_TRY(engine_hand(e, e->next_bucket++));
    /* the step's synchronisation: wait for every bucket */
    double tw0 = clock_now();
    if (!arrival) arrival = tw0;
    RS_TRY(e->ops->place == SYNC_ON_DEVICE ? engine_wait_device(e) : engine_wait_host(e));
    double tw1 = clock_now();
    blocked += tw1 - tw0;
    if (e->ops->comm_spans) /* a back end's own communication beside the buckets (stage 3's gathers) */
        e->nivals += e->ops->comm_spans(e->st, e->ivals + e->nivals, ENGINE_IVALS - e->nivals);
    if (e->ops->place == SYNC_ON_HOST && !e->on_host) { /* the results back to the device */
        if (e->ops->result == SYNC_SUMS) RS_TRY(device_h2d(d, m->grads, e->stage_g, e->stage_bytes));
        else if (!(e->a.driver && e->a.rank != 0)) RS_TRY(device_h2d(d, m->params, e->stage_p, e->stage_bytes));
    }
    double opt = 0;
    if (e->ops->result == SYNC_SUMS) RS_TRY(engine_optimize(e, global_samples, &opt));
    double t_end = clock_now();
    double fwd = d->ops->event_elapsed(d, e->ev[0], e->ev[1]) - gf, bwd = d->ops->event_elapsed(d, e->ev[2], e->ev[3]) - gb;
    T->forward += (fwd > 0 ? fwd : 0) + extra_fwd; /* += : the step's earlier micro-batches */
    T->backward += bwd > 0 ? bwd : 0;
    T->optimizer = opt;
    T->blocked = blocked + e->gather_s; /* and every pass's waits for a back end's gathers */
    T->arrival = arrival;
    T->comm_total = engine_comm_total(e);
    T->step = t_end - T->start;
    e->step = step + 1;
    /* the trace: compute spans on tid 0, communication on tid 1 (idle spans come from rank 0) */
    if (e->a.trace) {
        engine_trace(e, "data", 0, e->mark, t_data);
        engine_trace(e, "forward", 0, tf, tf + (fwd > 0 ? fwd : 0));
        if (ts0 > 0) engine_trace(e, "straggler", 0, ts0, tl0);
        if (tl1 > tl0) engine_trace(e, "loss", 0, tl0, tl1);
        engine_trace(e, "backward", 0, tl1, tl1 + T->backward);
        engine_trace(e, "wait", 0, tw0, tw1);
        if (opt > 0) engine_trace(e, "optimizer", 0, t_end - opt, t_end);
        if (e->ops->place == SYNC_ON_HOST || !e->ops->bucket_time)
            for (int b = 0; b < e->nb; b++) engine_trace(e, "comm", 1, e->t0[b], e->t1[b]);
    }
    return RS_OK;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

static int engine_health(void *arg) {
    Engine *e = arg;
    return e->ops->health ? e->ops->health(e->st) : RS_OK;
}

/* Rank 0's parameters to every rank, through the back end's memory. */
static int engine_broadcast(Engine *e) {
    Model *m = e->a.model;
    size_t bytes = m->nparams * sizeof(float);
    if (e->ops->place == SYNC_ON_DEVICE || e->on_host) return e->ops->broadcast(e->st, m->params, m->nparams);
    if (e->a.rank == 0) RS_TRY(device_d2h(m->dev, e->stage_g, m->params, bytes));
    RS_TRY(e->ops->broadcast(e->st, e->stage_g, m->nparams));
    if (e->a.rank != 0 && !(e->a.driver && e->a.driver->scatter)) RS_TRY(device_h2d(m->dev, m->params, e->stage_g, bytes));
    return RS_OK;
}

/* Pinned host memory for communication, counted under MEM_COMM; NULL with rs_errmsg() set. */
static float *engine_host_alloc(Engine *e, size_t bytes) { return device_host_alloc(e->a.dev, bytes, MEM_COMM); }

static void engine_host_free(Engine *e, float *p) { device_host_free(e->a.dev, p, e->stage_bytes, MEM_COMM); }

/* The tests' hook RINGSIDE_TEST_INF_GRAD=RANK:STEP: rank RANK's gradient gets one -Inf element at
 * step STEP, as an overflow in backward would leave it: the last of its first bucket, the output
 * layer's last bias, which the update makes +Inf, so that the next step's loss is not finite. The
 * step for this rank, or -1 (unset, another rank, or not RANK:STEP). */
static int engine_test_inf_step(int rank) {
    const char *v = getenv("RINGSIDE_TEST_INF_GRAD");
    int r, step, used = 0;
    if (!v || sscanf(v, "%d:%d%n", &r, &step, &used) != 2 || v[used] || step < 0) return -1;
    return r == rank ? step : -1;
}

int engine_create(Engine **out, const EngineArgs *a) {
    *out = NULL;
    Engine *e = calloc(1, sizeof *e);
    if (!e) return rs_error(RS_ERR_RUNTIME, "out of memory");
    e->a = *a;
    e->ops = a->ops;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = RS_OK;
    Model *m = a->model;
    e->nsteps = a->steps;
    e->nb = a->layer_buckets ? engine_plan_layers(m, &e->buckets) : sync_plan_run(m->nparams, a->cfg, &e->buckets);
    e->times = calloc((size_t)(a->steps > 0 ? a->steps : 1), sizeof *e->times);
    e->t0 = e->nb > 0 ? calloc((size_t)e->nb, sizeof *e->t0) : NULL;
    e->t1 = e->nb > 0 ? calloc((size_t)e->nb, sizeof *e->t1) : NULL;
    e->iv = e->nb >= 0 ? calloc((size_t)e->nb + ENGINE_IVALS, sizeof *e->iv) : NULL;
    if (e->nb < 0 || !e->times || !e->t0 || !e->t1 || !e->iv) {
        rc = rs_error(RS_ERR_RUNTIME, "out of memory for %d steps", a->steps);
        goto err;
    }
    /* the spans the steps will record (engine_step's up to 9 + a comm span per bucket, and a
     * server's reduce+update per bucket and worker), reserved now rather than grown in the loop */
    if (a->trace && e->nb > 0)
        trace_reserve(a->trace, (long)(a->steps > 0 ? a->steps : 1) * (16 + (long)e->nb * (1 + (a->world > 0 ? a->world : 1))));
    for (int i = 0; i < 4; i++)
        if (!(e->ev[i] = a->dev->ops->event_create(a->dev))) {
            rc = RS_ERR_RUNTIME;
            goto err;
        }
    e->on_host = a->ops->place == SYNC_ON_HOST && a->dev->host_visible;
    e->stage_bytes = m->nparams * sizeof(float);
    if (a->ops->place == SYNC_ON_HOST && !e->on_host) { /* one rank too: broadcast, hand and the copy back use it */
        if (!(e->stage_g = engine_host_alloc(e, e->stage_bytes))) {
            rc = RS_ERR_RUNTIME;
            goto err;
        }
        if (a->ops->result == SYNC_UPDATES && !(e->stage_p = engine_host_alloc(e, e->stage_bytes))) {
            rc = RS_ERR_RUNTIME;
            goto err;
        }
    }
    const RankEnv *env = a->env;
    e->job = (SyncJob){.cfg = a->cfg, .dev = a->dev, .rank = a->rank, .world = a->world, .local_rank = a->local_rank,
                       .local_world = a->local_world, .zctx = a->zctx, .addr = env->bind, .token = env->token,
                       .buckets = e->buckets, .nbuckets = e->nb, .nparams = m->nparams, .timeout = a->cfg->timeout,
                       .trace = a->trace, .dataparallel = a->driver != NULL, .model = m};
    char canon[8192], dep[1024] = "", **extras = NULL;
    config_canonical(a->cfg, canon, sizeof canon);
    if (a->driver && (rc = a->driver->init(&e->job, m, engine_health, e, &e->dst, dep, sizeof dep))) goto err;
    if ((rc = sync_start(a->ops, &e->job, env, canon, a->driver ? dep : NULL, &e->st, &e->ctrl, &extras))) goto err;
    if (a->driver) {
        rc = a->driver->connect(e->dst, extras, e->ctrl ? ctrl_members(e->ctrl) : 1);
        for (int i = 0; extras && i < (e->ctrl ? ctrl_members(e->ctrl) : 1); i++) free(extras[i]);
        free(extras);
        if (rc) goto err;
    }
    if (e->ctrl) { /* every worker's clock against rank 0's, for the idle time */
        if (a->rank == 0 && (!(e->offset = calloc((size_t)a->world, sizeof *e->offset)) ||
                             !(e->uncert = calloc((size_t)a->world, sizeof *e->uncert)))) {
            rc = rs_error(RS_ERR_RUNTIME, "out of memory");
            goto err;
        }
        if ((rc = ctrl_clock_offsets(e->ctrl, a->world, 8, e->offset, e->uncert))) goto err;
    }
    if ((rc = engine_broadcast(e))) goto err;
    if (a->ops->param_need) m->param_need = engine_param_need, m->param_arg = e;
    if (a->rank != 0) model_optimizer_reset(m);
    if ((rc = m->dev->k->sync(m->dev->kctx))) goto err;
    if (a->driver && a->driver->hello && (rc = a->driver->hello(e->dst))) goto err;
    if (a->ops->place == SYNC_ON_HOST && e->nb > 0) {
        if (pthread_create(&e->thread, NULL, engine_thread_main, e) != 0) {
            rc = rs_error(RS_ERR_RUNTIME, "cannot start the communication thread");
            goto err;
        }
        e->started_thread = 1;
    }
    if (a->cfg->accum_steps > 1 && !(e->acc = device_alloc(a->dev, m->nparams * sizeof(float), MEM_GRADS))) {
        rc = RS_ERR_RUNTIME;
        goto err;
    }
    if (a->cfg->time_budget > 0 && config_lockstep(a->cfg) && !(e->vote = device_alloc(a->dev, sizeof(float), MEM_COMM))) {
        rc = RS_ERR_RUNTIME;
        goto err;
    }
    CodecType wire = CODEC_F32;
    e->fp8 = codec_parse(a->cfg->wire, &wire) == 0 && codec_is_fp8(wire);
    e->inf_step = engine_test_inf_step(a->rank);
    e->t_begin = clock_now();
    *out = e;
    return RS_OK;
err:
    if (rc == RS_OK) rc = RS_ERR_RUNTIME;
    {
        char why[1024];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        engine_free(e);
        rs_error(rc, "%s", why);
    }
    return rc;
}

int engine_should_stop(Engine *e, int budget_spent, int *stop) {
    double budget = e->a.cfg->time_budget;
    int mine = budget_spent || (budget > 0 && clock_now() - e->t_begin >= budget);
    *stop = mine;
    if (!config_lockstep(e->a.cfg)) /* at its own pace: alone, and the servers stop counting on it */
        return mine && e->ops->close ? e->ops->close(e->st) : RS_OK;
    if (!e->vote || !e->ops->allreduce) return RS_OK;
    float v = (float)mine; /* every rank's verdict summed: anyone past the budget stops everyone */
    RS_TRY(device_h2d(e->a.dev, e->vote, &v, sizeof v));
    RS_TRY(e->ops->allreduce(e->st, e->vote, 1));
    RS_TRY(device_d2h(e->a.dev, &v, e->vote, sizeof v));
    *stop = v > 0.5f;
    return RS_OK;
}

int engine_progress(const Engine *e, long long *applied, int *staleness) {
    *applied = 0;
    *staleness = 0;
    if (!e->st || !e->ops->progress) return 0;
    e->ops->progress(e->st, applied, staleness);
    return 1;
}

/* ---- accessors and the end ----------------------------------------------------------------- */

const StepTimes *engine_times(const Engine *e, int *n) {
    *n = e->step < e->nsteps ? e->step : e->nsteps;
    return e->times;
}

void engine_traffic(const Engine *e, SyncTraffic *out) {
    *out = (SyncTraffic){.transport = ""};
    if (e->st) e->ops->traffic(e->st, out);
    if (e->dst && e->a.driver->traffic) e->a.driver->traffic(e->dst, out);
}

void engine_server_busy(const Engine *e, double *busy_s, long long *steps) {
    *busy_s = 0;
    *steps = 0;
    if (e->st && e->ops->server_busy) e->ops->server_busy(e->st, busy_s, steps);
}

Ctrl *engine_ctrl(const Engine *e) { return e->ctrl; }

void engine_clock_offset(const Engine *e, int member, double *offset_s, double *uncertainty_s) {
    *offset_s = *uncertainty_s = 0;
    if (e->offset && member >= 0 && member < e->a.world) {
        *offset_s = e->offset[member];
        *uncertainty_s = e->uncert[member];
    }
}

const Bucket *engine_buckets(const Engine *e, int *n) {
    *n = e->nb;
    return e->buckets;
}

void engine_resume_at(Engine *e, int step) { e->step = step; }

int engine_checkpoint_servers(const Engine *e) {
    return e->st && e->ops->checkpoint_servers ? e->ops->checkpoint_servers(e->st) : 0;
}

int engine_close(Engine *e) { return e->st && e->ops->close ? e->ops->close(e->st) : RS_OK; }

void engine_free(Engine *e) {
    if (!e) return;
    if (e->started_thread) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL); /* at most one back-end wait (its timeout) when a peer died */
    }
    device_free(e->a.dev, e->vote, sizeof(float), MEM_COMM);
    device_free(e->a.dev, e->acc, e->a.model->nparams * sizeof(float), MEM_GRADS);
    if (e->dst) e->a.driver->destroy(e->dst);
    if (e->a.model->param_arg == e) e->a.model->param_need = NULL, e->a.model->param_arg = NULL;
    if (e->st || e->ops) e->ops->destroy(e->st); /* before the staging: it waits for ZeroMQ to let go */
    ctrl_close(e->ctrl);
    engine_host_free(e, e->stage_g);
    engine_host_free(e, e->stage_p);
    for (int i = 0; i < 4; i++)
        if (e->ev[i]) e->a.dev->ops->event_destroy(e->a.dev, e->ev[i]);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->buckets);
    free(e->times);
    free(e->t0);
    free(e->t1);
    free(e->iv);
    free(e->offset);
    free(e->uncert);
    free(e);
}
