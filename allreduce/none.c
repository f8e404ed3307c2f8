/* none.c - the "none" back end: no communication, the local optimizer step (one-rank baselines) */
#include "../common/sync.h"
#include "../common/clock.h"
#include "../common/err.h"

#include <stdlib.h>

typedef struct {
    SyncJob job;
} NoneState;

static int none_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    if (job->world > 1)
        return rs_error(RS_ERR_INPUT, "--sync none runs one rank only (got %d ranks); use ring, nccl or ps", job->world);
    NoneState *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "out of memory");
    s->job = *job;
    *state = s;
    return RS_OK;
}

static int none_connect(void *state, char *const *endpoints, int n) { return RS_OK; }
static int none_broadcast(void *state) { return RS_OK; }
static int none_allreduce(void *state, float *buf, size_t count) { return RS_OK; }
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

static void none_traffic(void *state, SyncTraffic *out) { *out = (SyncTraffic){.transport = ""}; }
static void none_destroy(void *state) { free(state); }

static const SyncOps none_ops = {
    .name = "none",
    .init = none_init,
    .connect = none_connect,
    .broadcast_params = none_broadcast,
    .bucket_ready = none_bucket_ready,
    .finish = none_finish,
    .allreduce = none_allreduce,
    .traffic = none_traffic,
    .destroy = none_destroy,
    .close = NULL, /* no peers; the optional ops are unused */
    .begin_step = NULL,
    .scatter_batch = NULL,
    .loss = NULL,
};

const SyncOps *sync_none(void) { return &none_ops; }
