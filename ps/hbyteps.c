/* hbyteps.c - "byteps --hierarchical": BytePS at its real topology (the GPUs of a machine reduce among themselves, the machine pushes and pulls, then broadcasts inside) */
#include "ps.h"
#include "shard.h"
#include "../allreduce/mesh.h"
#include "../base/clock.h"
#include "../base/err.h"
#include "../base/split.h"
#include "../engine/config_check.h"
#include "../net/node.h"

#include <stdlib.h>
#include <string.h>

/*
 * With M machines (nodes) of G ranks (net/node.h: rank = node * G + local), every bucket of a step:
 *   1. inside the machine, a ring reduce-scatter over its G ranks (G - 1 steps on the mesh), then
 *      each rank's summed chunk to the machine's root (local rank 0): the root holds the machine's
 *      sum, in fp32 (start);
 *   2. the root pushes that sum to the servers as one of M workers of the byteps back end
 *      (ps/client.c, unchanged: a summation shard in every root, --ps-servers k CPU servers, keys
 *      in BytePS's split with n = M machines) and pulls the updated parameters (start returns
 *      once the pushes are on their way; poll);
 *   3. the root sends the parameters to each rank of its machine (poll).
 * Only the roots touch the network: each machine's NIC carries BytePS's figures for n = M, where
 * the flat byteps (every rank a worker) puts G workers' pushes and pulls on it. The servers see M
 * workers (identity: the machine) and sum M contributions a key. Every element is summed inside
 * the machine (ring order), then across machines (server order): the result equals one rank's on
 * the global batch within rounding, not the flat form's bits.
 *
 * A rank other than the root never blocks in poll (mesh_recv_within): a root may be in the next
 * bucket's reduce, waiting on that rank's start, before it sends this bucket's parameters.
 */

/* A message's tag: the phase (0 the node's reduce-scatter, 1 a chunk to the root, 2 the
 * parameters from the root), the bucket (20 bits; collectives use the last) and the step. */
#define HB_TAG(phase, b, s) ((int)(((unsigned)(phase) << 28) | (((unsigned)(b) & 0xFFFFFu) << 8) | (unsigned)(s)))
#define HB_CALL 0xFFFFF /* the bucket field of a collective (broadcast, allreduce) */

typedef struct {
    SyncJob job;
    Mesh *mesh;             /* every rank's mailbox; only this machine's ranks are written to */
    void *inner;            /* the root's byteps worker over the M machines (NULL elsewhere) */
    const SyncOps *in;      /* sync_byteps() */
    SyncJob ijob;           /* the root's job as the inner back end sees it: rank = machine, world = M */
    int G, M, node, local, root;
    int servers;            /* the inner back end's server count (checkpoint parts), the same on every rank */
    uint64_t seq;           /* collectives and steps begun (the mesh's sequence) */
    float **out;            /* [nbuckets] where a bucket's parameters land (poll) */
    double *t_wait;         /* [nbuckets] when poll first waited for them (0: not yet) */
} HByteps;

/* ---- the machine's phases -------------------------------------------------------------------- */

/* Phase 1: the machine's sum of buf[0, count) in the root's buf (the others' buf holds partial
 * sums afterwards). */
static int hb_reduce(HByteps *h, float *buf, size_t count, int b) {
    Mesh *m = h->mesh;
    int base = h->node * h->G, right = base + (h->local + 1) % h->G, left = base + (h->local + h->G - 1) % h->G;
    RS_TRY(mesh_ring(m, buf, count, h->G, h->local, right, left, HB_TAG(0, b, 0), -1, 0));
    size_t lo, hi;
    if (h->local) { /* this rank's chunk, (local + 1) mod G, to the root */
        split_even(count, h->G, (h->local + 1) % h->G, &lo, &hi);
        return mesh_send(m, base, HB_TAG(1, b, 0), buf + lo, hi - lo);
    }
    for (int i = 1; i < h->G; i++) {
        split_even(count, h->G, (i + 1) % h->G, &lo, &hi);
        RS_TRY(mesh_recv(m, base + i, HB_TAG(1, b, 0), buf + lo, hi - lo, MESH_COPY));
    }
    return RS_OK;
}

/* Phase 3, the root's half: buf[0, count) to every other rank of the machine. */
static int hb_send_down(HByteps *h, const float *buf, size_t count, int b) {
    for (int i = 1; i < h->G; i++) RS_TRY(mesh_send(h->mesh, h->root + i, HB_TAG(2, b, 0), buf, count));
    return RS_OK;
}

/* ---- the back end (engine/sync.h) ------------------------------------------------------------ */

static int hb_unused(Mesh *m, float *buf, size_t count) {
    (void)buf, (void)count;
    return rs_error(RS_ERR_RUNTIME, "%s: the mesh's own all-reduce is not this back end's", m->name);
}

static void hb_destroy(void *state);

/* Binds the mailbox (a Unix socket to the machine's ranks: net/node.h's host key) and, in a root,
 * starts the byteps worker of its machine; the endpoint text is the mailbox's, then after a space
 * the worker's (a root's shard or its host). */
