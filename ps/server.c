/* server.c - the parameter server's loop: a ROUTER, per-step contribution tracking, the rank-order sum, the update rule, the replies */
#include "server.h"
#include "shard.h"
#include "../base/clock.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/heap.h"
#include "../base/mem.h"
#include "../net/link.h"
#include "../base/log.h"
#include "../net/zendpoint.h"
#include "../engine/trace.h"
#include "../net/zmq_check.h"
#include "../engine/config_check.h"
#include "../engine/checkpoint.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define PS_DROP (-1) /* a handler's verdict: the message was refused (counted, not fatal) */
#define PS_REORDER 64 /* messages drained at once and handled in their senders' link order */

/* The state of one kind of step: training pushes (SGD) or allreduce contributions (sum). */
typedef struct {
    int op;                  /* WIRE_PUSH or WIRE_SUM */
    PsRuleFn rule;
    int needs_samples;       /* the rule waits for rank 0's WIRE_STEP */
    int begun, active;       /* a step was seen; the current one is not complete */
    uint32_t step;
    size_t total;            /* keys of the step's space */
    ShardRange range;        /* this server's part of them */
    int nchunks, nslices, done;
    int cap_chunks;
    int *count;              /* [cap_chunks] contributions in */
    unsigned char *seen;     /* [cap_chunks * nworkers] */
    unsigned char *waiting;  /* [cap_chunks] summed, waiting for the step's sample count */
    double *in;              /* [cap_chunks] --link: when the chunk's last contribution is in on
                              * this process's interface (booked as it came, not slept for) */
    unsigned char *due;      /* [cap_chunks] complete, to be applied once its contributions are in */
    int ndue;
    size_t cap;              /* keys the buffers hold */
    float *recv, *sum;       /* device: nworkers * cap, cap */
    float *stage;            /* host staging of replies (cap) where the device is not host memory */
    unsigned char *enc;      /* a 16-bit wire: the replies encoded (cap elements, host, MEM_SERVER) */
    float *dec;              /* a 16-bit wire on a device that is not host memory: one contribution
                              * decoded on its way to recv (cap, host, MEM_SERVER) */
    MsgFrame *held;          /* [cap_chunks * nworkers] where the device is host memory: each
                              * contribution's payload, kept until its slice is summed straight
                              * from them (recv stays unused); empty messages otherwise */
    long long samples;       /* the step's global samples (-1: not known yet) */
    int pushed;              /* a contribution of the open step is in: its timeout runs (a step
                              * opened by rank 0's early STEP waits for the workers' compute) */
    double t_progress;
} PsPhase;

struct PsServer {
    PsServerArgs a;
    uint64_t token;
    void *router;
    char endpoint[512], inproc[64], name[32];
    int host_visible;
    Device *dev;             /* the serving loop's device: a.dev, or the thread's own handle */
    Device tdev;
    size_t per;              /* elements per allreduce chunk */
    int sum_striped;         /* --ps-partition-kb: each chunk wholly on sum_owner[b] (not cut by ranges) */
    int *sum_owner;          /* [sum.nchunks] each allreduce chunk's server (striped) */
    size_t *sum_base;        /* [sum.nchunks] where this server's chunk b starts in its buffers */
    int sum_cap;
    /* training */
    ShardWeights w;          /* the key split (a.weights, or the even one over a.nservers) */
    ShardRange range;        /* the training keys' range (per_bucket: the keys span it, not all held) */
    ShardSlice *slice;       /* [nbuckets]: this server's part of each bucket (count 0: none) */
    size_t *base;            /* [nbuckets]: where slice b's keys start in the local arrays */
    size_t nkeys;            /* training keys held */
    float *params, *mom, *mom2; /* master parameters; SGD's momentum (server tag), or AdamW's two
                                  * moments (optimizer tag: the optimizer's state where it runs) */
    MemTag mom_tag;
    int init_left;           /* slices of initial parameters still to come from rank 0 */
    MsgIn *early;            /* [early_cap] pushes that came before the initial parameters were all
                              * in (under DataParallel's step the others train on rank 0's
                              * replicate, which can overtake rank 0's INIT on another pipe):
                              * handled, in arrival order, once they are */
    int nearly, early_cap;   /* early_cap: one step's pushes from every worker */
    unsigned char *init_seen, *pull;
    PsPhase train, sum;
    unsigned char *known, *bye;
    MsgIn batch[PS_REORDER];  /* the messages drained at once (ps_server_run) */
    int nbye, warned;
    size_t cur_bytes;        /* payload bytes of the message being handled */
    MsgIn *cur;              /* it, whose payload frame a contribution may keep (msg_frame_take) */
    double cur_stamp;        /* its sender's emulated-link stamp (0: none) */
    double cur_in;           /* --link: when it is in on this process's interface (server_accept) */
    double t_last;
    MsgLend zc;              /* replies lent without a copy, not yet let go */
    MsgCount count;          /* the data plane's traffic (net/msg.h); tr holds the split flag */
    /* --wire (docs/ps-protocol.md): pushes arrive in the gradients' codec and are decoded to
     * fp32; replies leave in the parameters' (PARAMS); the allreduce (SUM, SUMMED) travels in
     * the allreduce's. All three are the wire's type but under FP8, a gradient format, where the
     * parameters and the allreduce travel in bf16 (ps/client.c) */
    Codec gc, pc, sc;
    int coded;               /* a 16- or 8-bit wire */
    uint16_t dtype;          /* the pushes' dtype (WIRE_F32 under fp32) */
    uint16_t pdtype, sdtype; /* the parameters', the allreduce's */
    size_t el;               /* bytes of one element of a reply (PARAMS, SUMMED) */
    /* --ps-consistency async / ssp:S (S >= 1): each push applied as it arrives */
    int async;               /* 1: the path below; 0: the synchronous step */
    int bound;               /* S, or CONFIG_ASYNC: no bound */
    long long *clock;        /* [nworkers] pushes of each worker applied (its next step) */
    int *push_left;          /* [nworkers] slices of the worker's open push still to come */
    unsigned char *held;     /* [nworkers] its push is applied; its reply waits for the bound */
    double *t_held, *t_seen; /* [nworkers] since when held; its last message */
    long long version;       /* pushes applied in all */
    /* checkpoints (engine/checkpoint.h): --resume's state, put in place once the initial
     * parameters are in (host memory, nkeys each; NULL: a fresh run) */
    float *ck_params, *ck_mom, *ck_mom2;
    long ck_step;            /* the step resumed from (0: none) */
    /* counters, read by other threads */
    pthread_mutex_t lock;
    SyncTraffic tr;
    unsigned char *node;       /* [nnode] 1: worker r runs on this host (ps_server_set_nodes); NULL: not known */
    int nnode;
    double busy_s;
    double wall_offset;        /* clock_wall() - clock_now(), for trace timestamps */
    long long steps;
    /* the thread (colocated) */
    pthread_t thread;
    int started;
    atomic_int stop;
    int status;
    char why[512];
};

/* ---- the rules -------------------------------------------------------------------------------- */

const float *ps_rule_sgd(const PsUpdate *u) {
    const Config *c = u->cfg;
    float scale = u->global_samples > 0 ? 1.0f / (float)u->global_samples : 0.0f;
    u->dev->k->sgd_step(u->dev->kctx, u->params, u->sum, u->mom, u->n, (float)c->lr, (float)c->momentum,
                        (float)c->weight_decay, scale);
    return u->params;
}

const float *ps_rule_adamw(const PsUpdate *u) {
    const Config *c = u->cfg;
    float scale = u->global_samples > 0 ? 1.0f / (float)u->global_samples : 0.0f;
    u->dev->k->adamw_step(u->dev->kctx, u->params, u->sum, u->mom, u->mom2, u->n, (float)c->lr, (float)c->beta1,
                          (float)c->beta2, (float)c->eps, (float)c->weight_decay, scale, u->t < 1 ? 1 : u->t);
    return u->params;
}

const float *ps_rule_sum(const PsUpdate *u) { return u->sum; }

/* ---- counters ------------------------------------------------------------------------------- */

/* The host worker's own messages to its colocated server stay inside the process: not traffic. */
static int server_counted(const PsServer *s, int r) { return !(s->a.colocated && r == s->a.local_rank); }

/* Whether worker r runs on this server's host (ps_server_set_nodes). */
static int server_node(PsServer *s, int r) {
    pthread_mutex_lock(&s->lock);
    int node = s->node && r >= 0 && r < s->nnode && s->node[r];
    pthread_mutex_unlock(&s->lock);
    return node;
}

/* Counts a refused message; the first few are also logged with the reason. */
/* Counts the message being handled as received (called once it is accepted, before any reply
 * it causes, so that a worker that has its reply also sees the message counted), and books it on
 * the emulated interface as it came (--link): s->cur_in is when it is in. A contribution of the
 * synchronous step (defer) is not waited for here: its chunk is applied once its last one is in
 * (phase_ready), so that the thread books what comes meanwhile in the order it came, as its host
 * worker's thread books the replies (sleeping here let the replies take the interface first and
 * starved the pushes); everything else is waited for at once. */
