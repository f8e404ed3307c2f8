/* client.c - the "ps" and "byteps" back ends, worker side: push each bucket's slices to their servers, pull the new parameters back */
/* The protocol (every message, its number format on the wire, and the bytes each placement moves
 * per step, start and end): docs/ps-protocol.md; the header: ps/wire.h. */
#include "ps.h"
#include "sendq.h"
#include "server.h"
#include "shard.h"
#include "wire.h"
#include "../net/gate.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/heap.h"
#include "../net/link.h"
#include "../base/log.h"
#include "../net/zendpoint.h"
#include "../base/mem.h"
#include "../engine/trace.h"
#include "../net/zmq_check.h"
#include "../engine/config_check.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* What the receive loop is waiting for. */
typedef enum { WAIT_INIT, WAIT_STEP, WAIT_SUM } WaitKind;

typedef struct {
    SyncJob job;
    const Config *cfg;
    uint64_t token;
    int rank, N, K, dedicated;
    int sharded;               /* --ps-placement sharded: server k lives in worker k (K = N) */
    int byteps;                /* --sync byteps: N worker shards (none at k = N), then k server processes */
    int failed;                /* 1 once a server failed or went silent: no goodbye then (it would let a
                                * starved server end as if the job were done) */
    int *owe;                  /* [K] the awaited replies still owed by each server (names them on a timeout) */
    int nlocal;                /* servers 0..nlocal-1 are threads of workers 0..nlocal-1 (colocated 1,
                                * sharded N, byteps N or 0), the others processes of their own */
    ShardWeights w;            /* the servers' shares of the keys (ps/shard.h) */
    int dp;                    /* DataParallel's step drives the pushes: only rank 0 gets replies */
    size_t nparams;            /* training keys (0: collective use only) */
    float *out;                /* where training replies land: the parameters' base (host memory) */
    double t_last;             /* the last sign of progress (a reply, a start) */
    PsServer *server;          /* colocated: rank 0 runs it in a thread; sharded: every rank its shard */
    void **sock;               /* [K] one DEALER per server, identity "w<rank>" */
    unsigned char *local;      /* [K] 1: in-process (inproc), not traffic */
    unsigned char *node;       /* [K] 1: the server is another process of this host (a Unix socket) */
    const char *via;           /* the slowest of this rank's links ("tcp", "ipc", "inproc", a static string) */
    ShardSlice *split;         /* [K] scratch for cutting one allreduce chunk */
    ShardPlan plan;            /* the training partitions over the servers (plan.nbuckets of them) */
    Bucket *parts;             /* [np] the partitions the servers sum and answer (--ps-partition-kb;
                                * whole buckets when off: parts[b] = buckets[b]) */
    int np;
    int *pfirst;               /* [nbuckets + 1] engine bucket b's partitions: pfirst[b] .. pfirst[b+1] */
    size_t part_keys;          /* keys per partition (0: whole buckets, each server its key range) */
    PsSendQ q;                 /* pushes to other processes held behind the link's credit */
    double credit;             /* seconds of the link booked ahead past which pushes wait (0: no link) */
    double wall_offset;        /* clock_wall() - clock_now(), for the trace's partition spans */
    int host_visible;          /* the device's memory is host memory: no staging */
    float *stage;              /* host staging of allreduce() where it is not */
    size_t stage_cap;
    /* the step */
    uint32_t step;
    int began;               /* a step has begun (--resume: the first one sets step) */
    int any_reply;
    WaitKind kind;
    int left;                  /* replies still to come */
    unsigned char *got;        /* [plan.nslices] (training) or [nchunks * K] (allreduce) */
    size_t got_cap;
    int *bucket_left;          /* [np] replies each partition still waits for */
    double *bucket_in;         /* [np] when its last reply is in on the emulated link (0: none) */
    double *t_push;            /* [nbuckets] */
    /* the allreduce in flight */
    int sum_striped;           /* --ps-partition-kb: chunks of per keys, each wholly on sum_owner[b] */
    int *sum_owner;            /* [sum_owner_cap] each chunk's server, for sum_owner_total elements */
    ShardSlice *sum_sl;        /* [sum_owner_cap] the chunks as slices */
    double sum_in;             /* --link: when the allreduce's last reply is in on the interface */
    PsSendQ sq;                /* striped: the allreduce's contributions behind the link's credit, as
                                * training's pushes (booked all at once, a 64 MiB call's would reach
                                * a server's interface in the order its senders' processes ran) */
    int sum_owner_cap;
    size_t sum_owner_total;
    uint32_t seq;
    float *sum_buf;
    size_t sum_total, per;
    MsgLend zc;                /* pushes lent without a copy, not yet let go */
    int gated;                 /* the context had a gate at init: the DEALERs present the job token */
    SyncTraffic tr;            /* the split flag; the counts are count's */
    MsgCount count;            /* the data plane's traffic (net/msg.h) */
    /* --wire: the gradients' codec (pushes), the parameters' (training replies: scale 1) and the
     * allreduce's (contributions and sum): all the wire's type, except under FP8, a gradient
     * format, where the parameters and the allreduce travel in bf16 */
    Codec gc, pc, sc;
    int coded;                 /* a 16- or 8-bit wire: the pushes are encoded */
    int pcoded, scoded;        /* the parameters', the allreduce's payloads are encoded */
    uint16_t dtype;            /* the pushes' dtype (WIRE_F32 under fp32) */
    uint16_t pdtype, sdtype;   /* the parameters', the allreduce's */
    size_t el;                 /* bytes of one pushed element */
    size_t sel;                /* bytes of one allreduce element */
    size_t enc_bytes;          /* enc's size */
    size_t *enc_at;            /* [plan.nslices] where slice j's push is encoded in enc */
    unsigned char *enc;        /* pushes encoded, each slice a message of its own (codec_bytes; MEM_COMM;
                                * zero-copy like the gradients they come from: rewritten a step later) */
    unsigned char *enc_sum;    /* [enc_sum_cap * sel] allreduce's contributions encoded (MEM_COMM) */
    size_t enc_sum_cap;
    /* --ps-consistency async / ssp:S: this worker's own pace */
    int async;
    uint32_t samples;          /* the step's global samples, carried by each push (the server scales by it) */
    long long version;         /* the fewest pushes applied any server reported for this step's replies */
    int stale;                 /* the largest staleness they reported */
    _Atomic long long last_version; /* after the last step: what progress reports */
    _Atomic int last_stale;
    int said_bye;
    char id[16];
    size_t idlen;
} PsClient;

/* ---- sending ---------------------------------------------------------------------------------- */

/* A span of the trace's partition lane (tid 3): a push's or a reply's time on this process's
 * interface (under --link; else the moment it was sent or taken). */
static void client_trace(PsClient *c, const char *name, double t0, double t1) {
    if (c->job.trace) trace_span(c->job.trace, name, 3, t0 + c->wall_offset, (t1 > t0 ? t1 : t0 + 1e-6) + c->wall_offset);
}

