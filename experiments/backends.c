/* backends.c - the registry of gradient-sync back ends: name, family, help, constructor and rules, one row each */
#include "backends.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/log.h"
#include "../engine/config_check.h"
#include "../net/link.h"
#include "../net/zendpoint.h"
#include "../allreduce/allreduce.h"
#include "../allreduce/tree.h"
#include "../engine/report.h"
#include "../model/model.h"
#include "../ps/ps.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- each back end's rules on the options ---------------------------------------------------- */

static int check_nccl(const Config *c) {
    ZepWant want = ZEP_AUTO;
    LinkSpec link = {0};
    zep_parse(c->transport, &want); /* validated by config_validate */
    link_parse(c->link, &link);
    if (want != ZEP_AUTO)
        return rs_error(RS_ERR_INPUT, "--transport %s with --sync nccl: NCCL chooses its own transport (NCCL_P2P_DISABLE, "
                                      "NCCL_SHM_DISABLE, NCCL_NET)", c->transport);
    if (link.bytes_per_s > 0)
        return rs_error(RS_ERR_INPUT, "--link %s with --sync nccl: the emulated link paces host data planes; NCCL moves "
                                      "device data itself (use ring or ps)", c->link);
    return RS_OK;
}

/* tree, ps and byteps: their messages go over ZeroMQ only. */
/* none: nothing travels, so nothing crosses a node. */
static int check_none(const Config *c) {
    if (c->nodes)
        return rs_error(RS_ERR_INPUT, "--nodes %d with --sync none: nothing travels between ranks, so no node has "
                                      "anything to send (give --sync ring, tree, ps or byteps)", c->nodes);
    return RS_OK;
}

static int check_no_shm(const Config *c) {
    ZepWant want = ZEP_AUTO;
    zep_parse(c->transport, &want);
    if (want == ZEP_SHM)
        return rs_error(RS_ERR_INPUT, "--transport shm with --sync %s: only the ring has a shared-memory path (%s's "
                                      "messages go over ZeroMQ: use ipc or tcp)", c->sync, c->sync);
    return RS_OK;
}

static int check_ps(const Config *c) {
    RS_TRY(check_no_shm(c));
    if (c->ps_servers < 1) return rs_error(RS_ERR_INPUT, "--ps-servers %d: must be at least 1", c->ps_servers);
    int sharded = !strcmp(c->ps_placement, "sharded"), dp = !strcmp(c->ps_mode, "dataparallel");
    if (sharded && c->nranks > 1 && c->ps_servers != 1 && c->ps_servers != c->nranks)
        return rs_error(RS_ERR_INPUT, "--ps-servers %d with --ps-placement sharded: every worker runs one shard, so the "
                                      "job has %d servers (leave --ps-servers at 1, or say %d; for dedicated servers "
                                      "beside the shards use --sync byteps)", c->ps_servers, c->nranks, c->nranks);
    if (c->ps_staleness != 0 && dp)
        return rs_error(RS_ERR_INPUT, "--ps-consistency %s with --ps-mode dataparallel: DataParallel's step is "
                                      "synchronous (rank 0 scatters, gathers and replicates every step)", c->ps_consistency);
    if (dp && c->accum_steps > 1)
        return rs_error(RS_ERR_INPUT, "--accum-steps %d with --ps-mode dataparallel: DataParallel has no no_sync (every "
                                      "backward reduces the replicas' gradients onto rank 0, so accumulating saves no "
                                      "communication); use --ps-mode push, or --accum-steps 1", c->accum_steps);
    if (sharded && dp)
        return rs_error(RS_ERR_INPUT, "--ps-placement sharded with --ps-mode dataparallel: DataParallel has one server, "
                                      "rank 0 (its GPU 0 gathers, reduces and updates); use --ps-placement colocated");
    if (sharded && c->ps_staleness != 0)
        return rs_error(RS_ERR_INPUT, "--ps-placement sharded with --ps-consistency %s: the sharded servers run in "
                                      "lockstep (sync) only; use colocated or dedicated servers for %s",
                        c->ps_consistency, c->ps_consistency);
    return RS_OK;
}

