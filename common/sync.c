/* sync.c - the registry of gradient-sync back ends and the bucket planner */
#include "sync.h"
#include "ctrl.h"
#include "err.h"
#include "../ps/ps.h"

#include <stdlib.h>
#include <string.h>

typedef const SyncOps *(*SyncGetter)(void);

static const struct {
    const char *name;
    SyncGetter get;
} sync_registry[] = {
    {"none", sync_none},
    {"ring", sync_ring},
    {"nccl", sync_nccl},
    {"ps", sync_ps},
    {"student", sync_student},
};

const SyncOps *sync_find(const char *name) {
    char names[256] = "";
    for (size_t i = 0; i < sizeof sync_registry / sizeof sync_registry[0]; i++) {
        const SyncOps *ops = sync_registry[i].get();
        if (!strcmp(sync_registry[i].name, name)) {
            if (!ops) {
                rs_error(RS_ERR_INPUT, "--sync %s: not in this build", name);
                return NULL;
            }
            return ops;
        }
        if (ops) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, sync_registry[i].name, sizeof names - strlen(names) - 1);
        }
    }
    rs_error(RS_ERR_INPUT, "--sync '%s': unknown (this build has: %s)", name, names);
    return NULL;
}

int sync_plan_buckets(size_t nparams, double bucket_bytes, Bucket **out) {
    size_t per = (size_t)(bucket_bytes / sizeof(float));
    if (per < 1) per = 1;
    int n = (int)((nparams + per - 1) / per);
    if (n < 1) n = 1;
    Bucket *b = calloc((size_t)n, sizeof *b);
    if (!b) return -1;
    for (int i = 0; i < n; i++) {
        size_t hi = nparams - (size_t)i * per;
        b[i].hi = hi;
        b[i].lo = hi > per ? hi - per : 0;
    }
    *out = b;
    return n;
}

int sync_start(const SyncOps *ops, const SyncJob *job, const struct RankEnv *env, const char *canonical,
               void **state, struct Ctrl **ctrl) {
    char endpoint[1024] = "";
    *ctrl = NULL;
    RS_TRY(ops->init(job, state, endpoint, sizeof endpoint));
    if (!env->launched) {
        char *one[1] = {endpoint};
        return ops->connect(*state, one, 1);
    }
    RS_TRY(ctrl_join(ctrl, env, job->zctx, canonical, endpoint, job->timeout));
    return ops->connect(*state, ctrl_endpoints(*ctrl), ctrl_members(*ctrl));
}

static const char *const sync_transports[] = {"", "nccl", "inproc", "shm", "ipc", "tcp"}; /* fastest first */

static int sync_transport_rank(const char *t) {
    for (int i = 1; t && i < (int)(sizeof sync_transports / sizeof *sync_transports); i++)
        if (!strcmp(t, sync_transports[i])) return i;
    return 0;
}

const char *sync_transport_slower(const char *a, const char *b) {
    int ra = sync_transport_rank(a), rb = sync_transport_rank(b);
    return sync_transports[ra > rb ? ra : rb];
}