static int client_send(PsClient *c, int k, const WireHeader *h, const void *payload, size_t bytes) {
    double stamp = 0; /* when it starts on the emulated interface (--link) */
    if (ps_send(c->sock[k], NULL, 0, h, payload, bytes, &c->zc, c->local[k], c->node && c->node[k], &c->count, &stamp) < 0) {
        int e = msg_errno();
        return rs_error(RS_ERR_PEER, "ps: rank %d cannot send %s to server %d: %s", c->rank, wire_op_name(h->op), k,
                        e == EAGAIN ? "it takes no messages (timeout)" : msg_strerror(e));
    }
    if (h->op == WIRE_PUSH && !c->local[k]) {
        double bps = link_get()->bytes_per_s, t0 = stamp > 0 ? stamp : clock_now();
        client_trace(c, "push", t0, bps > 0 ? t0 + (WIRE_HEADER_BYTES + bytes) / bps : t0);
    }
    return RS_OK;
}

static WireHeader client_header(const PsClient *c, WireOp op, uint32_t step) {
    WireHeader h = wire_header(c->token, op);
    h.step = step;
    h.sender = (uint16_t)c->rank;
    h.total = c->plan.total;
    return h;
}

/* Grows the host staging of allreduce() to hold n floats (counted under MEM_COMM). */
static int client_stage(PsClient *c, size_t n) {
    if (c->host_visible || n <= c->stage_cap) return RS_OK;
    Device *d = c->job.dev;
    if (c->stage) {
        if (!msg_lend_drain(&c->zc, c->job.timeout))
            return rs_error(RS_ERR_PEER, "ps: rank %d: pushes still in flight after %g s", c->rank, c->job.timeout);
        device_host_free(d, c->stage, c->stage_cap * sizeof(float), MEM_COMM);
    }
    c->stage_cap = 0;
    if (!(c->stage = device_host_alloc(d, n * sizeof(float), MEM_COMM))) return RS_ERR_RUNTIME;
    c->stage_cap = n;
    return RS_OK;
}

/* Grows the allreduce's encode buffer to n elements (counted under MEM_COMM); the old one is
 * freed once no zero-copy contribution references it. */
static int client_enc_sum(PsClient *c, size_t n) {
    if (n <= c->enc_sum_cap) return RS_OK;
    if (c->enc_sum) {
        if (!msg_lend_drain(&c->zc, c->job.timeout))
            return rs_error(RS_ERR_PEER, "ps: rank %d: pushes still in flight after %g s", c->rank, c->job.timeout);
        free(c->enc_sum);
        mem_account(MEM_COMM, -(long long)(c->enc_sum_cap * c->sel));
    }
    c->enc_sum_cap = 0;
    if (!(c->enc_sum = malloc(n * c->sel))) return rs_error(RS_ERR_RUNTIME, "out of memory");
    mem_account(MEM_COMM, (long long)(n * c->sel));
    c->enc_sum_cap = n;
    return RS_OK;
}

/* Host pointer to n floats of device memory at src (staged through c->stage + at). */
static int client_host_view(PsClient *c, const float *src, size_t at, size_t n, const float **out) {
    if (c->host_visible) {
        *out = src;
        return RS_OK;
    }
    Device *d = c->job.dev;
    RS_TRY(d->ops->copy(d, c->stage + at, src, n * sizeof(float), 1, NULL));
    RS_TRY(d->ops->stream_sync(d, NULL));
    *out = c->stage + at;
    return RS_OK;
}

/* ---- what is awaited, and from whom -------------------------------------------------------------- */

/* The replies of the plan's slices (the start, a step) are awaited, each from its server. */
static void client_expect_plan(PsClient *c) {
    c->left = c->plan.nslices;
    if (!c->owe) return;
    memset(c->owe, 0, (size_t)c->K * sizeof *c->owe);
    for (int j = 0; j < c->plan.nslices; j++) c->owe[c->plan.slices[j].server]++;
}

/* One more reply awaited, from server k. */
static void client_owe(PsClient *c, int k) {
    c->left++;
    if (c->owe) c->owe[k]++;
}

/* Server k as the launcher and the servers name it: "server 1", "server 0 (in rank 0)" for a
 * worker's own shard, "server 2 (CPU server 0)" for byteps's dedicated processes. */
static void client_server_name(const PsClient *c, int k, char *out, size_t len) {
    if (k < c->nlocal) snprintf(out, len, "server %d (in rank %d)", k, k);
    else if (c->byteps) snprintf(out, len, "server %d (CPU server %d)", k, k - c->nlocal);
    else snprintf(out, len, "server %d", k);
}

/* The timeout's verdict: which servers' replies are missing for what. Returns RS_ERR_PEER. */
static int client_lacking(PsClient *c, const char *what) {
    char list[512], name[64];
    c->failed = 1;
    size_t at = 0;
    int n = 0;
    list[0] = 0;
    for (int k = 0; k < c->K && c->owe && at < sizeof list; k++)
        if (c->owe[k] > 0) {
            client_server_name(c, k, name, sizeof name);
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", n++ ? ", " : "", name);
        }
    if (c->K == 1)
        return rs_error(RS_ERR_PEER, "ps: rank %d: no reply from the server for %s within %g s", c->rank, what,
                        c->job.timeout);
    if (!n)
        return rs_error(RS_ERR_PEER, "ps: rank %d: %d replies from the %d servers missing for %s within %g s", c->rank,
                        c->left, c->K, what, c->job.timeout);
    return rs_error(RS_ERR_PEER, "ps: rank %d: no reply from %s for %s within %g s (%d of %d servers replied)", c->rank,
                    list, what, c->job.timeout, c->K - n, c->K);
}

/* ---- receiving --------------------------------------------------------------------------------- */

static int client_drop(PsClient *c) {
    msg_count_dropped(&c->count);
    return RS_OK;
}

/* The allreduce's sum, n elements of the wire for keys [at, at + n), decoded into the caller's
 * buffer (through the host staging where the device is not host memory: the contributions
 * left from the encode buffer, so the staging is free). Complete when it returns. */
static int client_decode_sum(PsClient *c, const void *data, size_t at, size_t n) {
    if (c->host_visible) {
        codec_decode(&c->sc, data, c->sum_buf + at, n);
        return RS_OK;
    }
    codec_decode(&c->sc, data, c->stage + at, n);
    return device_h2d(c->job.dev, c->sum_buf + at, c->stage + at, n * sizeof(float));
}

/* Applies one message from server k, setting *applied when it was an awaited reply; a refused
 * one is counted. 0, or RS_ERR_* (an ABORT from the server is RS_ERR_PEER with its reason). */