static void server_accept_as(PsServer *s, int r, int defer) {
    s->known[r] = 1;
    s->cur_in = msg_take(WIRE_HEADER_BYTES + s->cur_bytes, s->cur_stamp, !server_counted(s, r), server_node(s, r), 1,
                         &s->count);
    if (!defer) msg_wait_until(s->cur_in);
    s->t_last = clock_now();
}

static void server_accept(PsServer *s, int r) { server_accept_as(s, r, 0); }

/* Sends h (and payload) to worker r through the message layer: paced on the emulated link and
 * counted unless r is this process's own worker (colocated). 0 or -1 (msg_errno()). */
static int server_send(PsServer *s, int r, const WireHeader *h, const void *payload, size_t bytes, MsgLend *zc) {
    char id[16];
    size_t idlen = ps_identity(r, id, sizeof id);
    return ps_send(s->router, id, idlen, h, payload, bytes, zc, !server_counted(s, r), server_node(s, r), &s->count, NULL);
}

static int server_drop(PsServer *s, const char *why) {
    msg_count_dropped(&s->count);
    if (s->warned++ < 5) log_warn("%s: dropped a message: %s", s->name, why);
    return PS_DROP;
}

/* ---- buffers -------------------------------------------------------------------------------- */

/* Frees ph's wire buffers (enc, dec), counted down under MEM_SERVER. */
static void phase_free_wire(PsServer *s, PsPhase *ph) {
    if (ph->enc) mem_account(MEM_SERVER, -(long long)(ph->cap * s->el));
    if (ph->dec) mem_account(MEM_SERVER, -(long long)(ph->cap * sizeof(float)));
    free(ph->enc);
    free(ph->dec);
    ph->enc = NULL;
    ph->dec = NULL;
}

/* A 16-bit wire: allocates ph's wire buffers for keys keys (MEM_SERVER). 0 or RS_ERR_RUNTIME. */
static int phase_alloc_wire(PsServer *s, PsPhase *ph, size_t keys) {
    if (!s->coded) return RS_OK;
    if (!(ph->enc = malloc(keys * s->el))) return rs_error(RS_ERR_RUNTIME, "out of memory");
    mem_account(MEM_SERVER, (long long)(keys * s->el));
    if (s->host_visible) return RS_OK;
    if (!(ph->dec = malloc(keys * sizeof(float)))) return rs_error(RS_ERR_RUNTIME, "out of memory");
    mem_account(MEM_SERVER, (long long)(keys * sizeof(float)));
    return RS_OK;
}

/* Lets go of the contributions ph keeps (held[] stays, its messages empty). */
static void phase_release(PsServer *s, PsPhase *ph) {
    if (!ph->held) return;
    size_t n = (size_t)ph->cap_chunks * (size_t)s->a.nworkers;
    for (size_t i = 0; i < n; i++)
        if (msg_frame_size(&ph->held[i])) msg_frame_close(&ph->held[i]);
}

/* Closes and frees held[]. */
static void phase_free_held(PsServer *s, PsPhase *ph) {
    if (!ph->held) return;
    size_t n = (size_t)ph->cap_chunks * (size_t)s->a.nworkers;
    for (size_t i = 0; i < n; i++) msg_frame_close(&ph->held[i]);
    free(ph->held);
    ph->held = NULL;
}

static void phase_free(PsServer *s, PsPhase *ph) {
    size_t N = (size_t)s->a.nworkers;
    phase_free_held(s, ph);
    phase_free_wire(s, ph);
    device_free(s->a.dev, ph->recv, N * ph->cap * sizeof(float), MEM_SERVER);
    device_free(s->a.dev, ph->sum, ph->cap * sizeof(float), MEM_SERVER);
    device_host_free(s->a.dev, ph->stage, ph->cap * sizeof(float), MEM_COMM);
    free(ph->count);
    free(ph->seen);
    free(ph->waiting);
    free(ph->in);
    free(ph->due);
    ph->in = NULL;
    ph->due = NULL;
    ph->recv = ph->sum = ph->stage = NULL;
    ph->count = NULL;
    ph->seen = ph->waiting = NULL;
    ph->cap = 0;
    ph->cap_chunks = 0;
}

/* Makes ph hold at least keys keys and chunks chunks. Called only between steps, after every
 * zero-copy reply has been let go. 0 or RS_ERR_RUNTIME. */
static int phase_reserve(PsServer *s, PsPhase *ph, size_t keys, int chunks) {
    size_t N = (size_t)s->a.nworkers;
    if (keys > ph->cap) {
        if (!msg_lend_drain(&s->zc, s->a.timeout))
            return rs_error(RS_ERR_PEER, "%s: replies still in flight after %g s", s->name, s->a.timeout);
        device_free(s->a.dev, ph->recv, N * ph->cap * sizeof(float), MEM_SERVER);
        device_free(s->a.dev, ph->sum, ph->cap * sizeof(float), MEM_SERVER);
        device_host_free(s->a.dev, ph->stage, ph->cap * sizeof(float), MEM_COMM);
        phase_free_wire(s, ph);
        ph->recv = ph->sum = ph->stage = NULL;
        ph->cap = 0;
        ph->recv = device_alloc(s->dev, N * keys * sizeof(float), MEM_SERVER);
        ph->sum = ph->recv ? device_alloc(s->dev, keys * sizeof(float), MEM_SERVER) : NULL;
        /* a server on a GPU stages its replies in pinned host memory, counted as comm (it exists to send) */
        if (ph->sum && !s->host_visible) ph->stage = device_host_alloc(s->a.dev, keys * sizeof(float), MEM_COMM);
        int wired = ph->sum && (s->host_visible || ph->stage) ? phase_alloc_wire(s, ph, keys) == RS_OK : 0;
        if (!ph->recv || !ph->sum || (!s->host_visible && !ph->stage) || !wired) {
            ph->cap = keys; /* what phase_free_wire counts down */
            phase_free_wire(s, ph);
            ph->cap = 0;
            char why[512];
            snprintf(why, sizeof why, "%s", rs_errmsg());
            device_free(s->a.dev, ph->recv, N * keys * sizeof(float), MEM_SERVER);
            device_free(s->a.dev, ph->sum, keys * sizeof(float), MEM_SERVER);
            device_host_free(s->a.dev, ph->stage, keys * sizeof(float), MEM_COMM);
            ph->recv = ph->sum = ph->stage = NULL;
            return rs_error(RS_ERR_RUNTIME, "%s: buffers for %zu keys from %zu workers: %s", s->name, keys, N, why);
        }
        ph->cap = keys;
    }
    if (chunks > ph->cap_chunks) {
        phase_free_held(s, ph); /* between steps: every message it kept was let go */
        free(ph->count);
        free(ph->seen);
        free(ph->waiting);
        free(ph->in);
        free(ph->due);
        ph->count = calloc((size_t)chunks, sizeof *ph->count);
        ph->seen = calloc((size_t)chunks * N, 1);
        ph->waiting = calloc((size_t)chunks, 1);
        ph->in = calloc((size_t)chunks, sizeof *ph->in);
        ph->due = calloc((size_t)chunks, 1);
        if (s->host_visible && (ph->held = malloc((size_t)chunks * N * sizeof *ph->held)))
            for (size_t i = 0; i < (size_t)chunks * N; i++) msg_frame_init(&ph->held[i]);
        ph->cap_chunks = ph->count && ph->seen && ph->waiting && ph->in && ph->due && (ph->held || !s->host_visible)
                             ? chunks
                             : 0;
        if (!ph->cap_chunks) {
            free(ph->held);
            ph->held = NULL;
            return rs_error(RS_ERR_RUNTIME, "%s: out of memory for %d chunks", s->name, chunks);
        }
    }
    return RS_OK;
}

/* ---- slices ---------------------------------------------------------------------------------- */

/* This server's part of chunk b of ph's step: keys [*off, *off + *count), count 0 when none. */
static void phase_slice(const PsServer *s, const PsPhase *ph, int b, size_t *off, size_t *count) {
    size_t lo, hi;
    if (ph->op == WIRE_PUSH && s->slice) { /* planned by server_alloc_train */
        *off = s->slice[b].off;
        *count = s->slice[b].count;
        return;
    }
    if (ph->op == WIRE_PUSH) {
        lo = s->a.buckets[b].lo;
        hi = s->a.buckets[b].hi;
    } else {
        shard_chunk(ph->total, s->per, b, &lo, &hi);
        if (s->sum_striped) { /* the whole chunk, or none of it */
            *off = lo;
            *count = s->sum_owner[b] == s->a.id ? hi - lo : 0;
            return;
        }
    }
    size_t a = lo > ph->range.lo ? lo : ph->range.lo, z = hi < ph->range.hi ? hi : ph->range.hi;
    *off = a;
    *count = z > a ? z - a : 0;
}