static int check_byteps(const Config *c) {
    RS_TRY(check_no_shm(c));
    if (strcmp(c->ps_consistency, "sync"))
        return rs_error(RS_ERR_INPUT, "--sync byteps with --ps-consistency %s: BytePS's servers run in lockstep (sync) "
                                      "only, as the sharded ones", c->ps_consistency);
    if (strcmp(c->ps_placement, "colocated"))
        return rs_error(RS_ERR_INPUT, "--sync byteps with --ps-placement %s: byteps's placement is implied (a shard "
                                      "in every worker and --ps-servers k server processes); leave --ps-placement out",
                        c->ps_placement);
    if (!strcmp(c->ps_mode, "dataparallel"))
        return rs_error(RS_ERR_INPUT, "--sync byteps with --ps-mode dataparallel: DataParallel has one server, rank 0 "
                                      "(use --sync ps --ps-placement colocated)");
    /* 0 <= k <= n, once: -n is the world here; -n 1 may be one task of a launcher's larger world */
    if (c->ps_servers < 0)
        return rs_error(RS_ERR_INPUT, "--sync byteps --ps-servers %d: the formulas cover 0 <= k <= n CPU servers",
                        c->ps_servers);
    return c->nranks > 1 ? ps_byteps_check(c, ps_byteps_machines(c, c->nranks)) : RS_OK;
}

static int check_student(const Config *c) {
    CodecType wire = CODEC_F32;
    codec_parse(c->wire, &wire);
    if (wire != CODEC_F32)
        return rs_error(RS_ERR_INPUT, "--wire %s with --sync student: the lab's all-reduce moves fp32 (use ring to "
                                      "compare)", c->wire);
    return RS_OK;
}

/* zero: a stage, and the ring's transports (its lanes and sockets). */
static int check_zero(const Config *c) {
    if (c->zero_stage == 0)
        return rs_error(RS_ERR_INPUT, "--sync zero without --zero-stage: say which state is sharded (1 the optimizer's, "
                                      "ZeRO-1; 2 the gradients too, ZeRO-2 or FSDP's SHARD_GRAD_OP; 3 the parameters too, "
                                      "ZeRO-3 or FSDP's FULL_SHARD)");
    if (c->zero_stage < 1 || c->zero_stage > 3)
        return rs_error(RS_ERR_INPUT, "--zero-stage %d: must be 1, 2 or 3", c->zero_stage);
    return RS_OK;
}

/* ---- each back end's shape of a configuration ------------------------------------------------ */

static void shape_ps(const Config *c, BackendShape *s) {
    if (!strcmp(c->ps_placement, "sharded")) s->arch = ARCH_PS_SHARDED;
    else if (!strcmp(c->ps_placement, "dedicated")) {
        s->arch = ARCH_PS_DEDICATED;
        s->servers = c->ps_servers;
        s->server_main = ps_server_main;
    }
    if (!strcmp(c->ps_mode, "dataparallel")) s->driver = ps_dataparallel_driver();
}

/* nccl: ring all-reduce unless --nccl-algo tree. */

/* The ring's machine-aware form: Horovod's hierarchical all-reduce. */
static void shape_ring(const Config *c, BackendShape *s) {
    if (config_hierarchy_applies(c)) {
        s->arch = ARCH_RING_HIER;
        s->ops = sync_ring_hierarchical();
    }
}

/* The tree's machine-aware form: NCCL's trees over nodes. */
static void shape_tree(const Config *c, BackendShape *s) {
    if (config_hierarchy_applies(c)) {
        s->arch = ARCH_TREE_HIER;
        s->ops = sync_tree_hierarchical();
    }
}

static void shape_nccl(const Config *c, BackendShape *s) {
    if (!strcmp(c->nccl_algo, "tree")) s->arch = ARCH_TREE;
}

/* byteps's machine-aware form: the machine reduces, then pushes as one worker (BytePS's own). */
static void shape_byteps(const Config *c, BackendShape *s) {
    if (config_hierarchy_applies(c)) {
        s->arch = ARCH_BYTEPS_HIER;
        s->ops = sync_byteps_hierarchical();
    }
    s->servers = c->ps_servers > 0 ? c->ps_servers : 0;
    if (s->servers) s->server_main = ps_byteps_server_main;
}