static int client_handle(PsClient *c, int k, MsgIn *m, int *applied) {
    *applied = 0;
    if (m->extra || m->n < 1 || m->n > 2) return client_drop(c);
    WireHeader h;
    size_t hb, pb;
    const void *head = msg_head(m, &hb), *data = msg_payload(m, &pb);
    WireErr e = wire_decode(head, hb, &h);
    if (e == WIRE_OK) e = wire_check(&h, c->token, m->n == 2, pb);
    if (e != WIRE_OK || h.sender != k) return client_drop(c);
    if (h.op == WIRE_ABORT) {
        int len = (int)(pb > 400 ? 400 : pb);
        char name[64];
        c->failed = 1;
        client_server_name(c, k, name, sizeof name);
        return rs_error(RS_ERR_PEER, "ps: rank %d: %s ended the job: %.*s", c->rank, name, len, (const char *)data);
    }
    if (h.dtype != (c->kind == WAIT_INIT ? WIRE_F32 : c->kind == WAIT_SUM ? c->sdtype : c->pdtype))
        return client_drop(c); /* the start is fp32 */
    float *dst;
    size_t at;
    int idx, b = (int)h.bucket;
    if (c->kind == WAIT_SUM) {
        if (h.op != WIRE_SUMMED || h.step != c->seq || h.total != c->sum_total) return client_drop(c);
        if (h.bucket >= (uint32_t)shard_nchunks(c->sum_total, c->per)) return client_drop(c);
        size_t lo, hi, a, z;
        shard_chunk(c->sum_total, c->per, b, &lo, &hi);
        if (c->sum_striped) { /* the whole chunk, from its one server */
            if (c->sum_owner[b] != k) return client_drop(c);
            a = lo, z = hi;
        } else {
            ShardRange r = shard_weighted_range(c->sum_total, &c->w, k);
            a = lo > r.lo ? lo : r.lo, z = hi < r.hi ? hi : r.hi;
        }
        if (z <= a || h.offset != a || h.count != z - a) return client_drop(c);
        idx = b * c->K + k;
        dst = c->sum_buf;
        at = a;
    } else {
        uint32_t want = c->kind == WAIT_INIT ? WIRE_STEP_INIT : c->step;
        int any = c->async && c->kind == WAIT_STEP; /* async replies carry the server's version instead */
        if (h.op != WIRE_PARAMS || (!any && h.step != want) || h.total != c->plan.total ||
            h.bucket >= (uint32_t)c->plan.nbuckets)
            return client_drop(c);
        if (any) {
            if ((long long)h.step < c->version) c->version = h.step;
            if ((int)h.samples > c->stale) c->stale = (int)h.samples;
        }
        idx = -1;
        for (int j = c->plan.first[b]; j < c->plan.first[b + 1]; j++)
            if (c->plan.slices[j].server == k) idx = j;
        if (idx < 0 || h.offset != c->plan.slices[idx].off || h.count != c->plan.slices[idx].count)
            return client_drop(c);
        dst = c->out;
        at = (size_t)h.offset;
    }
    if (c->got[idx]) return client_drop(c);
    if (c->kind == WAIT_SUM && c->scoded) RS_TRY(client_decode_sum(c, data, at, (size_t)h.count));
    else if (c->kind == WAIT_SUM) RS_TRY(device_h2d(c->job.dev, dst + at, data, pb)); /* complete before the release */
    else if (c->kind == WAIT_STEP && c->pcoded) codec_decode(&c->pc, data, dst + at, (size_t)h.count);
    else memcpy(dst + at, data, pb); /* training: host memory (the engine stages a GPU's) */
    c->got[idx] = 1;
    c->left--;
    if (c->owe) c->owe[k]--;
    c->any_reply = 1;
    c->t_last = clock_now();
    if (!c->local[k]) {
        /* --link: a training reply is in when the interface has taken it; the communication
         * thread does not sleep for it here (it may have the next bucket to push) but ps_poll
         * holds the bucket back until then */
        int node = c->node && c->node[k];
        if (c->kind == WAIT_STEP) {
            double in = msg_accept(m, 0, node, 1, &c->count);
            if (in > c->bucket_in[b]) c->bucket_in[b] = in;
            client_trace(c, "reply", m->stamp > 0 ? m->stamp : c->t_last, in > 0 ? in : c->t_last);
        } else if (c->kind == WAIT_SUM) { /* booked, not slept for: this thread still has contributions to send */
            double in = msg_accept(m, 0, node, 1, &c->count);
            if (in > c->sum_in) c->sum_in = in;
        } else
            msg_accept(m, 0, node, 0, &c->count);
    }
    if (c->kind == WAIT_STEP) --c->bucket_left[b];
    *applied = 1;
    return RS_OK;
}

/* Takes in what the servers sent within wait_ms (0: only what is there); *got counts the
 * awaited replies applied. 0 or RS_ERR_*. */
static int client_poll(PsClient *c, int wait_ms, int *got) {
    unsigned char ready[256];
    int K = c->K < 256 ? c->K : 256;
    *got = 0;
    if (msg_poll(c->sock, K, wait_ms, ready) < 0) return zmqCheck(-1);
    for (int k = 0; k < c->K; k++) {
        if (k < K && !ready[k]) continue;
        for (;;) {
            MsgIn m;
            if (msg_recv(c->sock[k], &m, ZMQ_DONTWAIT, 0) < 0) {
                if (msg_errno() == EAGAIN || msg_errno() == EINTR) break;
                return zmqCheck(-1);
            }
            int applied;
            int rc = client_handle(c, k, &m, &applied);
            msg_close(&m);
            if (rc) return rc;
            *got += applied;
        }
    }
    return RS_OK;
}

/* Waits until the awaited replies are in (or, first_only, the first of them), failing when
 * nothing comes for the timeout or the colocated server fails. */
static int client_sum_flush(PsClient *c);

static int client_wait(PsClient *c, int first_only, const char *what) {
    double last = clock_now();
    while (c->left > 0 && !(first_only && c->any_reply)) {
        int got, wait = 100;
        if (sendq_waiting(&c->sq)) { /* the allreduce's contributions still held: wake when the next may go */
            RS_TRY(client_sum_flush(c));
            double due = sendq_due_in(&c->sq, c->credit) * 1e3;
            if (sendq_waiting(&c->sq) && due < wait) wait = (int)due;
        }
        RS_TRY(client_poll(c, wait, &got));
        double now = clock_now();
        if (got > 0) {
            last = now;
            continue;
        }
        if (c->server) {
            char why[512];
            int st = ps_server_status(c->server, why, sizeof why);
            if (st) return rs_error(RS_ERR_PEER, "%s", why);
        }
        /* the server's verdict names the missing rank: give it a moment to come first
         * (colocated, rank 0 reads it directly; others get it as an ABORT) */
        if (now - last > c->job.timeout + (c->server ? 2.0 : 1.0)) return client_lacking(c, what);
    }
    return RS_OK;
}

/* ---- the back end (engine/sync.h) ----------------------------------------------------------- */

static void ps_destroy(void *state);

/* Rank 0's serving thread's verdict (thread-safe): 0 while it serves. */
static int ps_health(void *state) {
    PsClient *c = state;
    if (!c || !c->server) return RS_OK;
    char why[512];
    int st = ps_server_status(c->server, why, sizeof why);
    return st ? rs_error(RS_ERR_PEER, "%s", why) : RS_OK;
}