/* Where key off of chunk b's slice lies in ph's buffers and, training, in the parameters. */
static size_t phase_at(const PsServer *s, const PsPhase *ph, int b, size_t off) {
    if (ph->op == WIRE_PUSH) return s->base[b] + (off - s->slice[b].off);
    if (s->sum_striped) {
        size_t lo, hi;
        shard_chunk(ph->total, s->per, b, &lo, &hi);
        return s->sum_base[b] + (off - lo);
    }
    return off - ph->range.lo;
}

/* Striped allreduce chunks of total elements: each chunk's server and where this server's
 * chunks lie in its buffers (their keys, in chunk order); *keys the keys it holds. 0 or
 * RS_ERR_RUNTIME. */
static int server_stripe_sum(PsServer *s, size_t total, int nchunks, size_t *keys) {
    if (nchunks > s->sum_cap) {
        int *o = realloc(s->sum_owner, (size_t)nchunks * sizeof *o);
        if (o) s->sum_owner = o;
        size_t *bs = o ? realloc(s->sum_base, (size_t)nchunks * sizeof *bs) : NULL;
        if (bs) s->sum_base = bs;
        if (!o || !bs) return rs_error(RS_ERR_RUNTIME, "%s: out of memory for %d chunks", s->name, nchunks);
        s->sum_cap = nchunks;
    }
    shard_stripe_chunks(total, s->per, nchunks, &s->w, s->sum_owner);
    *keys = 0;
    for (int b = 0; b < nchunks; b++) {
        size_t lo, hi;
        shard_chunk(total, s->per, b, &lo, &hi);
        s->sum_base[b] = *keys;
        if (s->sum_owner[b] == s->a.id) *keys += hi - lo;
    }
    return RS_OK;
}

/* Starts step `step` of ph over total keys: plans the allreduce's chunks, clears the tracking. */
static int phase_begin(PsServer *s, PsPhase *ph, uint32_t step, size_t total) {
    if (ph->op == WIRE_SUM && (!ph->begun || total != ph->total)) {
        ph->total = total;
        ph->range = shard_weighted_range(total, &s->w, s->a.id);
        ph->nchunks = shard_nchunks(total, s->per);
        size_t keys = ph->range.hi - ph->range.lo;
        if (s->sum_striped) RS_TRY(server_stripe_sum(s, total, ph->nchunks, &keys));
        RS_TRY(phase_reserve(s, ph, keys, ph->nchunks));
        ph->nslices = 0;
        for (int b = 0; b < ph->nchunks; b++) {
            size_t off, n;
            phase_slice(s, ph, b, &off, &n);
            ph->nslices += n > 0;
        }
    }
    memset(ph->count, 0, (size_t)ph->nchunks * sizeof *ph->count);
    memset(ph->seen, 0, (size_t)ph->nchunks * (size_t)s->a.nworkers);
    memset(ph->waiting, 0, (size_t)ph->nchunks);
    memset(ph->in, 0, (size_t)ph->nchunks * sizeof *ph->in);
    memset(ph->due, 0, (size_t)ph->nchunks);
    ph->ndue = 0;
    ph->step = step;
    ph->begun = 1;
    ph->active = ph->nslices > 0;
    ph->done = 0;
    ph->samples = -1;
    ph->pushed = 0;
    ph->t_progress = clock_now();
    return RS_OK;
}

/* Sends n values at payload (host memory) as op to every worker (DataParallel's updates: to
 * rank 0 only). */
static int server_reply_all(PsServer *s, const WireHeader *h, const void *payload, size_t bytes) {
    for (int i = 0; i < s->a.nworkers; i++) {
        /* colocated, the host worker goes last: once it has its reply, every other send is counted;
         * and every server starts past its own index, so that servers finishing at once do not
         * all answer the same worker first */
        int r = s->a.colocated ? (s->a.local_rank + 1 + i) % s->a.nworkers : (s->a.id + i) % s->a.nworkers;
        if (s->a.dataparallel && h->op == WIRE_PARAMS && r != 0) continue;
        if (server_send(s, r, h, payload, bytes, &s->zc) < 0) {
            int e = msg_errno();
            return rs_error(RS_ERR_PEER, "%s: cannot send %s of step %u to rank %d: %s", s->name, wire_op_name(h->op),
                            h->step, r, e == EHOSTUNREACH ? "it is gone" : msg_strerror(e));
        }
    }
    return RS_OK;
}

#define PS_TILE 2048 /* keys summed at once from the kept messages (a tile of the sum stays in L1) */

/* y = a + b over n floats read from payloads that need not be 4-byte aligned, a block of 8 at
 * a time through memcpy (vector loads and adds at -O2; a loop of single unaligned floats stays
 * scalar): fp32's first two contributions in one pass instead of codec_decode's copy and
 * codec_decode_add's add, the same bits. */
static void sum_pair(float *restrict y, const unsigned char *restrict a, const unsigned char *restrict b, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float u[8], v[8];
        memcpy(u, a + i * sizeof(float), sizeof u);
        memcpy(v, b + i * sizeof(float), sizeof v);
        for (int k = 0; k < 8; k++) y[i + k] = u[k] + v[k];
    }
    for (; i < n; i++) {
        float u, v;
        memcpy(&u, a + i * sizeof(float), sizeof u);
        memcpy(&v, b + i * sizeof(float), sizeof v);
        y[i] = u + v;
    }
}

/* Where the device is host memory: sum = chunk b's kept contributions added in rank order,
 * element by element, read straight from the messages (fp32, or decoded from the wire with the
 * gradients' codec: the same bits as decoding each into recv, then copy and add), a tile of
 * keys at a time; then lets the messages go. */
