/* hring.c - "ring --hierarchical": Horovod's hierarchical all-reduce on the mesh (reduce-scatter inside the node, a ring over the nodes per local index, all-gather inside the node) */
#include "allreduce.h"
#include "mesh.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/split.h"
#include "../net/node.h"

#include <stddef.h>

/*
 * With M nodes of G ranks (net/node.h: rank = node * G + local), a bucket of n floats is cut into
 * pieces of at most HRING_PIECE_BYTES on the wire, and each piece into G chunks (split_even):
 *   1. inside the node, a ring reduce-scatter over the G ranks: after G-1 steps local rank i holds
 *      the node's sum of the piece's chunk (i+1) mod G;
 *   2. across the nodes, the G ranks of local index i (one per node) all-reduce that chunk by a
 *      ring over the M nodes: its M sub-chunks reduce-scattered, rounded to the wire by their
 *      owner, then all-gathered (2(M-1) steps);
 *   3. inside the node, a ring all-gather of the piece's G chunks (G-1 steps).
 * The pieces pipeline: a piece's first network message leaves as soon as its node phase is done,
 * so the next piece's node phase runs while the network carries it, and a piece's all-gather inside
 * the node runs while the next one's last network message comes in; each network step sends every
 * piece's message before it waits for any, so the NIC never idles between pieces.
 * Each node's NIC carries G rings' 2(M-1)/M of n/G each way: 2(M-1)/M n, against the flat ring's
 * 2(N-1)/N n through the NIC of a node boundary's rank. Every element is summed once, in one order
 * (ring order inside the node, then across), and copied everywhere after: every rank holds the
 * same bits, not the flat ring's (another order of the same sum).
 */

/* A piece's largest size on the wire. Smaller pieces hide more of the node's phases under the
 * network's, but interleave the node's ranks' messages on its one NIC, so that each waits on the
 * other's: training a 784-1024-10 MLP on 2 nodes of 2 ranks behind 200 Mbit/s NICs took 206 ms a
 * step with 256 KiB pieces, 188 with 1 MiB, 147-176 with 4 MiB and 158-168 with one piece
 * (docs/benchmarks.md, "Nodes"). */
#define HRING_PIECE_BYTES (4u << 20)
#define HRING_MAX_PIECES 65536

/* A message's tag: the phase (0 node reduce-scatter, 1 network reduce-scatter, 2 network
 * all-gather, 3 node all-gather), the step (< 4096) and the piece (< 65536). */
#define HRING_TAG(phase, s, k) ((int)(((unsigned)(phase) << 28) | ((unsigned)(s) << 16) | (unsigned)(k)))

/* Where a rank stands: its node and local index, its neighbours in the node's ring and in its
 * local index's ring over the nodes, and the bucket's pieces. */
typedef struct {
    int G, M, node, local;
    int right, left;         /* in the node */
    int next, prev;          /* across the nodes, same local index */
    size_t count, pieces;
} HringPlan;

/* [lo, hi) of segment j of P of piece k's chunk c (c < 0: the whole piece). */
static void hring_span(const HringPlan *h, size_t k, int c, int P, int j, size_t *lo, size_t *hi) {
    size_t a, b, x, y;
    split_even(h->count, (int)h->pieces, (int)k, &a, &b);
    if (c >= 0) {
        split_even(b - a, h->G, c, &x, &y);
        b = a + y;
        a += x;
    }
    split_even(b - a, P, j, &x, &y);
    *lo = a + x;
    *hi = a + y;
}

static int mod(int x, int p) { return ((x % p) + p) % p; }

/* A ring over the node's G ranks on piece k: reduce-scatter (phase 0) or all-gather (phase 3). */
static int hring_node(Mesh *m, const HringPlan *h, float *buf, size_t k, int gather) {
    size_t a, b;
    for (int s = 0; s < h->G - 1; s++) {
        int out = gather ? mod(h->local + 1 - s, h->G) : mod(h->local - s, h->G);
        int in = gather ? mod(h->local - s, h->G) : mod(h->local - s - 1, h->G);
        hring_span(h, k, -1, h->G, out, &a, &b);
        RS_TRY(mesh_send(m, h->right, HRING_TAG(gather ? 3 : 0, s, k), buf + a, b - a));
        hring_span(h, k, -1, h->G, in, &a, &b);
        RS_TRY(mesh_recv(m, h->left, HRING_TAG(gather ? 3 : 0, s, k), buf + a, b - a, gather ? MESH_COPY : MESH_ADD));
    }
    return RS_OK;
}