static int hb_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    *state = NULL;
    if (endpoint && len) endpoint[0] = 0;
    const NodePlace *p = node_get();
    HByteps *h = calloc(1, sizeof *h);
    if (!h) return rs_error(RS_ERR_RUNTIME, "out of memory");
    *state = h;
    h->job = *job;
    h->G = p->per_node, h->M = p->nodes;
    if (h->M < 2 || h->G < 2 || h->M * h->G != job->world)
        return rs_error(RS_ERR_RUNTIME, "byteps --hierarchical: %d nodes of %d ranks for a world of %d", h->M, h->G,
                        job->world);
    h->node = job->rank / h->G, h->local = job->rank % h->G, h->root = h->node * h->G;
    h->in = sync_byteps();
    RS_TRY(ps_byteps_check(job->cfg, h->M));
    h->servers = job->nbuckets > 0 ? shard_byteps(h->M, job->cfg->ps_servers).K : 0;
    if (job->nbuckets > 0 &&
        (!(h->out = calloc((size_t)job->nbuckets, sizeof *h->out)) ||
         !(h->t_wait = calloc((size_t)job->nbuckets, sizeof *h->t_wait))))
        return rs_error(RS_ERR_RUNTIME, "out of memory");
    size_t half = len / 2;
    void *mesh = NULL;
    int rc = mesh_init(job, &mesh, endpoint, half, "byteps-hierarchical", hb_unused, MESH_IPC); /* no space: the name is in the socket's */
    h->mesh = mesh;
    RS_TRY(rc);
    if (h->local) return RS_OK;
    h->ijob = *job;
    h->ijob.rank = h->node, h->ijob.world = h->M, h->ijob.local_rank = 0, h->ijob.local_world = 1;
    size_t k = strlen(endpoint);
    if (k + 2 > len) return rs_error(RS_ERR_RUNTIME, "byteps --hierarchical: endpoint text too long");
    endpoint[k] = ' ';
    endpoint[k + 1] = 0;
    return h->in->init(&h->ijob, &h->inner, endpoint + k + 1, len - k - 1);
}

static int hb_connect(void *state, char *const *endpoints, int nmembers) {
    HByteps *h = state;
    int N = h->job.world;
    if (nmembers < N) return rs_error(RS_ERR_INPUT, "byteps --hierarchical: %d endpoints for %d ranks", nmembers, N);
    char **mesh = calloc((size_t)nmembers, sizeof *mesh), **inner = calloc((size_t)(h->M + nmembers - N), sizeof *inner);
    int rc = mesh && inner ? RS_OK : rs_error(RS_ERR_RUNTIME, "out of memory");
    for (int r = 0; r < N && rc == RS_OK; r++) { /* "MAILBOX WORKER": the mesh's half, and a root's worker's */
        const char *t = endpoints[r] ? endpoints[r] : "", *sp = strchr(t, ' ');
        size_t n = sp ? (size_t)(sp - t) : strlen(t);
        if (!(mesh[r] = strndup(t, n))) rc = rs_error(RS_ERR_RUNTIME, "out of memory");
        if (rc == RS_OK && r % h->G == 0 && !(inner[r / h->G] = strdup(sp ? sp + 1 : "")))
            rc = rs_error(RS_ERR_RUNTIME, "out of memory");
    }
    for (int j = N; j < nmembers && rc == RS_OK; j++) /* the CPU servers' texts are their own */
        if (!(mesh[j] = strdup("")) || !(inner[h->M + j - N] = strdup(endpoints[j] ? endpoints[j] : "")))
            rc = rs_error(RS_ERR_RUNTIME, "out of memory");
    if (rc == RS_OK) rc = mesh_connect(h->mesh, mesh, N);
    if (rc == RS_OK && h->inner) rc = h->in->connect(h->inner, inner, h->M + nmembers - N);
    for (int i = 0; mesh && i < nmembers; i++) free(mesh[i]);
    for (int i = 0; inner && i < h->M + nmembers - N; i++) free(inner[i]);
    free(mesh);
    free(inner);
    return rc;
}

/* A collective on buf (device memory): the machine's phases on a host copy, the inner call in the
 * root on buf itself (the inner back end stages as it needs). bcast: rank 0's values to every
 * rank (no reduction); else the sum. */
static int hb_collective(HByteps *h, float *buf, size_t count, int bcast) {
    h->mesh->seq = ++h->seq;
    int dev = !h->job.dev->host_visible;
    size_t bytes = count * sizeof(float);
    float *host = dev ? mesh_stage(h->mesh, bytes ? bytes : sizeof(float)) : buf; /* the mailbox's staging */
    if (!host) return rs_error(RS_ERR_RUNTIME, "byteps --hierarchical: no host memory for %zu bytes", bytes);
    if (!bcast) {
        if (dev && bytes) RS_TRY(device_d2h(h->job.dev, host, buf, bytes));
        RS_TRY(hb_reduce(h, host, count, HB_CALL));
        if (dev && bytes && h->inner) RS_TRY(device_h2d(h->job.dev, buf, host, bytes));
    }
    if (h->local) {
        RS_TRY(mesh_recv(h->mesh, h->root, HB_TAG(2, HB_CALL, 0), host, count, MESH_COPY));
        return dev && bytes ? device_h2d(h->job.dev, buf, host, bytes) : RS_OK;
    }
    RS_TRY(bcast ? h->in->broadcast(h->inner, buf, count) : h->in->allreduce(h->inner, buf, count));
    if (dev && bytes) RS_TRY(device_d2h(h->job.dev, host, buf, bytes));
    return hb_send_down(h, host, count, HB_CALL);
}

