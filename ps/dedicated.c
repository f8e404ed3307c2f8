/* dedicated.c - a dedicated parameter-server process: bind, join the control plane, serve, hand rank 0 its report entry */
#include "ps.h"
#include "server.h"
#include "../engine/zctx.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../base/mem.h"
#include "../engine/report.h"
#include "../engine/trace.h"
#include "../net/zendpoint.h"
#include "../engine/config_check.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* This server's entry of the report's "ranks" array: the shape every member's has
 * (engine/report.h), its server id, and its own work per step. */
static cJSON *dedicated_entry(PsServer *s, const RankEnv *env, Device *dev, double serve_s, Ctrl *ctrl) {
    SyncTraffic tr;
    ps_server_traffic(s, &tr);
    tr.transport = ""; /* the slowest of its workers' links: ipc from this host, tcp from another */
    for (int r = 0; r < env->world; r++) tr.transport = sync_transport_slower(tr.transport, zep_peer_via(ctrl_endpoint(ctrl, r)));
    cJSON *o = report_entry(env->member, "server", dev, 0, &tr);
    cJSON_AddNumberToObject(o, "server", env->member - env->world);
    double busy;
    long long steps;
    ps_server_busy(s, &busy, &steps);
    cJSON *ts = cJSON_AddObjectToObject(o, "time_s");
    cJSON_AddNumberToObject(ts, "busy", steps > 0 ? busy / (double)steps : 0); /* per step, as workers' */
    cJSON_AddNumberToObject(ts, "server_busy", steps > 0 ? busy / (double)steps : 0);
    cJSON_AddNumberToObject(ts, "busy_total", busy);
    cJSON_AddNumberToObject(ts, "serve", serve_s);
    cJSON_AddNumberToObject(ts, "steps", (double)steps);
    return o;
}

/* A server process's whole life: byteps, the keys split by BytePS's weights behind the workers'
 * shards; else ps's dedicated servers, the keys by range. */
static int server_run(const Config *cfg, const RankEnv *env, size_t nparams, const char *job, int byteps) {
    int K = env->servers > 0 ? env->servers : cfg->ps_servers, id = env->member - env->world;
    if (nparams == PS_MODEL_KEYS) nparams = config_param_count(cfg);
    Device dev = {0};
    void *zctx = NULL;
    Bucket *buckets = NULL; /* the training partitions (whole buckets without --ps-partition-kb) */
    int *pfirst = NULL;
    PsServer *s = NULL;
    Trace *trace = NULL;
    Ctrl *ctrl = NULL;
    char *canon = NULL, *text = NULL;
    cJSON *entry = NULL;
    int rc = RS_OK;

    if (!strcmp(cfg->ps_mode, "dataparallel")) {
        rc = rs_error(RS_ERR_INPUT, PS_DP_NO_DEDICATED);
        goto err;
    }
    if (id < 0 || id >= K) {
        rc = rs_error(RS_ERR_INPUT, "ps server: member %d is not one of %d servers after %d workers", env->member, K,
                      env->world);
        goto err;
    }
    /* byteps: the workers' shards come first (none at k = n), this process's after them */
    int nworkers = byteps ? ps_byteps_machines(cfg, env->world) : env->world; /* byteps: one worker a machine */
    ShardWeights w = byteps ? shard_byteps(nworkers, K) : shard_even(K);
    int sid = id + (byteps ? w.lead : 0);
    if (byteps && (rc = ps_byteps_check(cfg, nworkers)) != RS_OK) goto err;
    if (!byteps && nparams && (rc = shard_weighted_check(nparams, &w)) != RS_OK) goto err; /* byteps: per bucket */
    if ((rc = device_open(&dev, "cpu", 0, NULL)) != RS_OK) goto err;
    kernels_cpu_set_threads(1);
    RankEnv here = *env; /* --bind may replace the bind address */
    if ((rc = zctx_open(&zctx, cfg, &here)) != RS_OK) goto err;
    int nb = nparams ? sync_plan_run(nparams, cfg, &buckets) : 0; /* all-reduces only: no training buckets */
    if (nb < 0) {
        rc = rs_error(RS_ERR_RUNTIME, "out of memory planning buckets");
        goto err;
    }
    int np = 0;
    size_t part_keys = 0;
    if (nparams) { /* the partitions the workers push, as they cut them (ps/shard.h) */
        Bucket *whole = buckets;
        rc = shard_partition_run(cfg, whole, nb, w.K, &buckets, &pfirst, &np, &part_keys);
        free(whole);
        if (rc != RS_OK) {
            buckets = NULL;
            goto err;
        }
    }
    /* bind on this host's address on the route to MASTER_ADDR, as the workers' data planes do */
    const char *addr = here.bind[0] ? here.bind : here.addr;
    if (cfg->trace[0]) { /* its work joins rank 0's trace file, as a process of its own */
        char label[48];
        snprintf(label, sizeof label, "ps server %d", id);
        trace = trace_new(env->member, label);
    }
    PsServerArgs a = {.cfg = cfg, .dev = &dev, .zctx = zctx, .addr = addr, .token = env->token, .id = sid,
                      .nservers = w.K, .weights = w, .per_bucket = byteps, .striped = part_keys > 0,
                      .nworkers = nworkers, .nparams = nparams, .buckets = buckets, .nbuckets = np, .colocated = 0,
                      .timeout = cfg->timeout, .trace = trace};
    if ((rc = ps_server_create(&s, &a)) != RS_OK) goto err;
    size_t need = job ? strlen(job) + 1 : config_canonical(cfg, NULL, 0) + 1;
    if (!(canon = malloc(need))) {
        rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        goto err;
    }
    if (job) memcpy(canon, job, need);
    else config_canonical(cfg, canon, need);
    if (byteps)
        log_info("# ps server %d of %d: byteps, %llu/%llu of every bucket, listening on %s", id, K, w.wrest,
                 (unsigned long long)w.lead * w.wlead + (unsigned long long)(w.K - w.lead) * w.wrest,
                 ps_server_endpoint(s));
    else
        log_info("# ps server %d of %d: keys by range, listening on %s", id, K, ps_server_endpoint(s));
    if ((rc = ctrl_join(&ctrl, env, zctx, canon, ps_server_endpoint(s), cfg->timeout)) != RS_OK) goto err;
    double t0 = clock_now();
    if ((rc = ps_server_run(s)) != RS_OK) goto err;
    entry = dedicated_entry(s, env, &dev, clock_now() - t0, ctrl);
    if (entry && trace) cJSON_AddItemToObject(entry, "_trace", trace_json(trace));
    if (!entry || !(text = cJSON_PrintUnformatted(entry))) {
        rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        goto err;
    }
    char **all = NULL;
    rc = ctrl_gather(ctrl, text, &all);
    ctrl_free_texts(all, all ? ctrl_members(ctrl) : 0);

err:
    if (rc != RS_OK) log_error("%s", rs_errmsg());
    cJSON_Delete(entry);
    free(text);
    free(canon);
    ctrl_close(ctrl);
    ps_server_destroy(s);
    trace_free(trace);
    zctx_close(zctx);
    free(buckets);
    free(pfirst);
    if (dev.ops) device_close(&dev);
    return rc;
}

int ps_server_main(const Config *cfg, const RankEnv *env, size_t nparams, const char *job) {
    return server_run(cfg, env, nparams, job, 0);
}

int ps_byteps_server_main(const Config *cfg, const RankEnv *env, size_t nparams, const char *job) {
    return server_run(cfg, env, nparams, job, 1);
}