int ps_byteps_check(const Config *cfg, int world) {
    int k = cfg->ps_servers;
    if (k < 0 || k > world)
        return rs_error(RS_ERR_INPUT, "--sync byteps --ps-servers %d with %d %s: the formulas cover 0 <= k <= n "
                                      "CPU servers", k, world,
                        cfg->hierarchical && cfg->nodes == world ? "machines (a worker each under --hierarchical)"
                                                                  : "workers");
    if (world == 1 && k > 0)
        return rs_error(RS_ERR_INPUT, "--sync byteps --ps-servers %d with one worker: the split's n^2 + kn - 2k is 0 at "
                                      "n = k = 1 (one worker needs no summation service: --ps-servers 0)", k);
    if (strcmp(cfg->ps_placement, "colocated") || cfg->ps_staleness != 0 || strcmp(cfg->ps_mode, "push"))
        return rs_error(RS_ERR_INPUT, "--sync byteps: its placement is implied (--ps-placement stays colocated), its "
                                      "step synchronous (--ps-consistency sync) and push-pull (--ps-mode push)");
    return RS_OK;
}

/* The "ps" and "byteps" back ends' init: the placement's servers (ps/ps.h), this rank's own one
 * started in a thread where it hosts one. */
static int client_init(const SyncJob *job, void **state, char *endpoint, size_t len, int byteps) {
    const Config *cfg = job->cfg;
    *state = NULL;
    if (endpoint && len) endpoint[0] = 0;
    int dedicated = !byteps && !strcmp(cfg->ps_placement, "dedicated");
    int sharded = !byteps && !strcmp(cfg->ps_placement, "sharded");
    if (byteps) RS_TRY(ps_byteps_check(cfg, job->world));
    if (byteps && job->dataparallel)
        return rs_error(RS_ERR_INPUT, "--sync byteps with --ps-mode dataparallel: DataParallel has one server, rank 0");
    if (sharded && cfg->ps_servers != 1 && cfg->ps_servers != job->world)
        return rs_error(RS_ERR_INPUT,
                        "--ps-servers %d with --ps-placement sharded: every worker runs one shard, so the job has %d "
                        "servers (leave --ps-servers at 1, or say %d)",
                        cfg->ps_servers, job->world, job->world);
    if (sharded && job->dataparallel)
        return rs_error(RS_ERR_INPUT, "--ps-placement sharded with --ps-mode dataparallel: DataParallel has one "
                                      "server, rank 0 (use --ps-placement colocated)");
    if (sharded && cfg->ps_staleness != 0 && job->nbuckets > 0)
        return rs_error(RS_ERR_INPUT, "--ps-placement sharded with --ps-consistency %s: the sharded servers run in "
                                      "lockstep (sync) only", cfg->ps_consistency);
    if (!byteps && !dedicated && !sharded && cfg->ps_servers > 1)
        return rs_error(RS_ERR_INPUT,
                        "--ps-servers %d needs --ps-placement dedicated: the colocated server is one thread inside "
                        "rank 0 (DataParallel's GPU 0)",
                        cfg->ps_servers);
    if (job->dataparallel && dedicated) return rs_error(RS_ERR_INPUT, PS_DP_NO_DEDICATED);
    PsClient *c = calloc(1, sizeof *c);
    if (!c) return rs_error(RS_ERR_RUNTIME, "out of memory");
    *state = c;
    c->job = *job;
    c->gated = gate_on(job->zctx); /* decided with the servers' sockets: the DEALERs come at connect */
    c->cfg = cfg;
    c->nparams = job->nbuckets > 0 ? job->nparams : 0;
    c->rank = job->rank;
    c->N = job->world;
    c->w = byteps ? shard_byteps(job->world, cfg->ps_servers)
                  : shard_even(dedicated ? cfg->ps_servers : sharded ? job->world : 1);
    c->K = c->w.K;
    c->nlocal = byteps ? c->w.lead : dedicated ? 0 : sharded ? job->world : 1;
    c->dedicated = dedicated;
    c->sharded = sharded;
    c->byteps = byteps;
    c->dp = job->dataparallel;
    c->async = !c->dp && cfg->ps_staleness != 0 && job->nbuckets > 0;
    atomic_init(&c->last_version, 0);
    atomic_init(&c->last_stale, 0);
    c->token = wire_token(job->token);
    c->wall_offset = clock_wall() - clock_now();
    c->host_visible = job->dev->host_visible;
    c->gc = codec_from_options(cfg->wire, cfg->loss_scale);
    c->pc = codec_param(c->gc.type);
    c->sc = codec_is_fp8(c->gc.type) ? c->pc : c->gc;
    c->coded = c->gc.type != CODEC_F32;
    c->pcoded = c->pc.type != CODEC_F32;
    c->scoded = c->sc.type != CODEC_F32;
    c->dtype = (uint16_t)wire_dtype_of(c->gc.type);
    c->pdtype = (uint16_t)wire_dtype_of(c->pc.type);
    c->sdtype = (uint16_t)wire_dtype_of(c->sc.type);
    c->el = codec_elem_bytes(c->gc.type);
    c->sel = codec_elem_bytes(c->sc.type);
    double per = cfg->bucket_mb * 1048576.0 / sizeof(float);
    c->per = per < 1 ? 1 : (size_t)per;
    size_t pk = config_partition_keys(cfg); /* the allreduce's chunks are partitions, striped */
    if (pk) c->per = pk, c->sum_striped = 1;
    /* the replies in warm heap pages (base/heap.h) */
    heap_keep_frames(ps_largest_slice(c->per, job->buckets, job->nbuckets) * sizeof(float));
    c->idlen = ps_identity(c->rank, c->id, sizeof c->id);
    c->sock = calloc((size_t)c->K, sizeof *c->sock);
    c->local = calloc((size_t)c->K, 1);
    c->node = calloc((size_t)c->K, 1);
    c->split = calloc((size_t)c->K, sizeof *c->split);
    c->owe = calloc((size_t)c->K, sizeof *c->owe);
    if (!c->sock || !c->local || !c->node || !c->split || !c->owe) return rs_error(RS_ERR_RUNTIME, "out of memory");
    if (c->nparams) {
        if (sharded && (size_t)c->K > c->nparams)
            return rs_error(RS_ERR_INPUT, "--ps-placement sharded with %d ranks: more shards than the model's %zu "
                                          "parameters", c->K, c->nparams);
        RS_TRY(shard_partition_run(cfg, job->buckets, job->nbuckets, c->K, &c->parts, &c->pfirst, &c->np, &c->part_keys));
        if (c->part_keys) /* partitions striped over every server, each wholly on one */
            RS_TRY(shard_stripe_plan(&c->plan, c->nparams, &c->w, c->parts, c->np));
        else if (byteps) /* every bucket in the servers' proportions, as BytePS splits each tensor */
            RS_TRY(shard_bucket_plan(&c->plan, c->nparams, &c->w, c->parts, c->np));
        else
            RS_TRY(shard_weighted_plan(&c->plan, c->nparams, &c->w, c->parts, c->np));
        c->got = calloc((size_t)c->plan.nslices, 1);
        c->got_cap = (size_t)c->plan.nslices;
        RS_TRY(sendq_init(&c->q, c->plan.nslices));

        c->bucket_left = calloc((size_t)c->np, sizeof *c->bucket_left);
        c->t_push = calloc((size_t)job->nbuckets, sizeof *c->t_push);
        c->bucket_in = calloc((size_t)c->np, sizeof *c->bucket_in);
        if (!c->got || !c->bucket_left || !c->t_push || !c->bucket_in) return rs_error(RS_ERR_RUNTIME, "out of memory");
        if (c->coded) { /* once: every push of the run is encoded here, slice after slice */
            if (!(c->enc_at = malloc((size_t)c->plan.nslices * sizeof *c->enc_at)))
                return rs_error(RS_ERR_RUNTIME, "out of memory");
            c->enc_bytes = 0;
            for (int j = 0; j < c->plan.nslices; j++) {
                c->enc_at[j] = c->enc_bytes;
                c->enc_bytes += codec_bytes(c->gc.type, c->plan.slices[j].count);
            }
            if (!(c->enc = malloc(c->enc_bytes ? c->enc_bytes : 1))) return rs_error(RS_ERR_RUNTIME, "out of memory");
            mem_account(MEM_COMM, (long long)c->enc_bytes);
        }
    }
    const LinkSpec *ln = link_get();
    if (ln->bytes_per_s > 0) { /* the credit: one message's time on the link, at least 2 ms (the poll's wake-up) */
        size_t most = c->sum_striped ? c->per : 0;
        for (int j = 0; j < c->plan.nslices; j++)
            if (c->plan.slices[j].count > most) most = c->plan.slices[j].count;
        double t = (double)(codec_bytes(c->gc.type, most) + WIRE_HEADER_BYTES) / ln->bytes_per_s;
        c->credit = t > 0.002 ? t : 0.002;
    }
    if (c->rank >= c->nlocal) { /* no server here: this worker's host names the transport its servers use */
        char host[40];
        zep_host_key(host, sizeof host);
        if (endpoint && len && host[0]) snprintf(endpoint, len, "host=%s", host);
    }
    if (c->rank < c->nlocal) { /* server `rank` (sharded, byteps: that shard of the keys), in this worker */
        PsServerArgs a = {.cfg = cfg, .dev = job->dev, .zctx = job->zctx, .addr = job->addr, .token = job->token,
                          .id = c->rank, .nservers = c->K, .weights = c->w, .per_bucket = byteps,
                          .striped = c->part_keys > 0, .nworkers = c->N, .nparams = c->nparams,
                          .buckets = c->parts, .nbuckets = c->np, .colocated = 1,
                          .local_rank = c->rank, .timeout = job->timeout, .dataparallel = c->dp,
                          .trace = job->trace};
        RS_TRY(ps_server_create(&c->server, &a));
        RS_TRY(ps_server_start(c->server));
        if (endpoint && len) snprintf(endpoint, len, "%s", ps_server_endpoint(c->server));
        char dn[32];
        if (byteps)
            log_info("# ps server %d of %d: byteps, %llu/%llu of every bucket, in rank %d on %s, listening on %s",
                     c->rank, c->K, c->w.wlead, (unsigned long long)c->w.lead * c->w.wlead +
                     (unsigned long long)(c->K - c->w.lead) * c->w.wrest, c->rank,
                     device_name(job->dev, dn, sizeof dn), ps_server_endpoint(c->server));
        else if (sharded)
            log_info("# ps server %d of %d: sharded, in rank %d on %s, listening on %s", c->rank, c->K, c->rank,
                     device_name(job->dev, dn, sizeof dn), ps_server_endpoint(c->server));
        else
            log_info("# ps server: colocated in rank 0 on %s, listening on %s", device_name(job->dev, dn, sizeof dn),
                     ps_server_endpoint(c->server));
    }
    return RS_OK;
}