static int hb_broadcast(void *state, float *buf, size_t count) { return hb_collective(state, buf, count, 1); }

static int hb_allreduce(void *state, float *buf, size_t count) { return hb_collective(state, buf, count, 0); }

static int hb_begin_step(void *state, int step, int global_samples) {
    HByteps *h = state;
    return h->inner && h->in->begin_step ? h->in->begin_step(h->inner, step, global_samples) : RS_OK;
}

/* Phase 1, then (the root) phase 2's pushes; grad and out are host memory (the engine stages). */
static int hb_start(void *state, int step, int b, float *grad, float *out) {
    HByteps *h = state;
    const Bucket *bk = &h->job.buckets[b];
    if (b == 0) h->mesh->seq = ++h->seq; /* buckets come in order: bucket 0 opens the step */
    h->out[b] = out;
    h->t_wait[b] = 0;
    RS_TRY(hb_reduce(h, grad, bk->hi - bk->lo, b));
    return h->inner ? h->in->start(h->inner, step, b, grad, out) : RS_OK;
}

/* The root: phase 2's parameters in, then phase 3; the others: phase 3's message, never waiting
 * past wait_ms (and naming the root after the job's timeout). */
static int hb_poll(void *state, int b, int wait_ms) {
    HByteps *h = state;
    const Bucket *bk = &h->job.buckets[b];
    size_t n = bk->hi - bk->lo;
    if (h->inner) {
        int r = h->in->poll(h->inner, b, wait_ms);
        if (r != 1) return r;
        int rc = hb_send_down(h, h->out[b], n, b);
        return rc ? -rc : 1;
    }
    int r = mesh_recv_within(h->mesh, h->root, HB_TAG(2, b, 0), h->out[b], n, MESH_COPY, wait_ms);
    if (r != 0) return r;
    double now = clock_now();
    if (h->t_wait[b] == 0) h->t_wait[b] = now;
    else if (now - h->t_wait[b] > h->job.timeout)
        return -rs_error(RS_ERR_PEER, "byteps --hierarchical: rank %d (node %d) got no parameters of bucket %d from its "
                                      "machine's root, rank %d, for %.0f s (is it alive?)", h->job.rank, h->node, b,
                         h->root, h->job.timeout);
    return 0;
}

static int hb_end_step(void *state, int step) {
    HByteps *h = state;
    return h->inner && h->in->end_step ? h->in->end_step(h->inner, step) : RS_OK;
}

static void hb_server_busy(void *state, double *busy_s, long long *steps) {
    HByteps *h = state;
    *busy_s = 0, *steps = 0;
    if (h->inner && h->in->server_busy) h->in->server_busy(h->inner, busy_s, steps);
}

static int hb_health(void *state) {
    HByteps *h = state;
    return h && h->inner && h->in->health ? h->in->health(h->inner) : RS_OK;
}

static int hb_close(void *state) {
    HByteps *h = state;
    return h->inner && h->in->close ? h->in->close(h->inner) : RS_OK;
}

static int hb_checkpoint_servers(void *state) { return ((HByteps *)state)->servers; }

/* The mailbox's traffic (inside the machine), and the root's worker's and shard's (across). */
static void hb_traffic(void *state, SyncTraffic *out) {
    HByteps *h = state;
    mesh_traffic(h->mesh, out);
    if (!h->inner) return;
    SyncTraffic t;
    h->in->traffic(h->inner, &t);
    sync_traffic_add(out, &t);
    out->split = out->split && t.split;
    out->transport = sync_transport_slower(out->transport, t.transport);
}

static void hb_destroy(void *state) {
    HByteps *h = state;
    if (!h) return;
    if (h->inner) h->in->destroy(h->inner);
    mesh_destroy(h->mesh);
    free(h->out);
    free(h->t_wait);
    free(h);
}

static const SyncOps hb_ops = {
    .name = "byteps",
    .place = SYNC_ON_HOST,
    .result = SYNC_UPDATES,
    .init = hb_init,
    .connect = hb_connect,
    .broadcast = hb_broadcast,
    .start = hb_start,
    .poll = hb_poll,
    .begin_step = hb_begin_step,
    .end_step = hb_end_step,
    .server_busy = hb_server_busy,
    .health = hb_health,
    .close = hb_close,
    .allreduce = hb_allreduce,
    .traffic = hb_traffic,
    .destroy = hb_destroy,
    .checkpoint_servers = hb_checkpoint_servers,
};

const SyncOps *sync_byteps_hierarchical(void) { return &hb_ops; }

int ps_byteps_machines(const Config *cfg, int world) {
    return cfg->hierarchical && config_on_machines(world, cfg->nodes) ? cfg->nodes : world;
}
