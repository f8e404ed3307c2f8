/* hring.c - "ring --hierarchical": Horovod's hierarchical all-reduce on the mesh (reduce-scatter inside the node, a ring over the nodes per local index, all-gather inside the node) */
#include "allreduce.h"
#include "mesh.h"
#include "../base/err.h"
#include "../base/split.h"
#include "../net/node.h"

#include <stddef.h>

/*
 * With M nodes of G ranks (net/node.h: rank = node * G + local), a bucket of n floats is cut into
 * G chunks (split_even):
 *   1. inside the node, a ring reduce-scatter over the G ranks: after G-1 steps local rank i holds
 *      the node's sum of chunk (i+1) mod G;
 *   2. across the nodes, the G ranks of local index i (one per node) all-reduce that chunk by a
 *      ring over the M nodes: its M sub-chunks reduce-scattered, rounded to the wire by their
 *      owner, then all-gathered (2(M-1) steps);
 *   3. inside the node, a ring all-gather of the G chunks (G-1 steps).
 * Each node's NIC carries G rings' 2(M-1)/M of n/G each way: 2(M-1)/M n, against the flat ring's
 * 2(N-1)/N n through the NIC of a node boundary's rank. Every element is summed once, in one order
 * (ring order inside the node, then across), and copied everywhere after: every rank holds the
 * same bits, not the flat ring's (another order of the same sum).
 *
 * The bucket goes whole through each phase. Cut into pieces pipelined through the three phases
 * (each piece's network message out as soon as its node phase was done), it was slower: the
 * node's G ranks then interleave their pieces' reduce-scatter and all-gather messages on its one
 * NIC, so that each waits on the others' (bench, 4 ranks on 2 nodes, 200 Mbit/s, 16 MiB: about
 * 1000 ms in pieces of 4 MiB, 712 whole, 671 the NIC's bound; docs/benchmarks.md, "Nodes").
 */

/* A message's tag: the phase (0 node reduce-scatter, 1 network reduce-scatter, 2 network
 * all-gather, 3 node all-gather) and the step. */
#define HRING_TAG(phase, s) ((int)(((unsigned)(phase) << 28) | (unsigned)(s)))

static int mod(int x, int p) { return ((x % p) + p) % p; }

static int hring_allreduce(Mesh *m, float *buf, size_t count) {
    const NodePlace *p = node_get();
    int G = p->per_node, M = p->nodes;
    if (m->world == 1 || count == 0) return RS_OK;
    if (M < 2 || G < 2 || M * G != m->world)
        return rs_error(RS_ERR_RUNTIME, "ring --hierarchical: %d nodes of %d ranks for a world of %d", M, G, m->world);
    int node = m->rank / G, local = m->rank % G, base = node * G, right = base + mod(local + 1, G),
        left = base + mod(local - 1, G);
    /* 1. inside the node: this rank ends with the node's sum of chunk (local + 1) mod G */
    RS_TRY(mesh_ring(m, buf, count, G, local, right, left, HRING_TAG(0, 0), -1, 0));
    /* 2. that chunk all-reduced across the nodes, among the ranks of this local index */
    size_t lo, hi;
    split_even(count, G, mod(local + 1, G), &lo, &hi);
    RS_TRY(mesh_ring(m, buf + lo, hi - lo, M, node, mod(node + 1, M) * G + local, mod(node - 1, M) * G + local,
                     HRING_TAG(1, 0), HRING_TAG(2, 0), 1));
    /* 3. inside the node: every chunk from its owner along the node's ring (rounded already) */
    return mesh_ring(m, buf, count, G, local, right, left, -1, HRING_TAG(3, 0), 0);
}

/* ---- the back end (engine/sync.h) ------------------------------------------------------------ */

/* Binds this rank's mailbox (a Unix socket to its node's ranks, TCP to the others: net/node.h's
 * host key); messages on the run's --wire. */
static int hring_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    return mesh_init(job, state, endpoint, len, "ring --hierarchical", hring_allreduce, MESH_IPC | MESH_CODED);
}

static const SyncOps hring_ops = MESH_OPS("ring", hring_init);

const SyncOps *sync_ring_hierarchical(void) { return &hring_ops; }