/* The queue bound of the socket to each server (net/msg.h: four times what a peer has in flight
 * in one step): a server answers a step with one message a slice it holds, at most the plan's
 * slices, and may end the job with one more. The allreduce's replies (one a chunk of the call)
 * can outnumber them in a large call; the rest wait in the server's queue until this worker
 * reads them. */
static int client_queue(const PsClient *c) { return msg_queue_bound((size_t)c->plan.nslices + 1); }

static int ps_connect(void *state, char *const *endpoints, int nmembers) {
    PsClient *c = state;
    if (c->byteps && nmembers != c->N + c->K - c->nlocal)
        return rs_error(RS_ERR_INPUT,
                        "--sync byteps --ps-servers %d: the job has %d server processes (the launcher starts them with "
                        "RINGSIDE_ROLE=server)",
                        c->K - c->nlocal, nmembers - c->N < 0 ? 0 : nmembers - c->N);
    if (c->dedicated && nmembers != c->N + c->K)
        return rs_error(RS_ERR_INPUT,
                        "--ps-placement dedicated --ps-servers %d: the job has %d server processes (the launcher "
                        "starts them with RINGSIDE_ROLE=server)",
                        c->K, nmembers - c->N < 0 ? 0 : nmembers - c->N);
    if (c->sharded && nmembers != c->N)
        return rs_error(RS_ERR_INPUT, "--ps-placement sharded: the job has %d server processes (the shards live in "
                                      "the workers: start none)", nmembers - c->N < 0 ? 0 : nmembers - c->N);
    if (c->nlocal > 0 && (nmembers < 1 || !endpoints[0] || !endpoints[0][0]))
        return rs_error(RS_ERR_PEER, "ps: rank 0 published no server endpoint");
    /* a server's messages to this worker beyond client_queue wait in the server's queue */
    MsgSocketSpec spec = {.type = ZMQ_DEALER, .user = "ps worker", .ungated = !c->gated, .linger_ms = 1000,
                          .sndtimeo_ms = (int)(c->job.timeout * 1000), .rcv_queue = client_queue(c), .id = c->id,
                          .idlen = c->idlen};
    /* links told apart: a Unix socket to a server of this host, TCP to one of another (unless
     * --transport tcp sends this host's over TCP too); a server in this rank learns below which
     * workers share its host */
    c->tr.split = zep_get() != ZEP_TCP;
    for (int k = 0; k < c->K; k++) {
        const char *ep = k < c->nlocal ? endpoints[k] : endpoints[c->N + k - c->nlocal];
        c->local[k] = c->server && k == c->rank; /* this process's own server */
        if (c->local[k]) ep = ps_server_inproc(c->server);
        if (!ep || !*ep) return rs_error(RS_ERR_PEER, "ps: server %d published no endpoint", k);
        RS_TRY(msg_socket(c->job.zctx, &spec, &c->sock[k]));
        if (!c->local[k] && zep_get() == ZEP_SHM)
            return rs_error(RS_ERR_INPUT, "--transport shm: ps has no shared-memory path (use auto, ipc or tcp)");
        const char *via = "inproc";
        if (c->local[k]) {
            if (msg_connect(c->sock[k], ep) != 0)
                return rs_error(RS_ERR_PEER, "ps: rank %d cannot connect to its server at %s: %s", c->rank, ep,
                                msg_strerror(msg_errno()));
        } else {
            char who[48];
            snprintf(who, sizeof who, "ps: rank %d's server %d", c->rank, k);
            RS_TRY(zep_connect(c->sock[k], ep, who, &via));
            if (c->node) c->node[k] = !strcmp(via, "ipc");
        }
        c->via = sync_transport_slower(c->via, via);
    }
    if (c->server) { /* this server answers the others over what they chose: the same rule, from their hosts */
        unsigned char *node = calloc((size_t)c->N, 1);
        if (!node) return rs_error(RS_ERR_RUNTIME, "out of memory");
        for (int r = 0; r < c->N && r < nmembers; r++)
            if (r != c->rank) {
                const char *via = zep_peer_via(endpoints[r]);
                c->via = sync_transport_slower(c->via, via);
                node[r] = !strcmp(via, "ipc");
            }
        int rc = ps_server_set_nodes(c->server, node, c->N);
        free(node);
        RS_TRY(rc);
    }
    return RS_OK;
}

