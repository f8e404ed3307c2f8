/* sync.c - what every back end's caller shares: the bucket planner, starting a back end on the control plane, transport order */
#include "sync.h"
#include "../net/ctrl.h"
#include "../base/err.h"
#include "../base/log.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

int sync_plan_buckets(size_t nparams, double bucket_bytes, double first_bytes, Bucket **out) {
    size_t per = (size_t)(bucket_bytes / sizeof(float)), first = (size_t)(first_bytes / sizeof(float));
    if (per < 1) per = 1;
    if (first < 1 || first > per) first = per;
    int n = 1;
    if (nparams > first) n += (int)((nparams - first + per - 1) / per);
    Bucket *b = calloc((size_t)n, sizeof *b);
    if (!b) return -1;
    size_t hi = nparams;
    for (int i = 0; i < n; i++) {
        size_t cap = i == 0 ? first : per;
        b[i].hi = hi;
        b[i].lo = hi > cap ? hi - cap : 0;
        hi = b[i].lo;
    }
    *out = b;
    return n;
}

int sync_plan_run(size_t nparams, const Config *cfg, Bucket **out) {
    return sync_plan_buckets(nparams, cfg->bucket_mb * 1048576.0, 1048576.0, out);
}

/* "A\tB" split in place into its two texts (B is "" without a tab). */
static char *sync_split(char *text) {
    char *tab = strchr(text, '\t');
    if (!tab) return text + strlen(text);
    *tab = 0;
    return tab + 1;
}

/* The "host=KEY" of an endpoint text (net/zendpoint.h) into key ("" without one). */
static void sync_text_host(const char *text, char *key, size_t len) {
    const char *h = text ? strstr(text, "host=") : NULL;
    key[0] = 0;
    if (h) snprintf(key, len, "%.*s", (int)strcspn(h + 5, "|\t"), h + 5);
}

/* Member 0, with dedicated servers on a job of several hosts: a server whose host also runs
 * workers was not given a host of its own (srun's block distribution put it with the last
 * node's workers), and those workers reach it over a Unix socket, not the network. Warns
 * naming the server, its address and the workers. */
static void sync_check_servers(const struct RankEnv *env, char *const *eps, int n) {
    char key[64], other[64];
    for (int s = env->world; s < n; s++) {
        sync_text_host(eps[s], key, sizeof key);
        if (!key[0]) continue;
        char with[256] = "";
        int shared = 0, apart = 0;
        for (int m = 0; m < n; m++) {
            if (m == s) continue;
            sync_text_host(eps[m], other, sizeof other);
            if (!other[0] || strcmp(other, key)) {
                apart += other[0] != 0;
                continue;
            }
            if (m >= env->world) continue;
            size_t k = strlen(with);
            if (k < sizeof with - 16) snprintf(with + k, sizeof with - k, "%s%d", shared ? ", " : "", m);
            shared++;
        }
        if (!shared || !apart) continue; /* a host of its own, or a job on one host */
        const char *tcp = strstr(eps[s], "tcp://");
        int alen = tcp ? (int)strcspn(tcp + 6, ":|\t") : 0;
        log_warn("dedicated server %d (task %d%s%.*s) shares its host with worker%s %s, which reach it over a Unix socket, "
                 "not the network: the job spans several hosts but the placement did not give the server one of its own "
                 "(under Slurm: srun --distribution=arbitrary with SLURM_HOSTFILE, as experiments/slurm/ringside.sbatch does)",
                 s - env->world, s, tcp ? ", at " : "", alen, tcp ? tcp + 6 : "", shared > 1 ? "s" : "", with);
    }
}

int sync_start(const SyncOps *ops, const SyncJob *job, const struct RankEnv *env, const char *canonical,
               const char *extra, void **state, struct Ctrl **ctrl, char ***extras) {
    char endpoint[2048] = "";
    *ctrl = NULL;
    if (extras) *extras = NULL;
    RS_TRY(ops->init(job, state, endpoint, 1024));
    if (extra) {
        size_t k = strlen(endpoint);
        snprintf(endpoint + k, sizeof endpoint - k, "\t%s", extra);
    }
    int n = 1;
    char *one[1] = {endpoint}, *const *eps = one;
    if (env->launched) {
        RS_TRY(ctrl_join(ctrl, env, job->zctx, canonical, endpoint, job->timeout));
        eps = ctrl_endpoints(*ctrl);
        n = ctrl_members(*ctrl);
        if (env->member == 0 && env->servers > 0) sync_check_servers(env, eps, n);
    }
    /* every member's text, split into the back end's and the extra one */
    char **mine = calloc((size_t)n, sizeof *mine), **theirs = extra ? calloc((size_t)n, sizeof *theirs) : NULL;
    int rc = mine && (!extra || theirs) ? RS_OK : rs_error(RS_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < n && rc == RS_OK; i++) {
        char *t = strdup(eps[i] ? eps[i] : "");
        if (!t) {
            rc = rs_error(RS_ERR_RUNTIME, "out of memory");
            break;
        }
        char *second = sync_split(t);
        if (theirs && !(theirs[i] = strdup(second))) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        mine[i] = t;
    }
    if (rc == RS_OK) rc = ops->connect(*state, mine, n);
    for (int i = 0; mine && i < n; i++) free(mine[i]);
    free(mine);
    if (rc == RS_OK && extras) *extras = theirs;
    else if (theirs) {
        for (int i = 0; i < n; i++) free(theirs[i]);
        free(theirs);
    }
    return rc;
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

void sync_traffic_counts(const MsgCount *c, SyncTraffic *out) {
    MsgCount v;
    msg_count_read(c, &v);
    out->bytes_sent = v.bytes_sent;
    out->bytes_received = v.bytes_received;
    out->messages_sent = v.messages_sent;
    out->messages_received = v.messages_received;
    out->dropped = v.dropped;
    out->node_sent = v.node_sent;
    out->node_received = v.node_received;
}

void sync_traffic_add(SyncTraffic *out, const SyncTraffic *more) {
    out->bytes_sent += more->bytes_sent;
    out->bytes_received += more->bytes_received;
    out->messages_sent += more->messages_sent;
    out->messages_received += more->messages_received;
    out->dropped += more->dropped;
    out->node_sent += more->node_sent;
    out->node_received += more->node_received;
}

void sync_traffic_sub(SyncTraffic *out, const SyncTraffic *less, unsigned long long times) {
    out->bytes_sent -= times * less->bytes_sent;
    out->bytes_received -= times * less->bytes_received;
    out->messages_sent -= times * less->messages_sent;
    out->messages_received -= times * less->messages_received;
    out->dropped -= times * less->dropped;
    out->node_sent -= times * less->node_sent;
    out->node_received -= times * less->node_received;
}