static void slice_sum_held(PsServer *s, PsPhase *ph, int b, float *sum, size_t n) {
    size_t N = (size_t)s->a.nworkers;
    MsgFrame *m = ph->held + (size_t)b * N;
    const Codec *c = ph->op == WIRE_PUSH ? &s->gc : &s->sc;
    size_t el = codec_elem_bytes(c->type), head = codec_head_bytes(c->type); /* FP8: each message's scale ahead */
    for (size_t i = 0; i < n; i += PS_TILE) {
        size_t k = n - i < PS_TILE ? n - i : PS_TILE;
        float *y = sum + i;
        size_t r = 0;
        if (c->type == CODEC_F32 && N >= 2) { /* fp32: the first two in one pass */
            sum_pair(y, (const unsigned char *)msg_frame_data(&m[0]) + i * el,
                     (const unsigned char *)msg_frame_data(&m[1]) + i * el, k);
            r = 2;
        }
        for (; r < N; r++) {
            const unsigned char *x = msg_frame_data(&m[r]);
            Codec f = head ? codec_head_get(c->type, x) : *c;
            codec_decode_elems(&f, x + head + i * el, y, k, r > 0);
        }
    }
    for (size_t r = 0; r < N; r++) msg_frame_close(&m[r]);
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

/* Writes this server's part of the checkpoint of step (complete here): its keys' parameters and
 * optimizer state. 0 or RS_ERR_* naming the file. */
static int server_checkpoint(PsServer *s, long step) {
    size_t bytes = s->nkeys * sizeof(float);
    uint64_t keys = s->nkeys;
    char name[48];
    CkptWriter w;
    ckpt_writer_init(&w);
    ckpt_put(&w, "keys", &keys, sizeof keys);
    int rc = ckpt_put_device(&w, s->dev, "params", s->params, bytes);
    if (rc == RS_OK) rc = ckpt_put_device(&w, s->dev, "mom", s->mom, bytes);
    if (rc == RS_OK && s->mom2) rc = ckpt_put_device(&w, s->dev, "mom2", s->mom2, bytes);
    if (rc != RS_OK) {
        ckpt_writer_free(&w);
        return rs_error(rc, "%s: its checkpoint of step %ld: %s", s->name, step, rs_errmsg());
    }
    ckpt_part_file(1, s->a.id, name, sizeof name);
    return ckpt_commit(&w, s->a.cfg->checkpoint, step, name, ckpt_job_hash(s->a.token));
}

/* --resume: reads this server's part into host memory (put in place by on_init). 0 or
 * RS_ERR_INPUT naming the file and what does not fit. */
static int server_resume_load(PsServer *s) {
    char name[48];
    CkptPart p;
    size_t n = s->nkeys, bytes = n * sizeof(float);
    uint64_t keys;
    ckpt_part_file(1, s->a.id, name, sizeof name);
    RS_TRY(ckpt_resume_load(s->a.cfg->resume, name, &p));
    int rc = ckpt_get(&p, "keys", &keys, sizeof keys);
    if (rc == RS_OK && keys != n)
        rc = rs_error(RS_ERR_INPUT, "checkpoint part %s: %llu keys, %s holds %zu", p.path, (unsigned long long)keys,
                      s->name, n);
    s->ck_params = malloc(bytes ? bytes : 1);
    s->ck_mom = malloc(bytes ? bytes : 1);
    s->ck_mom2 = s->mom2 ? malloc(bytes ? bytes : 1) : NULL;
    if (rc == RS_OK && (!s->ck_params || !s->ck_mom || (s->mom2 && !s->ck_mom2)))
        rc = rs_error(RS_ERR_RUNTIME, "%s: out of memory for its checkpoint", s->name);
    if (rc == RS_OK) rc = ckpt_get(&p, "params", s->ck_params, bytes);
    if (rc == RS_OK) rc = ckpt_get(&p, "mom", s->ck_mom, bytes);
    if (rc == RS_OK && s->mom2) rc = ckpt_get(&p, "mom2", s->ck_mom2, bytes);
    if (rc == RS_OK && p.step < 1) rc = rs_error(RS_ERR_INPUT, "checkpoint part %s: step %ld", p.path, p.step);
    s->ck_step = p.step;
    ckpt_part_free(&p);
    return rc;
}

/* ---- applying a slice -------------------------------------------------------------------------- */

/* Sums chunk b's contributions in rank order, applies the rule, answers every worker. */
static int slice_apply(PsServer *s, PsPhase *ph, int b) {
    double t0 = clock_now();
    Device *d = s->dev;
    size_t off, n;
    phase_slice(s, ph, b, &off, &n);
    size_t at = phase_at(s, ph, b, off);
    float *sum = ph->sum + at;
    if (ph->held) {
        slice_sum_held(s, ph, b, sum, n);
    } else {
        RS_TRY(d->ops->copy(d, sum, ph->recv + at, n * sizeof(float), 2, NULL));
        for (int r = 1; r < s->a.nworkers; r++) d->k->axpy(d->kctx, sum, 1.0f, ph->recv + (size_t)r * ph->cap + at, n);
    }
    PsUpdate u = {.dev = d, .cfg = s->a.cfg, .sum = sum, .n = n, .global_samples = ph->samples,
                  .params = s->params && ph->op == WIRE_PUSH ? s->params + at : NULL,
                  .mom = s->mom && ph->op == WIRE_PUSH ? s->mom + at : NULL,
                  .mom2 = s->mom2 && ph->op == WIRE_PUSH ? s->mom2 + at : NULL, .t = (int)ph->step + 1};
    const float *out = ph->rule(&u);
    const void *payload = out;
    if (!s->host_visible) {
        RS_TRY(d->ops->copy(d, ph->stage + at, out, n * sizeof(float), 1, NULL));
        payload = ph->stage + at;
    }
    RS_TRY(d->ops->stream_sync(d, NULL));
    RS_TRY(d->k->sync(d->kctx));
    size_t bytes = n * sizeof(float);
    if (s->coded) { /* the parameters rounded (scale 1), or the sum x scale rounded once, for every rank */
        codec_encode(ph->op == WIRE_PUSH ? &s->pc : &s->sc, payload, ph->enc + at * s->el, n);
        payload = ph->enc + at * s->el;
        bytes = n * s->el;
    }
    ph->waiting[b] = 0;
    ph->done++;
    if (ph->done == ph->nslices) ph->active = 0;
    /* the step's last slice: its checkpoint part is durable before the reply that ends the step */
    if (!ph->active && ph->op == WIRE_PUSH && ckpt_due(s->a.cfg, (long)ph->step + 1))
        RS_TRY(server_checkpoint(s, (long)ph->step + 1));
    double t1 = clock_now();
    if (s->a.trace && ph->op == WIRE_PUSH) /* the server's own work, on its host's trace */
        trace_span(s->a.trace, "server: reduce+update", 2, t0 + s->wall_offset, t1 + s->wall_offset);
    pthread_mutex_lock(&s->lock);
    s->busy_s += t1 - t0;
    if (!ph->active && ph->op == WIRE_PUSH) s->steps++;
    pthread_mutex_unlock(&s->lock);
    WireHeader h = wire_header(s->token, ph->op == WIRE_PUSH ? WIRE_PARAMS : WIRE_SUMMED);
    h.step = ph->step;
    h.bucket = (uint32_t)b;
    h.offset = off;
    h.count = n;
    h.total = ph->total;
    h.sender = (uint16_t)s->a.id;
    h.dtype = ph->op == WIRE_PUSH ? s->pdtype : s->sdtype;
    return server_reply_all(s, &h, payload, bytes);
}

/* Chunk b has every contribution (and its step size): applied now when they are all in on the
 * emulated interface, else once they are (phase_apply_due). */
static int phase_ready(PsServer *s, PsPhase *ph, int b) {
    ph->waiting[b] = 0;
    if (ph->in[b] <= clock_now()) return slice_apply(s, ph, b);
    if (!ph->due[b]) ph->due[b] = 1, ph->ndue++;
    return RS_OK;
}

/* Applies every due chunk whose contributions are in by now; *next is the earliest in-time of
 * those still due (0: none). RS_OK or the first failure. */
static int phase_apply_due(PsServer *s, PsPhase *ph, double *next) {
    if (!ph->ndue) return RS_OK;
    double now = clock_now();
    for (int b = 0; b < ph->nchunks && ph->ndue; b++) {
        if (!ph->due[b]) continue;
        if (ph->in[b] <= now) {
            ph->due[b] = 0;
            ph->ndue--;
            RS_TRY(slice_apply(s, ph, b));
        } else if (*next == 0 || ph->in[b] < *next) {
            *next = ph->in[b];
        }
    }
    return RS_OK;
}

/* ---- async and ssp: every push applied as it arrives, replies held to the bound ---------------- */

/* The slowest clock among the workers still training (LLONG_MAX when none is). */
static long long async_min_clock(const PsServer *s, int *who) {
    long long m = LLONG_MAX;
    *who = -1;
    for (int w = 0; w < s->a.nworkers; w++)
        if (!s->bye[w] && s->clock[w] < m) m = s->clock[w], *who = w;
    return m;
}

/* Sends worker r every slice of the parameters this server holds, from src (host memory), with
 * step and samples in each header; zc NULL copies them at the send. coded: in the wire's type
 * (the parameters' codec, through the training phase's encode buffer: zc must be NULL), else
 * fp32. */
static int server_send_slices(PsServer *s, int r, const float *src, uint32_t step, uint32_t samples, MsgLend *zc,
                              int coded) {
    for (int b = 0; b < s->a.nbuckets; b++) {
        const ShardSlice *sl = &s->slice[b];
        if (!sl->count) continue;
        WireHeader h = wire_header(s->token, WIRE_PARAMS);
        h.step = step;
        h.samples = samples;
        h.bucket = (uint32_t)b;
        h.offset = sl->off;
        h.count = sl->count;
        h.total = s->a.nparams;
        h.sender = (uint16_t)s->a.id;
        size_t at = s->base[b], bytes = sl->count * sizeof(float);
        const void *payload = src + at;
        if (coded) {
            codec_encode(&s->pc, src + at, s->train.enc + at * s->el, sl->count);
            payload = s->train.enc + at * s->el;
            bytes = sl->count * s->el;
            h.dtype = s->pdtype;
        }
        if (server_send(s, r, &h, payload, bytes, zc) < 0)
            return rs_error(RS_ERR_PEER, "%s: cannot send the parameters to rank %d: %s", s->name, r,
                            msg_strerror(msg_errno()));
    }
    return RS_OK;
}

/* Sends worker r every slice of the parameters (the start-of-run broadcast, fp32). Under async
 * and ssp a copy: rank 0 may push (and the update rewrite the parameters, or async_reply the
 * staging) while an answer is still queued for a slow puller. */
static int server_send_params(PsServer *s, int r) {
    return server_send_slices(s, r, s->host_visible ? s->params : s->train.stage, WIRE_STEP_INIT, 0,
                              s->async ? NULL : &s->zc, 0);
}

/* Sends worker r every slice this server holds, as they are now: step = the pushes applied in
 * all, samples = the staleness of these parameters for r's next step. Copied at the send: later
 * pushes change the parameters while the message is queued. */
static int async_reply(PsServer *s, int r, long long staleness) {
    Device *d = s->dev;
    const float *src = s->params;
    if (!s->host_visible) {
        RS_TRY(d->ops->copy(d, s->train.stage, s->params, s->nkeys * sizeof(float), 1, NULL));
        RS_TRY(d->ops->stream_sync(d, NULL));
        src = s->train.stage;
    }
    return server_send_slices(s, r, src, (uint32_t)s->version, (uint32_t)(staleness < 0 ? 0 : staleness), NULL,
                              s->coded);
}

/* Answers every held worker the bound lets go: ssp:S holds a worker whose next step would be
 * more than S ahead of the slowest worker still training; async holds nobody. */
static int async_release(PsServer *s) {
    int slow;
    long long m = async_min_clock(s, &slow);
    for (int r = 0; r < s->a.nworkers; r++) {
        if (!s->held[r]) continue;
        long long ahead = m == LLONG_MAX ? 0 : s->clock[r] - m;
        if (s->bound != CONFIG_ASYNC && ahead > s->bound) continue;
        s->held[r] = 0;
        RS_TRY(async_reply(s, r, ahead));
    }
    return RS_OK;
}

/* Puts a contribution's n elements (data: the message, host) at dst, ph->recv's keys from at of
 * the phase's range: fp32 as it came, or decoded from the wire with the gradients' codec (/
 * scale; through ph->dec where the device is not host memory). Complete when it returns: the
 * message (or a worker's buffer lent zero-copy) is released next. */
static int server_take(PsServer *s, PsPhase *ph, float *dst, size_t at, const void *data, size_t n) {
    if (!s->coded) return device_h2d(s->dev, dst, data, n * sizeof(float));
    const Codec *c = ph->op == WIRE_PUSH ? &s->gc : &s->sc;
    if (s->host_visible) {
        codec_decode(c, data, dst, n);
        return RS_OK;
    }
    codec_decode(c, data, ph->dec + at, n);
    return device_h2d(s->dev, dst, ph->dec + at, n * sizeof(float));
}

/* WIRE_PUSH under async or ssp: worker r's slice of its step clock[r], applied at once (the
 * update rule on this one gradient, scaled by the step's global samples: N pushes make one
 * step's update). Once r's whole push is in, its reply goes when the bound lets it. */
static int on_push_async(PsServer *s, int r, const WireHeader *h, const void *data) {
    PsPhase *ph = &s->train;
    char why[160];
    if (!s->params) return server_drop(s, "a training push to a server without parameters");
    if (s->init_left > 0) return server_drop(s, "a push before the initial parameters");
    if (h->total != s->a.nparams) return server_drop(s, "a push over another number of parameters");
    if (h->dtype != s->dtype) return server_drop(s, "a push in another number format than this run's --wire");
    if (s->bye[r]) return server_drop(s, "a push after the worker's goodbye");
    if (s->held[r] || h->step != (uint32_t)s->clock[r]) {
        snprintf(why, sizeof why, "push from rank %d for step %u (its step is %lld)", r, h->step, s->clock[r]);
        return server_drop(s, why);
    }
    if (h->bucket >= (uint32_t)ph->nchunks) return server_drop(s, "no such bucket");
    int b = (int)h->bucket;
    size_t off, n;
    phase_slice(s, ph, b, &off, &n);
    if (n == 0 || h->offset != off || h->count != n) return server_drop(s, "a slice this server does not hold");
    unsigned char *seen = ph->seen + (size_t)b * (size_t)s->a.nworkers + (size_t)r;
    if (s->push_left[r] == 0) { /* r's next push opens */
        for (int k = 0; k < ph->nchunks; k++) ph->seen[(size_t)k * (size_t)s->a.nworkers + (size_t)r] = 0;
        s->push_left[r] = ph->nslices;
    }
    if (*seen) return server_drop(s, "a second contribution to the same slice");
    server_accept(s, r);
    s->t_seen[r] = clock_now();
    double t0 = clock_now();
    Device *d = s->dev;
    size_t at = phase_at(s, ph, b, off);
    float *g = ph->recv + (size_t)r * ph->cap + at;
    /* complete before the message is released */
    RS_TRY(server_take(s, ph, g, at, data, n));
    *seen = 1;
    PsUpdate u = {.dev = d, .cfg = s->a.cfg, .sum = g, .n = n, .global_samples = h->samples,
                  .params = s->params + at, .mom = s->mom + at, .mom2 = s->mom2 ? s->mom2 + at : NULL,
                  .t = (int)(s->version / s->a.nworkers) + 1};
    ph->rule(&u);
    RS_TRY(d->k->sync(d->kctx));
    double t1 = clock_now();
    if (s->a.trace) trace_span(s->a.trace, "server: update", 2, t0 + s->wall_offset, t1 + s->wall_offset);
    int whole = --s->push_left[r] == 0;
    if (whole) {
        s->clock[r]++;
        s->version++;
        s->held[r] = 1;
        s->t_held[r] = t1;
    }
    pthread_mutex_lock(&s->lock);
    s->busy_s += t1 - t0;
    s->steps = s->version / s->a.nworkers; /* N pushes make one step */
    pthread_mutex_unlock(&s->lock);
    return whole ? async_release(s) : RS_OK;
}

/* Fails when, under ssp, a held worker has waited the timeout for the slowest, or a worker
 * still training has sent nothing for it. */
static int async_check_time(PsServer *s, double now) {
    double T = s->a.timeout;
    int slow;
    long long m = async_min_clock(s, &slow);
    for (int r = 0; r < s->a.nworkers; r++) {
        if (s->bye[r]) continue;
        if (s->held[r] && now - s->t_held[r] > T)
            return rs_error(RS_ERR_PEER,
                            "%s: rank %d fell more than %g s behind under --ps-consistency %s (at step %lld; rank %d "
                            "waits at step %lld)",
                            s->name, slow, T, s->a.cfg->ps_consistency, m, r, s->clock[r]);
        if (!s->held[r] && s->known[r] && now - s->t_seen[r] > T)
            return rs_error(RS_ERR_PEER, "%s: no push from rank %d within %g s (its step %lld)", s->name, r, T,
                            s->clock[r]);
    }
    return RS_OK;
}

/* ---- handlers: RS_OK (accepted), PS_DROP, or RS_ERR_* (fatal) ----------------------------------- */

/* WIRE_PUSH / WIRE_SUM: worker r's contribution to one slice. */
static int on_contribution(PsServer *s, PsPhase *ph, int r, const WireHeader *h, const void *data) {
    char why[160];
    if (h->dtype != (ph->op == WIRE_PUSH ? s->dtype : s->sdtype))
        return server_drop(s, ph->op == WIRE_PUSH ? "a push in another number format than this run's --wire"
                                                  : "a contribution in another number format than this run's --wire");
    if (ph->op == WIRE_PUSH) {
        if (!s->params) return server_drop(s, "a training push to a server without parameters");
        if (s->init_left > 0) return server_drop(s, "a push before the initial parameters");
        if (h->total != s->a.nparams) return server_drop(s, "a push over another number of parameters");
    }
    /* an allreduce whose buffers (one copy per worker) or chunk count would overflow their types */
    if (ph->op == WIRE_SUM &&
        (h->total > SIZE_MAX / sizeof(float) / (size_t)s->a.nworkers || h->total / s->per >= (uint64_t)INT_MAX))
        return server_drop(s, "an allreduce too large to size");
    if (ph->active) {
        if (h->step != ph->step || h->total != ph->total) {
            snprintf(why, sizeof why, "%s from rank %d for step %u while step %u is open", wire_op_name(h->op), r,
                     h->step, ph->step);
            return server_drop(s, why);
        }
    } else {
        /* the next step; an allreduce too small to reach this server skips calls */
        uint32_t want = ph->begun ? ph->step + 1 : 0;
        int next = ph->op == WIRE_SUM ? !ph->begun || h->step > ph->step : h->step == want;
        if (!next) {
            snprintf(why, sizeof why, "%s from rank %d for step %u (expected %u)", wire_op_name(h->op), r, h->step, want);
            return server_drop(s, why);
        }
        RS_TRY(phase_begin(s, ph, h->step, h->total));
    }
    size_t off, n;
    if (h->bucket >= (uint32_t)ph->nchunks) return server_drop(s, "no such bucket");
    int b = (int)h->bucket;
    phase_slice(s, ph, b, &off, &n);
    if (n == 0 || h->offset != off || h->count != n) return server_drop(s, "a slice this server does not hold");
    unsigned char *seen = ph->seen + (size_t)b * (size_t)s->a.nworkers + (size_t)r;
    if (*seen) return server_drop(s, "a second contribution to the same slice");
    server_accept_as(s, r, 1);
    if (s->cur_in > ph->in[b]) ph->in[b] = s->cur_in;
    if (ph->held) { /* host memory: the payload (n elements of the wire, wire_check saw to it) is
                     * kept and summed from where it is (slice_apply) */
        msg_frame_take(s->cur, &ph->held[(size_t)b * (size_t)s->a.nworkers + (size_t)r]);
    } else {
        /* complete before the message (a received buffer, or a worker's staging lent zero-copy) is released */
        size_t at = phase_at(s, ph, b, off);
        RS_TRY(server_take(s, ph, ph->recv + (size_t)r * ph->cap + at, at, data, n));
    }
    *seen = 1;
    ph->pushed = 1;
    ph->t_progress = clock_now();
    if (++ph->count[b] < s->a.nworkers) return RS_OK;
    if (ph->needs_samples && ph->samples < 0) {
        ph->waiting[b] = 1;
        return RS_OK;
    }
    return phase_ready(s, ph, b);
}

/* WIRE_STEP from rank 0: the step's global sample count; applies the slices waiting for it. */
static int on_step(PsServer *s, int r, const WireHeader *h) {
    PsPhase *ph = &s->train;
    if (r != 0) return server_drop(s, "a step size not from rank 0");
    if (!s->params || s->init_left > 0) return server_drop(s, "a step size before the initial parameters");
    if (ph->active) {
        if (h->step != ph->step || ph->samples >= 0) return server_drop(s, "a step size for another step");
    } else {
        if (h->step != (ph->begun ? ph->step + 1 : 0u)) return server_drop(s, "a step size for another step");
        RS_TRY(phase_begin(s, ph, h->step, s->a.nparams));
    }
    server_accept(s, r);
    ph->samples = h->samples;
    ph->t_progress = clock_now();
    for (int b = 0; b < ph->nchunks; b++)
        if (ph->waiting[b]) RS_TRY(phase_ready(s, ph, b));
    return RS_OK;
}

/* WIRE_INIT from rank 0: one slice of the initial parameters. */
static int on_init(PsServer *s, int r, const WireHeader *h, const void *data) {
    if (r != 0) return server_drop(s, "initial parameters not from rank 0");
    if (!s->params || s->init_left == 0) return server_drop(s, "initial parameters not expected");
    if (h->step != WIRE_STEP_INIT || h->total != s->a.nparams || h->bucket >= (uint32_t)s->a.nbuckets)
        return server_drop(s, "initial parameters for another step or bucket");
    if (h->dtype != WIRE_F32) return server_drop(s, "initial parameters not in fp32 (the start is exact)");
    const ShardSlice *sl = &s->slice[h->bucket];
    if (!sl->count || h->offset != sl->off || h->count != sl->count || s->init_seen[h->bucket])
        return server_drop(s, "initial parameters for a slice this server does not hold");
    server_accept(s, r);
    Device *d = s->dev;
    /* complete before the message is released: rank 0 reuses that staging for its gradients */
    RS_TRY(device_h2d(d, s->params + s->base[h->bucket], data, sl->count * sizeof(float)));
    s->init_seen[h->bucket] = 1;
    if (--s->init_left > 0) return RS_OK;
    size_t n = s->nkeys;
    d->k->fill(d->kctx, s->mom, 0.0f, n);
    if (s->mom2) d->k->fill(d->kctx, s->mom2, 0.0f, n);
    if (s->ck_params) { /* --resume: the checkpoint's master parameters, state and step, not rank 0's */
        RS_TRY(device_h2d(d, s->params, s->ck_params, n * sizeof(float)));
        RS_TRY(device_h2d(d, s->mom, s->ck_mom, n * sizeof(float)));
        if (s->mom2) RS_TRY(device_h2d(d, s->mom2, s->ck_mom2, n * sizeof(float)));
        s->train.begun = 1;
        s->train.active = 0;
        s->train.step = (uint32_t)(s->ck_step - 1); /* the next push is of step ck_step */
        free(s->ck_params), free(s->ck_mom), free(s->ck_mom2);
        s->ck_params = s->ck_mom = s->ck_mom2 = NULL;
    }
    if (!s->host_visible) RS_TRY(d->ops->copy(d, s->train.stage, s->params, n * sizeof(float), 1, NULL));
    RS_TRY(d->ops->stream_sync(d, NULL));
    RS_TRY(d->k->sync(d->kctx));
    for (int w = 0; w < s->a.nworkers; w++)
        if (s->pull[w]) {
            s->pull[w] = 0;
            RS_TRY(server_send_params(s, w));
        }
    return RS_OK;
}

/* WIRE_PULL: worker r wants the parameters (now, or once rank 0's are in). */
static int on_pull(PsServer *s, int r, const WireHeader *h) {
    if (!s->params || h->step != WIRE_STEP_INIT) return server_drop(s, "a pull this server cannot answer");
    server_accept(s, r);
    if (s->init_left > 0) {
        s->pull[r] = 1;
        return RS_OK;
    }
    return server_send_params(s, r);
}

/* Keeps a push that came before the initial parameters (its frames move to s->early; m is left
 * empty); dropped when one step's worth is already kept. */
static int server_keep(PsServer *s, MsgIn *m) {
    if (s->nearly >= s->early_cap) return server_drop(s, "a push before the initial parameters");
    msg_move(&s->early[s->nearly++], m);
    return RS_OK;
}

static int server_handle(PsServer *s, MsgIn *m);

/* Once the initial parameters are all in: the pushes kept before them, in arrival order.
 * RS_OK, or the first fatal error. */
static int server_replay(PsServer *s) {
    int rc = 0, n = s->nearly;
    s->nearly = 0;
    for (int i = 0; i < n; i++) {
        if (!rc) rc = server_handle(s, &s->early[i]);
        msg_close(&s->early[i]);
        if (rc < 0) rc = 0; /* a refused message: counted, not fatal */
    }
    return rc;
}

/* Parses and dispatches one message; RS_OK or PS_DROP (counted), RS_ERR_* when fatal. */
static int server_handle(PsServer *s, MsgIn *m) {
    if (m->extra || m->n < 2) return server_drop(s, "not [identity][header][payload?]");
    int r = -1;
    {
        size_t len;
        const char *id = msg_id(m, &len);
        if (len >= 2 && len < 8 && id[0] == 'w') {
            r = 0;
            for (size_t i = 1; i < len && r >= 0; i++) r = id[i] >= '0' && id[i] <= '9' ? r * 10 + (id[i] - '0') : -1;
        }
        if (r >= s->a.nworkers) r = -1;
    }
    if (r < 0) return server_drop(s, "a peer that is not a worker of this job");
    WireHeader h;
    size_t hb, pb;
    const void *head = msg_head(m, &hb), *data = msg_payload(m, &pb);
    WireErr e = wire_decode(head, hb, &h);
    if (e == WIRE_OK) e = wire_check(&h, s->token, m->n == 3, pb);
    if (e != WIRE_OK) return server_drop(s, wire_strerror(e));
    if (h.sender != r) return server_drop(s, "sender field differs from the peer's identity");
    if (h.op == WIRE_PUSH && s->params && s->init_left > 0) return server_keep(s, m);
    s->cur_bytes = pb;
    s->cur = m;
    s->cur_stamp = m->stamp;
    int rc;
    if (r >= 0 && s->async) s->t_seen[r] = clock_now();
    switch (h.op) {
    case WIRE_PUSH: rc = s->async ? on_push_async(s, r, &h, data) : on_contribution(s, &s->train, r, &h, data); break;
    case WIRE_SUM: rc = on_contribution(s, &s->sum, r, &h, data); break;
    case WIRE_STEP: rc = on_step(s, r, &h); break;
    case WIRE_INIT: rc = on_init(s, r, &h, data); break;
    case WIRE_PULL: rc = on_pull(s, r, &h); break;
    case WIRE_BYE:
        if (s->bye[r]) return server_drop(s, "a second goodbye");
        server_accept(s, r);
        s->bye[r] = 1;
        s->nbye++;
        rc = s->async ? async_release(s) : RS_OK; /* the slowest may have been the one leaving */
        break;
    default: return server_drop(s, "an op servers do not take");
    }
    return rc;
}

/* ---- the loop ---------------------------------------------------------------------------------- */

/* Lists the ranks missing from ph's open step into out ("rank 2", "ranks 1, 3"; cut at len). */
static void phase_missing(const PsServer *s, const PsPhase *ph, char *out, size_t len) {
    char list[256] = "";
    size_t k = 0;
    int n = 0;
    for (int r = 0; r < s->a.nworkers && k < sizeof list; r++) {
        int miss = 0;
        for (int b = 0; b < ph->nchunks && !miss; b++) {
            size_t off, cnt;
            phase_slice(s, ph, b, &off, &cnt);
            miss = cnt > 0 && !ph->seen[(size_t)b * (size_t)s->a.nworkers + (size_t)r];
        }
        if (miss) k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", n++ ? ", " : "", r);
    }
    snprintf(out, len, "%s%s", n > 1 ? "ranks " : n ? "rank " : "", list);
}

/* Fails when a step (or the start) has waited longer than the timeout. */
static int server_check_time(PsServer *s) {
    double now = clock_now(), T = s->a.timeout;
    char who[272]; /* "ranks " and the list */
    if (s->async && !s->init_left) RS_TRY(async_check_time(s, now));
    PsPhase *phs[2] = {&s->train, &s->sum};
    for (int i = 0; i < 2; i++) {
        PsPhase *ph = phs[i];
        if (!ph->active || !ph->pushed || now - ph->t_progress <= T) continue;
        phase_missing(s, ph, who, sizeof who);
        if (who[0])
            return rs_error(RS_ERR_PEER, "%s: no %s from %s for step %u within %g s", s->name, wire_op_name(ph->op), who,
                            ph->step, T);
        return rs_error(RS_ERR_PEER, "%s: no step size from rank 0 for step %u within %g s", s->name, ph->step, T);
    }
    if (s->params && s->init_left > 0 && !s->a.colocated && now - s->t_last > T)
        return rs_error(RS_ERR_PEER, "%s: no initial parameters from rank 0 within %g s", s->name, T);
    /* idle: every reply sent. A worker that waits for another server's reply names it itself at
     * T + 1 s; this server, starved by that failure, must not out-shout it, so it waits longer */
    double idle = fmax(2 * T, T + 3);
    if (!s->a.colocated && now - s->t_last > idle) {
        size_t k = 0;
        who[0] = 0;
        for (int r = 0; r < s->a.nworkers && k < sizeof who; r++)
            if (!s->bye[r]) k += (size_t)snprintf(who + k, sizeof who - k, "%s%d", k ? ", " : "", r);
        return rs_error(RS_ERR_PEER, "%s: no message from any worker within %g s (not finished: rank %s)", s->name,
                        idle, who);
    }
    return RS_OK;
}

/* Records a failure and tells every worker it has heard from. Returns rc. */
static int server_fail(PsServer *s, int rc) {
    const char *why = rs_errmsg();
    char id[16];
    WireHeader h = wire_header(s->token, WIRE_ABORT);
    h.dtype = WIRE_TEXT;
    h.count = strlen(why);
    h.sender = (uint16_t)s->a.id;
    if (h.count == 0) h.count = 1, why = "?";
    for (int r = 0; r < s->a.nworkers; r++)
        if (s->known[r] && !s->bye[r] && server_counted(s, r)) {
            size_t idlen = ps_identity(r, id, sizeof id); /* the job's end, not its data: not counted */
            ps_send(s->router, id, idlen, &h, why, h.count, NULL, 0, 0, NULL, NULL);
        }
    pthread_mutex_lock(&s->lock);
    s->status = rc;
    snprintf(s->why, sizeof s->why, "%s", why);
    pthread_mutex_unlock(&s->lock);
    /* serving ends here: let go of the kept contributions at once (over inproc they are the host
     * worker's own buffers, which its failed call hands back to its caller) */
    phase_release(s, &s->train);
    phase_release(s, &s->sum);
    return rc;
}

/* Stable insertion sort of a drained batch by the stamp each message left its sender's emulated
 * link with (a message without one, a colocated rank's own, keeps its place among its
 * neighbours' times: it counts as sent when drained). */
static void server_sort_stamped(MsgIn *m, int n) {
    double now = clock_now(), key[PS_REORDER];
    for (int i = 0; i < n; i++) key[i] = m[i].stamp > 0 && m[i].stamp < now + 60 ? m[i].stamp : now;
    for (int i = 1; i < n; i++) {
        MsgIn x = m[i];
        double kx = key[i];
        int j = i - 1;
        while (j >= 0 && key[j] > kx) {
            m[j + 1] = m[j];
            key[j + 1] = key[j];
            j--;
        }
        m[j + 1] = x;
        key[j + 1] = kx;
    }
}

int ps_server_run(PsServer *s) {
    s->t_last = clock_now();
    double next = 0; /* the earliest due chunk's in-time (0: none) */
    for (;;) {
        if (atomic_load(&s->stop) || s->nbye == s->a.nworkers) return RS_OK;
        long wait = 100;
        if (next > 0) { /* wake when the next due chunk is in */
            double ms = (next - clock_now()) * 1e3;
            wait = ms <= 0 ? 0 : ms < 100 ? (long)ms + 1 : 100;
        }
        int n = msg_poll(&s->router, 1, wait, NULL);
        if (n < 0) return server_fail(s, zmqCheck(n));
        for (int k = 0; n > 0 && k < 4096; k += PS_REORDER) {
            /* what is queued, up to PS_REORDER messages, handled in the order they left their
             * senders on the emulated link (their stamps; arrival order without --link): the
             * interface takes concurrent flows in as they come, where the queue's order follows
             * which sender's process ran first, and would make a server take one worker's whole
             * stream before the next worker's first bucket (and answer no bucket until then) */
            int got = 0;
            while (got < PS_REORDER) {
                if (msg_recv(s->router, &s->batch[got], ZMQ_DONTWAIT, 1) < 0) {
                    if (msg_errno() == EAGAIN || msg_errno() == EINTR) break;
                    for (int i = 0; i < got; i++) msg_close(&s->batch[i]);
                    return server_fail(s, zmqCheck(-1));
                }
                got++;
            }
            if (got > 1 && link_on()) server_sort_stamped(s->batch, got);
            int rc = 0;
            for (int i = 0; i < got; i++) {
                if (!rc) rc = server_handle(s, &s->batch[i]);
                msg_close(&s->batch[i]);
                if (rc < 0) rc = 0; /* a refused message: counted, not fatal */
            }
            if (!rc && s->nearly && !s->init_left) rc = server_replay(s);
            if (rc > 0) return server_fail(s, rc);
            if (got < PS_REORDER) break;
        }
        next = 0;
        int rc = phase_apply_due(s, &s->train, &next);
        if (!rc) rc = phase_apply_due(s, &s->sum, &next);
        if (!rc) rc = server_check_time(s);
        if (rc) return server_fail(s, rc);
    }
}

/* ---- life cycle -------------------------------------------------------------------------------- */

/* The serving thread: binds itself to the device (its own stream and kernel context). */
static void *server_thread(void *arg) {
    PsServer *s = arg;
    const Device *d = s->a.dev;
    int rc = device_open_like(&s->tdev, d);
    if (rc) {
        rs_error(rc, "%s: cannot open its device: %s", s->name, rs_errmsg());
        server_fail(s, rc);
        return NULL;
    }
    s->dev = &s->tdev;
    ps_server_run(s);
    device_close(&s->tdev);
    s->dev = s->a.dev;
    return NULL;
}

int ps_server_start(PsServer *s) {
    if (pthread_create(&s->thread, NULL, server_thread, s))
        return rs_error(RS_ERR_RUNTIME, "%s: cannot start its thread", s->name);
    s->started = 1;
    return RS_OK;
}

int ps_server_status(PsServer *s, char *why, size_t len) {
    pthread_mutex_lock(&s->lock);
    int rc = s->status;
    if (why && len) snprintf(why, len, "%s", s->why);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void ps_server_stop(PsServer *s) { atomic_store(&s->stop, 1); }

void ps_server_traffic(PsServer *s, SyncTraffic *out) {
    pthread_mutex_lock(&s->lock);
    *out = s->tr;
    pthread_mutex_unlock(&s->lock);
    sync_traffic_counts(&s->count, out);
}

int ps_server_set_nodes(PsServer *s, const unsigned char *node, int n) {
    unsigned char *copy = n > 0 ? malloc((size_t)n) : NULL;
    if (n > 0 && !copy) return rs_error(RS_ERR_RUNTIME, "ps server: out of memory");
    if (n > 0) memcpy(copy, node, (size_t)n);
    pthread_mutex_lock(&s->lock);
    free(s->node);
    s->node = copy;
    s->nnode = n;
    s->tr.split = 1;
    pthread_mutex_unlock(&s->lock);
    return RS_OK;
}

void ps_server_busy(PsServer *s, double *busy_s, long long *steps) {
    pthread_mutex_lock(&s->lock);
    *busy_s = s->busy_s;
    *steps = s->steps;
    pthread_mutex_unlock(&s->lock);
}

const char *ps_server_endpoint(const PsServer *s) { return s->endpoint; }
const char *ps_server_inproc(const PsServer *s) { return s->inproc; }

void ps_server_destroy(PsServer *s) {
    if (!s) return;
    if (s->started) {
        ps_server_stop(s);
        pthread_join(s->thread, NULL);
        s->started = 0;
    }
    msg_close_socket(s->router, 0);
    phase_release(s, &s->train); /* contributions kept by a step that did not end */
    phase_release(s, &s->sum);
    for (int i = 0; i < s->nearly; i++) msg_close(&s->early[i]); /* pushes kept for a start that did not come */
    s->nearly = 0;
    if (!msg_lend_drain(&s->zc, 2.0 + s->a.timeout)) {
        log_warn("%s: replies still in flight at exit; leaving its buffers allocated", s->name);
        return;
    }
    size_t n = s->nkeys;
    phase_free(s, &s->train);
    phase_free(s, &s->sum);
    device_free(s->a.dev, s->params, n * sizeof(float), MEM_SERVER);
    device_free(s->a.dev, s->mom, n * sizeof(float), s->mom_tag);
    device_free(s->a.dev, s->mom2, n * sizeof(float), s->mom_tag);
    free(s->slice);
    free(s->base);
    free(s->sum_owner);
    free(s->sum_base);
    free(s->init_seen);
    free(s->early);
    free(s->pull);
    free(s->node);
    free(s->known);
    free(s->bye);
    free(s->clock);
    free(s->push_left);
    free(s->held);
    free(s->t_held);
    free(s->t_seen);
    free(s->ck_params);
    free(s->ck_mom);
    free(s->ck_mom2);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The ROUTER's queue bound (net/msg.h: four times what a peer has in flight in one step): a
 * worker sends this server in one step at most a push a bucket (of the server's buckets) and a
 * STEP, and at the start, rank 0 the initial parameters (an INIT a bucket) and a PULL ahead of
 * the first step's pushes: 2 nbuckets + 2, and a goodbye. An allreduce's contributions (one a
 * chunk of the call) can outnumber them in a large call; the rest wait in the worker's queue until
 * the server reads them. */
static int server_queue(const PsServer *s) { return msg_queue_bound(2 * (size_t)s->a.nbuckets + 3); }

/* Binds the ROUTER on tcp://addr:* (or, where addr is a name ZeroMQ does not bind to, on every
 * interface, advertising addr) and, colocated, on inproc. No send high-water mark (msg_socket):
 * a server blocked on a worker that is itself blocked pushing to the server would deadlock; what
 * is queued is bounded by one step's replies. */
static int server_bind(PsServer *s, size_t maxmsg) {
    MsgSocketSpec spec = {.type = ZMQ_ROUTER, .binds = 1, .linger_ms = 1000, .sndtimeo_ms = (int)(s->a.timeout * 1000),
                          .max_frame = maxmsg, .rcv_queue = server_queue(s), .mandatory = 1};
    RS_TRY(msg_socket(s->a.zctx, &spec, &s->router)); /* the job token in every worker's handshake */
    /* TCP, and a Unix socket for workers on this host (--transport auto or ipc) */
    RS_TRY(zep_bind(s->router, s->a.addr, "ps", s->endpoint, sizeof s->endpoint));
    if (s->a.colocated) {
        /* a serial, not the address: a server created right after another was destroyed may get
         * its address while the old socket's endpoint is still being closed (EADDRINUSE) */
        static atomic_uint serial;
        snprintf(s->inproc, sizeof s->inproc, "inproc://ringside-ps-%u", atomic_fetch_add(&serial, 1));
        if (msg_bind(s->router, s->inproc, NULL, 0) != 0)
            return rs_error(RS_ERR_RUNTIME, "%s: cannot bind %s: %s", s->name, s->inproc, msg_strerror(msg_errno()));
    }
    return RS_OK;
}

/* Plans the training keys and allocates the master parameters, momentum and the buffers. */
static int server_alloc_train(PsServer *s) {
    const PsServerArgs *a = &s->a;
    s->range = shard_weighted_range(a->nparams, &s->w, a->id);
    ShardSlice *slice = calloc((size_t)a->nbuckets + 1, sizeof *slice); /* s->slice once planned (phase_slice) */
    s->base = calloc((size_t)a->nbuckets + 1, sizeof *s->base);
    s->init_seen = calloc((size_t)a->nbuckets, 1);
    if (!slice || !s->base || !s->init_seen) {
        free(slice);
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    PsPhase *ph = &s->train;
    ph->total = a->nparams;
    ph->range = s->range;
    ph->nchunks = a->nbuckets;
    ShardPlan stripe = {0}; /* striped: the partitions' owners, as every worker computes them */
    int compact = a->per_bucket || a->striped; /* keys held in bucket order, not one range */
    if (a->striped) {
        int rc = shard_stripe_plan(&stripe, a->nparams, &s->w, a->buckets, a->nbuckets);
        if (rc) {
            free(slice);
            return rc;
        }
    }
    for (int b = 0; b < a->nbuckets; b++) {
        size_t off, n, lo = a->buckets[b].lo, hi = a->buckets[b].hi;
        if (a->striped) { /* the whole partition, or none of it */
            off = lo;
            n = stripe.slices[b].server == a->id ? hi - lo : 0;
        } else if (a->per_bucket) { /* this server's piece of the bucket, by weight */
            ShardRange r = shard_weighted_range(hi - lo, &s->w, a->id);
            off = lo + r.lo;
            n = r.hi - r.lo;
        } else {
            phase_slice(s, ph, b, &off, &n);
        }
        slice[b] = (ShardSlice){.server = a->id, .bucket = b, .off = off, .count = n};
        s->base[b] = compact ? s->nkeys : off - s->range.lo; /* ranges: the keys' own order */
        s->nkeys += n;
        ph->nslices += n > 0;
    }
    shard_plan_free(&stripe);
    s->slice = slice;
    if (compact && s->nkeys == 0)
        return rs_error(RS_ERR_INPUT, "%s: server %d of %d would hold no key of the model's %zu parameters",
                        a->striped ? "--ps-partition-kb" : "--sync byteps", a->id, a->nservers, a->nparams);
    if (!compact) s->nkeys = s->range.hi - s->range.lo;
    s->init_left = ph->nslices;
    s->early_cap = ph->nslices * a->nworkers;
    if (s->early_cap && !(s->early = calloc((size_t)s->early_cap, sizeof *s->early)))
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    size_t n = s->nkeys;
    s->params = device_alloc(a->dev, n * sizeof(float), MEM_SERVER);
    int adamw = !strcmp(a->cfg->optimizer, "adamw");
    s->mom_tag = adamw ? MEM_OPTIMIZER : MEM_SERVER;
    s->mom = s->params ? device_alloc(a->dev, n * sizeof(float), s->mom_tag) : NULL;
    if (s->mom && adamw) s->mom2 = device_alloc(a->dev, n * sizeof(float), s->mom_tag);
    if (!s->mom || (adamw && !s->mom2)) return RS_ERR_RUNTIME;
    return phase_reserve(s, ph, n, a->nbuckets);
}

int ps_server_create(PsServer **out, const PsServerArgs *a) {
    *out = NULL;
    if (a->nworkers < 1 || a->nservers < 1 || a->id < 0 || a->id >= a->nservers || !a->dev || !a->zctx || !a->cfg ||
        a->local_rank < 0 || a->local_rank >= a->nworkers)
        return rs_error(RS_ERR_INPUT, "ps server: bad arguments (server %d of %d, %d workers)", a->id, a->nservers,
                        a->nworkers);
    ShardWeights w = a->weights.K ? a->weights : shard_even(a->nservers);
    if (w.K != a->nservers)
        return rs_error(RS_ERR_INPUT, "ps server: weights for %d servers, %d servers", w.K, a->nservers);
    if (a->nparams > 0 && !a->per_bucket && !a->striped) RS_TRY(shard_weighted_check(a->nparams, &w));
    PsServer *s = calloc(1, sizeof *s);
    if (!s) return rs_error(RS_ERR_RUNTIME, "out of memory");
    s->a = *a;
    s->w = w;
    s->wall_offset = clock_wall() - clock_now();
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->stop, 0);
    s->token = wire_token(a->token);
    s->dev = a->dev;
    s->host_visible = a->dev->host_visible;
    s->gc = codec_from_options(a->cfg->wire, a->cfg->loss_scale);
    s->pc = codec_param(s->gc.type);
    s->sc = codec_is_fp8(s->gc.type) ? s->pc : s->gc;
    s->coded = s->gc.type != CODEC_F32;
    s->dtype = (uint16_t)wire_dtype_of(s->gc.type);
    s->pdtype = (uint16_t)wire_dtype_of(s->pc.type);
    s->sdtype = (uint16_t)wire_dtype_of(s->sc.type);
    s->el = codec_elem_bytes(s->pc.type);
    if (a->nservers > 1) snprintf(s->name, sizeof s->name, "ps server %d", a->id);
    else snprintf(s->name, sizeof s->name, "ps server");
    double per = a->cfg->bucket_mb * 1048576.0 / sizeof(float);
    s->per = per < 1 ? 1 : (size_t)per;
    size_t pk = config_partition_keys(a->cfg); /* as the workers cut their allreduce */
    if (pk) s->per = pk, s->sum_striped = 1;
    s->train.op = WIRE_PUSH;
    s->train.rule = !strcmp(a->cfg->optimizer, "adamw") ? ps_rule_adamw : ps_rule_sgd;
    s->train.needs_samples = 1;
    s->sum.op = WIRE_SUM;
    s->sum.rule = ps_rule_sum;
    s->known = calloc((size_t)a->nworkers, 1);
    s->bye = calloc((size_t)a->nworkers, 1);
    s->pull = calloc((size_t)a->nworkers, 1);
    s->bound = a->cfg->ps_staleness;
    s->async = a->nparams > 0 && !a->dataparallel && s->bound != 0;
    size_t nw = (size_t)a->nworkers;
    s->clock = calloc(nw, sizeof *s->clock);
    s->push_left = calloc(nw, sizeof *s->push_left);
    s->held = calloc(nw, 1);
    s->t_held = calloc(nw, sizeof *s->t_held);
    s->t_seen = calloc(nw, sizeof *s->t_seen);
    int rc = s->known && s->bye && s->pull && s->clock && s->push_left && s->held && s->t_held && s->t_seen
                 ? RS_OK
                 : rs_error(RS_ERR_RUNTIME, "out of memory");
    size_t maxmsg = ps_largest_slice(s->per, a->buckets, a->nbuckets);
    if (rc == RS_OK && a->nparams > 0) rc = server_alloc_train(s);
    if (rc == RS_OK && a->nparams > 0 && (a->cfg->checkpoint[0] || a->cfg->resume[0]) && s->train.nslices == 0)
        rc = rs_error(RS_ERR_INPUT, "--%s: %s holds no key of the model's %zu parameters, so it never completes a step "
                      "to checkpoint (fewer servers)", a->cfg->checkpoint[0] ? "checkpoint" : "resume", s->name, a->nparams);
    if (rc == RS_OK && a->nparams > 0 && a->cfg->resume[0] && !s->async) rc = server_resume_load(s);
    if (rc == RS_OK) rc = server_bind(s, maxmsg * sizeof(float) + 4096);
    if (rc == RS_OK) heap_keep_frames(maxmsg * sizeof(float)); /* contributions in warm heap pages (base/heap.h) */
    if (rc != RS_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", rs_errmsg());
        ps_server_destroy(s);
        return rs_error(rc, "%s", why);
    }
    *out = s;
    return RS_OK;
}