/* Rank 0 hands the servers its parameters (buf, host memory); every other rank pulls them into
 * buf (under DataParallel's step they come with step 0's replicate instead). */
static int ps_broadcast(void *state, float *buf, size_t count) {
    PsClient *c = state;
    if (!c->nparams) return RS_OK;
    if (count != c->nparams) return rs_error(RS_ERR_RUNTIME, "ps: broadcast of %zu floats, the model has %zu", count, c->nparams);
    if (c->rank == 0) {
        for (int j = 0; j < c->plan.nslices; j++) {
            const ShardSlice *sl = &c->plan.slices[j];
            WireHeader h = client_header(c, WIRE_INIT, WIRE_STEP_INIT);
            h.bucket = (uint32_t)sl->bucket;
            h.offset = sl->off;
            h.count = sl->count;
            RS_TRY(client_send(c, sl->server, &h, buf + sl->off, sl->count * sizeof(float)));
        }
        /* The slices left zero-copy from buf, which (staging on a GPU) the first step's gradients
         * overwrite: wait until every server has taken its copy and released them. */
        if (!c->host_visible && !msg_lend_drain(&c->zc, c->job.timeout))
            return rs_error(RS_ERR_PEER, "ps: rank 0: the servers did not take the initial parameters within %g s",
                            c->job.timeout);
        return RS_OK;
    }
    if (c->dp) return RS_OK;
    c->kind = WAIT_INIT;
    c->out = buf;
    memset(c->got, 0, c->got_cap);
    client_expect_plan(c);
    for (int k = 0; k < c->K; k++) {
        WireHeader h = client_header(c, WIRE_PULL, WIRE_STEP_INIT);
        RS_TRY(client_send(c, k, &h, NULL, 0));
    }
    return client_wait(c, 0, "the initial parameters");
}

/* Rank 0 tells every server the step's global sample count (STEP). */
static int client_tell_step(PsClient *c, int global_samples) {
    for (int k = 0; k < c->K; k++) {
        WireHeader h = client_header(c, WIRE_STEP, c->step);
        h.samples = global_samples > 0 ? (uint32_t)global_samples : 0;
        RS_TRY(client_send(c, k, &h, NULL, 0));
    }
    return RS_OK;
}

/* The step's bookkeeping; rank 0 tells the servers its sample count, so that each bucket is
 * updated as soon as its pushes are in. */
static int ps_begin_step(void *state, int step, int global_samples) {
    PsClient *c = state;
    if (!c->nparams) return rs_error(RS_ERR_RUNTIME, "ps: a step without training buckets");
    if (c->cfg->resume[0] && !c->began) c->step = (uint32_t)step; /* --resume: the first step is the checkpoint's */
    c->began = 1;
    if (step != (int)c->step) return rs_error(RS_ERR_RUNTIME, "ps: step %d, expected step %u", step, c->step);
    c->kind = WAIT_STEP;
    c->any_reply = 0;
    client_expect_plan(c);
    c->q.head = c->q.n = 0; /* a failed step's leftovers are not this one's */
    c->t_last = clock_now();
    memset(c->got, 0, c->got_cap);
    for (int p = 0; p < c->plan.nbuckets; p++) {
        c->bucket_left[p] = c->plan.first[p + 1] - c->plan.first[p];
        c->bucket_in[p] = 0;
    }
    if (c->async) { /* no step sizes: each push says its own */
        c->samples = global_samples > 0 ? (uint32_t)global_samples : 0;
        c->version = LLONG_MAX;
        c->stale = 0;
        return RS_OK;
    }
    return c->rank == 0 ? client_tell_step(c, global_samples) : RS_OK;
}

/* Sends the plan's slice j of this step's pushes, whose payload is data (bytes). */
static int client_push_send(void *arg, int j, const void *data, size_t bytes) {
    PsClient *c = arg;
    const ShardSlice *sl = &c->plan.slices[j];
    WireHeader h = client_header(c, WIRE_PUSH, c->step);
    h.samples = c->samples; /* async: the server scales this push alone (0 under sync: STEP says it) */
    h.bucket = (uint32_t)sl->bucket; /* the partition */
    h.offset = sl->off;
    h.count = sl->count;
    h.dtype = c->dtype;
    return client_send(c, sl->server, &h, data, bytes);
}

/* Hands queued pushes to the interface as its credit allows (ps/sendq.h). */
static int client_flush(PsClient *c) { return sendq_flush(&c->q, c->credit, client_push_send, c); }

/* Pushes bucket b's slices (grad, host memory, goes zero-copy where large: unchanged until the
 * bucket is done), in partition order: to this process's own server at once, to the others
 * through the send queue, which lets this process's replies pass them (ps/sendq.h); the new
 * parameters land in out. (A rotation, worker r's i-th round starting at server r + 1 so that no
 * server takes every worker's partition at once, measured no better with 784-1024-1024-10 and 8%
 * worse with 784-512-10 at n = 4 over 300 Mbit/s: the incast it avoids is one partition deep.) */
static int ps_start(void *state, int step, int b, float *grad, float *out) {
    PsClient *c = state;
    if (b < 0 || b >= c->job.nbuckets) return rs_error(RS_ERR_RUNTIME, "ps: no bucket %d", b);
    const Bucket *bk = &c->job.buckets[b];
    c->out = out - bk->lo;
    c->t_push[b] = c->t_last = clock_now();
    for (int j = c->plan.first[c->pfirst[b]]; j < c->plan.first[c->pfirst[b + 1]]; j++) { /* its partitions' slices */
        const ShardSlice *sl = &c->plan.slices[j];
        const void *data = grad + (sl->off - bk->lo);
        size_t bytes = sl->count * sizeof(float);
        if (c->coded) { /* x * scale in the wire's type (FP8: the slice's own scale ahead) */
            unsigned char *e = c->enc + c->enc_at[j];
            codec_encode(&c->gc, grad + (sl->off - bk->lo), e, sl->count);
            data = e;
            bytes = codec_bytes(c->gc.type, sl->count);
        }
        if (c->local[sl->server]) RS_TRY(client_push_send(c, j, data, bytes));
        else RS_TRY(sendq_put(&c->q, j, data, bytes));
    }
    return client_flush(c);
}

