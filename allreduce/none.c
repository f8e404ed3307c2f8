/* none.c - the "none" back end: no communication (one-rank baselines; the engine runs the optimizer) */
#include "allreduce.h"
#include "../base/err.h"

#include <stdlib.h>

static int none_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (job->world > 1)
        return rs_error(RS_ERR_INPUT, "--sync none runs one rank only (got %d ranks); use ring, nccl or ps", job->world);
    return RS_OK;
}

static int none_connect(void *state, char *const *endpoints, int n) { return RS_OK; }
static int none_broadcast(void *state, float *buf, size_t count) { return RS_OK; }
static int none_start(void *state, int step, int b, float *grad, float *out) { return RS_OK; }
static int none_allreduce(void *state, float *buf, size_t count) { return RS_OK; }
static void none_traffic(void *state, SyncTraffic *out) { *out = (SyncTraffic){.transport = ""}; }
static void none_destroy(void *state) {}

static const SyncOps none_ops = {
    .name = "none",
    .place = SYNC_ON_DEVICE, /* nothing to stage: the sum of one rank is its own gradient */
    .result = SYNC_SUMS,
    .init = none_init,
    .connect = none_connect,
    .broadcast = none_broadcast,
    .start = none_start,
    .allreduce = none_allreduce,
    .traffic = none_traffic,
    .destroy = none_destroy,
};

const SyncOps *sync_none(void) { return &none_ops; }