/* ZeRO's stages: the architecture, and stage 2's paged gradients. */
static void shape_zero(const Config *c, BackendShape *s) {
    s->host_only = 1;
    if (c->zero_stage == 2) {
        s->arch = ARCH_ZERO2;
        s->model_flags = MODEL_GRADS_PAGED;
    } else if (c->zero_stage == 3) {
        s->arch = ARCH_ZERO3;
        s->model_flags = MODEL_GRADS_PAGED | MODEL_PARAMS_PAGED;
        s->layer_buckets = 1;
    }
}

static const Backend backends[] = {
    {.name = "none", .family = "none", .arch = ARCH_NONE, .ops = sync_none, .check = check_none,
     .help = "no communication: one rank (the baseline every other run is held against)"},
    {.name = "ring", .family = "allreduce", .arch = ARCH_RING, .ops = sync_ring, .host_ring = 1, .line_up = 1, .hierarchical = 1, .shape = shape_ring,
     .help = "ring all-reduce in host memory over shared memory or ZeroMQ (DDP's algorithm)"},
    {.name = "tree", .family = "allreduce", .arch = ARCH_TREE, .ops = sync_tree, .check = check_no_shm, .line_up = 1, .hierarchical = 1, .shape = shape_tree,
     .help = "double binary tree all-reduce in host memory over ZeroMQ (NCCL's Tree): 2 log2(N) latency steps"},
    {.name = "nccl", .family = "allreduce", .arch = ARCH_RING, .ops = sync_nccl, .check = check_nccl,
     .shape = shape_nccl, .help = "all-reduce over NCCL on GPUs: the ring, or with --nccl-algo tree its double binary trees"},
    {.name = "ps", .family = "ps", .arch = ARCH_PS_COLOCATED, .ops = sync_ps, .check = check_ps,
     .consistency = 1, .shape = shape_ps,
     .help = "a ZeroMQ parameter server: colocated in rank 0 (DataParallel), dedicated or sharded"},
    {.name = "byteps", .family = "ps", .arch = ARCH_BYTEPS, .ops = sync_byteps, .check = check_byteps,
     .hierarchical = 1, .shape = shape_byteps,
     .help = "BytePS: a summation shard in every worker and --ps-servers k CPU servers (0..N), keys in the paper's optimal split"},
    {.name = "zero", .family = "zero", .arch = ARCH_ZERO1, .ops = sync_zero, .check = check_zero, .line_up = 1, .shape = shape_zero,
     .help = "ZeRO / FSDP: --zero-stage 1 the optimizer state, 2 the gradients too, 3 the parameters too, sharded over the ranks (the ring's reduce-scatter and all-gather)"},
    {.name = "student", .family = "allreduce", .arch = ARCH_STUDENT, .ops = sync_student,
     .check = check_student, .help = "lab 5: the all-reduce you write in allreduce/student.c"},
};
#define NBACKENDS (int)(sizeof backends / sizeof backends[0])

void backend_usage(FILE *f) {
    fprintf(f, "\nback ends (--sync):\n");
    for (int i = 0; i < NBACKENDS; i++)
        fprintf(f, "  %-10s %-10s %s%s\n", backends[i].name, backends[i].family, backends[i].help,
                backends[i].ops() ? "" : " (not in this build)");
}

const Backend *backend_all(int *n) {
    *n = NBACKENDS;
    return backends;
}

const Backend *backend_find(const char *name) {
    char names[256] = "";
    for (int i = 0; i < NBACKENDS; i++) {
        const SyncOps *ops = backends[i].ops();
        if (name && !strcmp(backends[i].name, name)) {
            if (!ops) {
                rs_error(RS_ERR_INPUT, "--sync %s: not in this build", name);
                return NULL;
            }
            return &backends[i];
        }
        if (ops) {
            size_t k = strlen(names);
            snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", backends[i].name);
        }
    }
    rs_error(RS_ERR_INPUT, "--sync '%s': unknown (this build has: %s)", name ? name : "", names);
    return NULL;
}

int backend_validate(const Config *cfg) {
    RS_TRY(config_validate(cfg));
    return backend_check(cfg);
}