/* Replies engine bucket b still waits for, over its partitions. */
static int client_bucket_left(const PsClient *c, int b) {
    int n = 0;
    for (int p = c->pfirst[b]; p < c->pfirst[b + 1]; p++) n += c->bucket_left[p];
    return n;
}

/* Bucket b's new parameters are in: 1; not yet: 0; the server failed or nothing came for the
 * timeout: -RS_ERR_PEER. Under DataParallel's step only rank 0 waits for replies. */
/* 1 when bucket b's replies are all here and, under --link, in on the interface: else waits up to
 * wait_ms (at most until then) and says 0, so that the engine can push a bucket meanwhile. */
static int ps_bucket_in(PsClient *c, int b, int wait_ms) {
    double now = clock_now(), in = 0;
    for (int p = c->pfirst[b]; p < c->pfirst[b + 1]; p++)
        if (c->bucket_in[p] > in) in = c->bucket_in[p];
    if (in <= now) return 1;
    double until = now + wait_ms * 1e-3;
    msg_wait_until(in < until ? in : until);
    return clock_now() >= in;
}

static int ps_poll(void *state, int b, int wait_ms) {
    PsClient *c = state;
    int rc = client_flush(c);
    if (rc) return -rc;
    if (c->dp && c->rank != 0) { /* no replies to wait for: done once its pushes have all left */
        if (!sendq_waiting(&c->q)) return 1;
        double due = sendq_due_in(&c->q, c->credit), most = wait_ms * 1e-3;
        msg_wait_until(clock_now() + (due < most ? due : most));
        if ((rc = client_flush(c))) return -rc;
        return !sendq_waiting(&c->q);
    }
    if (client_bucket_left(c, b) == 0 && !sendq_waiting(&c->q)) return ps_bucket_in(c, b, wait_ms);
    int got, wait = wait_ms;
    if (sendq_waiting(&c->q)) { /* wake when the next push may go */
        double due = sendq_due_in(&c->q, c->credit) * 1e3;
        if (due < wait) wait = (int)due;
    }
    if ((rc = client_poll(c, wait, &got)) || (rc = client_flush(c))) return -rc;
    if (client_bucket_left(c, b) == 0) return ps_bucket_in(c, b, 0);
    if ((rc = ps_health(c))) return -rc;
    /* the server's verdict names the missing rank: give it a moment to come first */
    if (clock_now() - c->t_last > c->job.timeout + (c->server ? 2.0 : 1.0)) {
        char what[32];
        snprintf(what, sizeof what, "step %u", c->step);
        return -client_lacking(c, what);
    }
    return 0;
}

static int ps_end_step(void *state, int step) {
    PsClient *c = state;
    (void)step;
    c->step++;
    if (c->async) {
        atomic_store(&c->last_version, c->version == LLONG_MAX ? 0 : c->version);
        atomic_store(&c->last_stale, c->stale);
    }
    return RS_OK;
}

/* Under async and ssp: the pushes the servers had applied when this step's parameters left
 * them (the fewest over the servers) and their staleness (the most). Thread-safe. */
static void ps_progress(void *state, long long *applied, int *staleness) {
    PsClient *c = state;
    *applied = atomic_load(&c->last_version);
    *staleness = atomic_load(&c->last_stale);
}

static void ps_server_busy_op(void *state, double *busy_s, long long *steps) {
    PsClient *c = state;
    *busy_s = 0;
    *steps = 0;
    if (c && c->server) ps_server_busy(c->server, busy_s, steps);
}

/* Sends an allreduce's contribution (src, count floats on the host) to the servers in nchunks
 * chunks, each split over the servers; counts the replies to wait for in c->left. 0 or RS_ERR_PEER. */
/* Sends the allreduce's striped chunk b (c->sum_sl[b]) of this call, whose payload is data. */
static int client_sum_send(void *arg, int b, const void *data, size_t bytes) {
    PsClient *c = arg;
    const ShardSlice *sl = &c->sum_sl[b];
    WireHeader h = client_header(c, WIRE_SUM, c->seq);
    h.total = c->sum_total;
    h.bucket = (uint32_t)b;
    h.offset = sl->off;
    h.count = sl->count;
    h.dtype = c->sdtype;
    return client_send(c, sl->server, &h, data, bytes);
}

static int client_sum_flush(PsClient *c) { return sendq_flush(&c->sq, c->credit, client_sum_send, c); }

static int client_allreduce_send(PsClient *c, const float *src, size_t count, int nchunks) {
    if (c->sum_striped) { /* one slice a chunk, to its server, behind the credit */
        if (c->sq.cap < nchunks) {
            sendq_free(&c->sq);
            RS_TRY(sendq_init(&c->sq, nchunks));
        }
        c->sq.head = c->sq.n = 0;
        for (int b = 0; b < nchunks; b++) {
            const ShardSlice *sl = &c->sum_sl[b];
            const void *data = c->scoded ? (const void *)(c->enc_sum + sl->off * c->sel) : (const void *)(src + sl->off);
            size_t bytes = sl->count * (c->scoded ? c->sel : sizeof(float));
            if (c->local[sl->server]) RS_TRY(client_sum_send(c, b, data, bytes));
            else RS_TRY(sendq_put(&c->sq, b, data, bytes));
            client_owe(c, sl->server);
        }
        return client_sum_flush(c);
    }
    for (int b = 0; b < nchunks; b++) { /* key ranges: every chunk cut by the servers' */
        size_t lo, hi;
        shard_chunk(count, c->per, b, &lo, &hi);
        int n = shard_weighted_split(count, &c->w, lo, hi, c->split);
        for (int j = 0; j < n; j++) {
            WireHeader h = client_header(c, WIRE_SUM, c->seq);
            h.total = count;
            h.bucket = (uint32_t)b;
            h.offset = c->split[j].off;
            h.count = c->split[j].count;
            if (c->scoded) {
                h.dtype = c->sdtype;
                RS_TRY(client_send(c, c->split[j].server, &h, c->enc_sum + c->split[j].off * c->sel,
                                   c->split[j].count * c->sel));
            } else {
                RS_TRY(client_send(c, c->split[j].server, &h, src + c->split[j].off,
                                   c->split[j].count * sizeof(float)));
            }
            client_owe(c, c->split[j].server);
        }
    }
    return RS_OK;
}

/* After a failed allreduce: its slices left zero-copy from the caller's buffer (or the encode
 * buffer), which the caller may free as soon as it returns, so wait (up to the job's timeout)
 * until no message holds them. Returns rc, its message extended when they are still held. */
static int client_unlend(PsClient *c, int rc) {
    if (msg_lend_drain(&c->zc, c->job.timeout)) return rc;
    char why[512];
    snprintf(why, sizeof why, "%s", rs_errmsg());
    return rs_error(rc, "%s (and %ld of rank %d's messages still hold its buffer after %g s more: keep the buffer "
                        "until the back end is destroyed)", why, msg_lent(&c->zc), c->rank, c->job.timeout);
}