/* Network step s of piece k's chunk: send (phase 1 reduce-scatter, 2 all-gather) its segment. */
static int hring_net_send(Mesh *m, const HringPlan *h, float *buf, size_t k, int gather, int s) {
    size_t a, b;
    int seg = gather ? mod(h->node + 1 - s, h->M) : mod(h->node - s, h->M);
    hring_span(h, k, mod(h->local + 1, h->G), h->M, seg, &a, &b);
    return mesh_send(m, h->next, HRING_TAG(gather ? 2 : 1, s, k), buf + a, b - a);
}

static int hring_net_recv(Mesh *m, const HringPlan *h, float *buf, size_t k, int gather, int s) {
    size_t a, b;
    int seg = gather ? mod(h->node - s, h->M) : mod(h->node - s - 1, h->M);
    hring_span(h, k, mod(h->local + 1, h->G), h->M, seg, &a, &b);
    return mesh_recv(m, h->prev, HRING_TAG(gather ? 2 : 1, s, k), buf + a, b - a, gather ? MESH_COPY : MESH_ADD);
}

static int hring_allreduce(Mesh *m, float *buf, size_t count) {
    const NodePlace *p = node_get();
    if (m->world == 1 || count == 0) return RS_OK;
    HringPlan h = {.G = p->per_node, .M = p->nodes, .count = count};
    if (h.M < 2 || h.G < 2 || h.M * h.G != m->world)
        return rs_error(RS_ERR_RUNTIME, "ring --hierarchical: %d nodes of %d ranks for a world of %d", h.M, h.G, m->world);
    if (h.M > 4096 || h.G > 4096) return rs_error(RS_ERR_INPUT, "ring --hierarchical: at most 4096 nodes of 4096 ranks");
    h.node = m->rank / h.G;
    h.local = m->rank % h.G;
    h.right = h.node * h.G + mod(h.local + 1, h.G);
    h.left = h.node * h.G + mod(h.local - 1, h.G);
    h.next = mod(h.node + 1, h.M) * h.G + h.local;
    h.prev = mod(h.node - 1, h.M) * h.G + h.local;
    size_t bytes = codec_bytes(m->wire.type, count);
    h.pieces = (bytes + HRING_PIECE_BYTES - 1) / HRING_PIECE_BYTES;
    if (h.pieces < 1) h.pieces = 1;
    if (h.pieces > HRING_MAX_PIECES) h.pieces = HRING_MAX_PIECES;
    if (h.pieces > count) h.pieces = count;
    /* 1. each piece reduce-scattered in the node, its chunk's first network message out at once */
    for (size_t k = 0; k < h.pieces; k++) {
        RS_TRY(hring_node(m, &h, buf, k, 0));
        RS_TRY(hring_net_send(m, &h, buf, k, 0, 0));
    }
    /* 2. the network ring, step by step, every piece's message out before the next step waits */
    for (int s = 0; s < h.M - 1; s++)
        for (size_t k = 0; k < h.pieces; k++) {
            RS_TRY(hring_net_recv(m, &h, buf, k, 0, s));
            if (s + 1 < h.M - 1) {
                RS_TRY(hring_net_send(m, &h, buf, k, 0, s + 1));
                continue;
            }
            size_t a, b; /* the sum of this rank's segment is whole: rounded to what the others get */
            hring_span(&h, k, mod(h.local + 1, h.G), h.M, mod(h.node + 1, h.M), &a, &b);
            codec_round(&m->wire, buf + a, b - a);
            RS_TRY(hring_net_send(m, &h, buf, k, 1, 0));
        }
    /* 3. the all-gather across the nodes, then, piece by piece, inside the node */
    for (int s = 0; s < h.M - 1; s++)
        for (size_t k = 0; k < h.pieces; k++) {
            RS_TRY(hring_net_recv(m, &h, buf, k, 1, s));
            if (s + 1 < h.M - 1) RS_TRY(hring_net_send(m, &h, buf, k, 1, s + 1));
            else RS_TRY(hring_node(m, &h, buf, k, 1));
        }
    return RS_OK;
}

/* ---- the back end (engine/sync.h) ------------------------------------------------------------ */

/* Binds this rank's mailbox (a Unix socket to its node's ranks, TCP to the others: net/node.h's
 * host key); messages on the run's --wire. */
static int hring_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    return mesh_init(job, state, endpoint, len, "ring --hierarchical", hring_allreduce, MESH_IPC | MESH_CODED);
}

static const SyncOps hring_ops = MESH_OPS("ring", hring_init);

const SyncOps *sync_ring_hierarchical(void) { return &hring_ops; }
