/* none.c - the "none" back end: no communication, the local optimizer step (one-rank baselines) */
#include "../common/sync.h"
#include "../common/clock.h"
#include "../common/err.h"

#include <stdlib.h>

typedef struct {
    SyncJob job;
} NoneState;

static int none_init(const SyncJob *job, void **state) {
    if (job->world > 1)
        return rs_error(RS_ERR_INPUT, "--sync none runs one rank only (got %d ranks); use ring, nccl or ps", job->world);
    NoneState *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "out of memory");
    s->job = *job;
    *state = s;
    return RS_OK;
}

static int none_broadcast(void *state) { return RS_OK; }
static int none_bucket_ready(void *state, int b) { return RS_OK; }

static int none_finish(void *state, int step, int global_samples, SyncStep *out) {
    NoneState *s = state;
    Model *m = s->job.model;
    double t0 = clock_now();
    float scale = global_samples > 0 ? 1.0f / (float)global_samples : 0.0f;
    model_sgd(m, 0, m->nparams, s->job.cfg, scale);
    int rc = m->dev->k->sync(m->dev->kctx);
    out->comm_s = 0;
    out->idle_s = 0;
    out->optimizer_s = clock_now() - t0;
    return rc;
}

static void none_traffic(void *state, SyncTraffic *out) { *out = (SyncTraffic){0}; }
static void none_destroy(void *state) { free(state); }

static const SyncOps none_ops = {"none", none_init, none_broadcast, none_bucket_ready,
                                 none_finish, none_traffic, none_destroy};

const SyncOps *sync_none(void) { return &none_ops; }