static int ps_allreduce(void *state, float *buf, size_t count) {
    PsClient *c = state;
    if (count == 0) return RS_OK;
    int nchunks = shard_nchunks(count, c->per);
    size_t need = (size_t)nchunks * (size_t)c->K;
    if (need > c->got_cap) {
        unsigned char *g = realloc(c->got, need);
        if (!g) return rs_error(RS_ERR_RUNTIME, "out of memory");
        c->got = g;
        c->got_cap = need;
    }
    memset(c->got, 0, need);
    if (c->sum_striped && c->sum_owner_total != count) { /* each chunk's server, for this size */
        if (nchunks > c->sum_owner_cap) {
            free(c->sum_owner), free(c->sum_sl);
            c->sum_owner = malloc((size_t)nchunks * sizeof *c->sum_owner);
            c->sum_sl = malloc((size_t)nchunks * sizeof *c->sum_sl);
            c->sum_owner_cap = c->sum_owner && c->sum_sl ? nchunks : 0;
            c->sum_owner_total = 0;
            if (!c->sum_owner_cap) return rs_error(RS_ERR_RUNTIME, "out of memory");
        }
        shard_stripe_chunks(count, c->per, nchunks, &c->w, c->sum_owner);
        for (int b = 0; b < nchunks; b++) { /* each chunk, wholly on its server */
            size_t lo, hi;
            shard_chunk(count, c->per, b, &lo, &hi);
            c->sum_sl[b] = (ShardSlice){.server = c->sum_owner[b], .bucket = b, .off = lo, .count = hi - lo};
        }
        c->sum_owner_total = count;
    }
    RS_TRY(client_stage(c, count));
    const float *src;
    RS_TRY(client_host_view(c, buf, 0, count, &src));
    if (c->scoded) { /* the whole contribution encoded once; its slices leave from there */
        RS_TRY(client_enc_sum(c, count));
        codec_encode(&c->sc, src, c->enc_sum, count);
    }
    c->kind = WAIT_SUM;
    c->sum_in = 0;
    c->sum_buf = buf;
    c->sum_total = count;
    c->left = 0;
    if (c->owe) memset(c->owe, 0, (size_t)c->K * sizeof *c->owe);
    c->any_reply = 0;
    int rc = client_allreduce_send(c, src, count, nchunks);
    if (rc == RS_OK) {
        char what[64];
        snprintf(what, sizeof what, "allreduce %u", c->seq);
        rc = client_wait(c, 0, what);
        if (rc == RS_OK) msg_wait_until(c->sum_in); /* the call ends when the last reply is in */
    }
    if (rc != RS_OK) {
        c->seq++; /* a late reply to this one must not pass for the next one's */
        return client_unlend(c, rc);
    }
    Device *d = c->job.dev;
    RS_TRY(d->ops->stream_sync(d, NULL));
    c->seq++;
    return RS_OK;
}

/* Tells every dedicated server (every server, under async) this worker is done (they then hand
 * rank 0 their report entry). */
static void client_bye(PsClient *c) {
    if (!(c->nlocal < c->K || c->async) || c->said_bye || c->failed) return;
    c->said_bye = 1;
    for (int k = c->async ? 0 : c->nlocal; k < c->K; k++) {
        if (!c->sock[k]) continue;
        WireHeader h = client_header(c, WIRE_BYE, 0);
        if (client_send(c, k, &h, NULL, 0)) log_warn("%s", rs_errmsg());
    }
}

/* The last step is done: dedicated servers get their goodbye (its header bytes are counted)
 * and then hand rank 0 their report entries. */
static int ps_close(void *state) {
    client_bye(state);
    return RS_OK;
}

/* Every server (colocated, dedicated, sharded, byteps's) writes a checkpoint part of its own. */
static int ps_checkpoint_servers(void *state) {
    const PsClient *c = state;
    return c->nparams ? c->K : 0;
}

static void ps_traffic(void *state, SyncTraffic *out) {
    PsClient *c = state;
    *out = c->tr;
    sync_traffic_counts(&c->count, out);
    out->transport = c->via ? c->via : "inproc"; /* one rank: its colocated server is in-process */
    if (c->server) {
        SyncTraffic s;
        ps_server_traffic(c->server, &s);
        sync_traffic_add(out, &s);
        out->split = out->split && s.split;
    }
}

static void ps_destroy(void *state) {
    PsClient *c = state;
    if (!c) return;
    if (c->sock) {
        client_bye(c);
        for (int k = 0; k < c->K; k++) msg_close_socket(c->sock[k], 0);
    }
    ps_server_destroy(c->server);
    int drained = msg_lend_drain(&c->zc, 2.0);
    if (drained) device_host_free(c->job.dev, c->stage, c->stage_cap * sizeof(float), MEM_COMM);
    if (c->enc && drained) {
        free(c->enc);
        mem_account(MEM_COMM, -(long long)c->enc_bytes);
    }
    free(c->enc_at);
    if (c->enc_sum && drained) {
        free(c->enc_sum);
        mem_account(MEM_COMM, -(long long)(c->enc_sum_cap * c->sel));
    }
    if (!drained) log_warn("ps: rank %d: pushes still in flight at exit", c->rank);
    shard_plan_free(&c->plan);
    sendq_free(&c->q);
    sendq_free(&c->sq);
    free(c->sum_owner);
    free(c->sum_sl);
    free(c->parts);
    free(c->pfirst);
    free(c->sock);
    free(c->local);
    free(c->node);
    free(c->split);
    free(c->got);
    free(c->owe);
    free(c->bucket_left);
    free(c->bucket_in);
    free(c->t_push);
    free(c);
}

static int ps_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    return client_init(job, state, endpoint, len, 0);
}

static int byteps_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    return client_init(job, state, endpoint, len, 1);
}

/* ps and byteps differ only in their init (which servers, which split). */
#define CLIENT_OPS(NAME, INIT)                                                                                  \
    {                                                                                                           \
        .name = NAME,                                                                                           \
        .place = SYNC_ON_HOST, /* the engine stages a GPU's buffers; start and poll run on its comm thread */ \
        .result = SYNC_UPDATES, .init = INIT, .connect = ps_connect, .broadcast = ps_broadcast,                \
        .start = ps_start, .poll = ps_poll, .begin_step = ps_begin_step, .end_step = ps_end_step,              \
        .server_busy = ps_server_busy_op, .progress = ps_progress, .health = ps_health, .close = ps_close,     \
        .checkpoint_servers = ps_checkpoint_servers,                                                            \
        .allreduce = ps_allreduce, .traffic = ps_traffic, .destroy = ps_destroy,                               \
    }

static const SyncOps ps_ops = CLIENT_OPS("ps", ps_init);
static const SyncOps byteps_ops = CLIENT_OPS("byteps", byteps_init);

/* The "ps" back end: push each bucket, pull the updated parameters (rank 0 hosts the server
 * when it is colocated). Never NULL. */
const SyncOps *sync_ps(void) { return &ps_ops; }

/* The "byteps" back end (BytePS's summation split, OSDI'20 section 4.1; ps/ps.h). Never NULL. */
const SyncOps *sync_byteps(void) { return &byteps_ops; }