int backend_check(const Config *cfg) {
    for (int i = 0; i < NBACKENDS; i++) {
        const Backend *b = &backends[i];
        if (strcmp(b->name, cfg->sync)) continue;
        if (b->check) RS_TRY(b->check(cfg)); /* first: a row may say more of its own consistency */
        if (b->ops != sync_nccl && strcmp(cfg->nccl_algo, "ring"))
            return rs_error(RS_ERR_INPUT, "--nccl-algo %s with --sync %s: the algorithm is --sync nccl's (use --sync tree "
                                          "for the host tree)", cfg->nccl_algo, b->name);
        if (cfg->hierarchical && !b->hierarchical)
            return rs_error(RS_ERR_INPUT, "--hierarchical with --sync %s: %s has no machine-aware form here (--sync ring "
                                          "has: Horovod's hierarchical all-reduce; --sync tree: NCCL's trees over nodes; --sync byteps: BytePS's "
                                          "machine-level reduce)",
                            b->name, b->name);
        if (cfg->hierarchical && !cfg->nodes)
            return rs_error(RS_ERR_INPUT, "--hierarchical without --nodes: the machine-aware algorithm needs machines; "
                                          "say how many the ranks are (--nodes M)");
        if (cfg->hierarchical && cfg->nodes && cfg->nranks > 1 && !config_hierarchy_applies(cfg))
            log_info("# --hierarchical on %d node%s of %d rank%s: that is the flat %s, which runs", cfg->nodes,
                     cfg->nodes == 1 ? "" : "s", cfg->nranks / cfg->nodes, cfg->nranks == cfg->nodes ? "" : "s", b->name);
        if (cfg->zero_stage && strcmp(b->name, "zero"))
            return rs_error(RS_ERR_INPUT, "--zero-stage %d with --sync %s: the stages are --sync zero's (ZeRO, FSDP)",
                            cfg->zero_stage, b->name);
        if (!b->consistency && strcmp(cfg->ps_consistency, "sync"))
            return rs_error(RS_ERR_INPUT, "--ps-consistency %s with --sync %s: only the parameter server has a "
                                          "consistency model (%s exchanges in lockstep)", cfg->ps_consistency, b->name,
                            b->name);
        return RS_OK;
    }
    return RS_OK;
}

const SyncOps *sync_find(const char *name) {
    const Backend *b = backend_find(name);
    return b ? b->ops() : NULL;
}

int backend_shape(const Config *cfg, BackendShape *out) {
    const Backend *b = backend_find(cfg->sync);
    memset(out, 0, sizeof *out);
    if (!b) return RS_ERR_INPUT;
    out->row = b;
    out->arch = b->arch;
    out->lockstep = config_lockstep(cfg);
    out->ops = b->ops();
    if (b->shape) b->shape(cfg, out);
    return RS_OK;
}

const StepDriver *backend_driver(const Config *cfg) {
    BackendShape s;
    return backend_shape(cfg, &s) == RS_OK ? s.driver : NULL;
}

int backend_servers(const Config *cfg) {
    BackendShape s;
    return backend_shape(cfg, &s) == RS_OK ? s.servers : 0;
}

Arch backend_arch(const Config *cfg) {
    BackendShape s;
    if (backend_shape(cfg, &s) == RS_OK) return s.arch;
    return ARCH_RING; /* a --sync no row has: priced as an all-reduce */
}

cJSON *backend_json(const Config *cfg) {
    BackendShape s;
    if (backend_shape(cfg, &s) != RS_OK) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "name", s.row->name);
    cJSON_AddStringToObject(o, "family", s.row->family);
    cJSON_AddStringToObject(o, "architecture", arch_name(s.arch));
    cJSON_AddNumberToObject(o, "servers", s.servers);
    cJSON_AddBoolToObject(o, "lockstep", s.lockstep);
    if (arch_is_zero(s.arch)) cJSON_AddNumberToObject(o, "zero_stage", cfg->zero_stage);
    return o;
}

cJSON *backend_env_json(void) {
    cJSON *env = report_env_json();
    char loaded[64], built[32];
    if (env && sync_nccl_versions(loaded, sizeof loaded, built, sizeof built) == 0) { /* a library older than its headers is a clue */
        cJSON_AddStringToObject(env, "nccl", loaded);
        cJSON_AddStringToObject(env, "nccl_built", built);
    }
    return env;
}
