/* tree.c - the "tree" back end: a double binary tree all-reduce (tree.h) on the mesh's tagged messages (mesh.h) */
#include "tree.h"
#include "allreduce.h"
#include "mesh.h"
#include "../base/codec.h"
#include "../base/err.h"
#include "../base/split.h"
#include "../net/node.h"

#include <stddef.h>

/* ---- the trees ------------------------------------------------------------------------------- */

/* Tree 0: the in-order binary tree on 0..n-1 rooted at 0 (tree.h). */
static void tree_btree(int n, int r, TreeLinks *o) {
    o->parent = o->child[0] = o->child[1] = -1;
    if (n < 2) return;
    if (r == 0) {
        int top = 1;
        while (2 * top < n) top *= 2;
        o->child[0] = top;
        return;
    }
    int b = r & -r, up = (r - b) | (2 * b);
    o->parent = up < n ? up : r - b;
    int h = b / 2;
    if (!h) return;
    o->child[0] = r - h;
    while (h && r + h >= n) h /= 2;
    if (h) o->child[1] = r + h;
}

void tree_links(int nranks, int rank, int t, TreeLinks *out) {
    if (t == 0 || nranks < 2) {
        tree_btree(nranks, rank, out);
        return;
    }
    TreeLinks l;
    int odd = nranks % 2;
    /* where rank sits in tree 0's shape, and back */
    tree_btree(nranks, odd ? (rank - 1 + nranks) % nranks : nranks - 1 - rank, &l);
#define BACK(x) ((x) < 0 ? -1 : odd ? ((x) + 1) % nranks : nranks - 1 - (x))
    out->parent = BACK(l.parent);
    out->child[0] = BACK(l.child[0]);
    out->child[1] = BACK(l.child[1]);
#undef BACK
}

void tree_links_nodes(int nodes, int per_node, int rank, int t, TreeLinks *out) {
    int G = per_node, node = rank / G, local = rank % G;
    TreeLinks nl;
    tree_links(nodes, node, t, &nl);
    out->parent = local > 0 ? rank - 1 : nl.parent >= 0 ? nl.parent * G + G - 1 : -1;
    out->child[0] = out->child[1] = -1;
    if (local + 1 < G) out->child[0] = rank + 1;
    else /* the tail: the child nodes' heads */
        for (int c = 0; c < 2; c++) out->child[c] = nl.child[c] >= 0 ? nl.child[c] * G : -1;
}

int tree_depth(int nranks) {
    int worst = 0;
    for (int t = 0; t < 2 && nranks > 1; t++)
        for (int r = 0; r < nranks; r++) {
            TreeLinks l;
            int d = 0;
            for (int x = r; tree_links(nranks, x, t, &l), l.parent >= 0 && d <= nranks; x = l.parent) d++;
            if (d > worst) worst = d;
        }
    return worst;
}

/* ---- the all-reduce -------------------------------------------------------------------------- */

/* A message's tag: the tree, the phase (0 up, 1 down) and the chunk. */
#define TREE_TAG(t, down, k) ((int)(((unsigned)(t) << 30) | ((unsigned)(down) << 29) | (unsigned)(k)))
#define TREE_MAX_CHUNKS (1u << 29)

/* Chunk k of half t of [0, count): *off and *n; 0 when the half has no chunk k. */
static int tree_chunk(size_t count, int t, size_t chunk, size_t k, size_t *off, size_t *n) {
    size_t lo, hi;
    split_even(count, 2, t, &lo, &hi);
    size_t a = lo + k * chunk;
    if (a >= hi) return 0;
    *off = a;
    *n = hi - a < chunk ? hi - a : chunk;
    return 1;
}

size_t tree_chunk_elems(size_t count, size_t elem_bytes) {
    size_t half = (count + 1) / 2, lo = TREE_CHUNK_MIN / elem_bytes, hi = TREE_CHUNK_MAX / elem_bytes;
    size_t c = (half + TREE_CHUNKS - 1) / TREE_CHUNKS;
    return c < lo ? lo : c > hi ? hi : c;
}

/* Children in tree t. */
static int tree_kids(const TreeLinks *l) { return (l->child[0] >= 0) + (l->child[1] >= 0); }

/* Chunk k of tree t, up: the children's partial sums into this rank's (child 0's, then child
 * 1's), then to the parent; at the root, rounded to what the wire will give its children. */
static int tree_up(Mesh *m, const TreeLinks *l, int t, size_t k, float *buf, size_t count, size_t chunk) {
    size_t off, n;
    if (!tree_chunk(count, t, chunk, k, &off, &n)) return RS_OK;
    for (int c = 0; c < 2; c++)
        if (l->child[c] >= 0) RS_TRY(mesh_recv(m, l->child[c], TREE_TAG(t, 0, k), buf + off, n, MESH_ADD));
    if (l->parent >= 0) return mesh_send(m, l->parent, TREE_TAG(t, 0, k), buf + off, n);
    codec_round(&m->wire, buf + off, n);
    return RS_OK;
}

/* Chunk k of tree t, down: the root's sum from the parent, on to the children. */
static int tree_down(Mesh *m, const TreeLinks *l, int t, size_t k, float *buf, size_t count, size_t chunk) {
    size_t off, n;
    if (!tree_chunk(count, t, chunk, k, &off, &n)) return RS_OK;
    if (l->parent >= 0) RS_TRY(mesh_recv(m, l->parent, TREE_TAG(t, 1, k), buf + off, n, MESH_COPY));
    for (int c = 0; c < 2; c++)
        if (l->child[c] >= 0) RS_TRY(mesh_send(m, l->child[c], TREE_TAG(t, 1, k), buf + off, n));
    return RS_OK;
}

/* The two trees' schedule on one rank. In the tree where it is a leaf (at most one: tree 0's
 * leaves are tree 1's inner nodes) its work is a send up and a copy down that nothing on this rank
 * waits for, while the other tree's chunks wait for its children or feed them: so the leaf's
 * sends go one chunk ahead of the other tree's (the inner node they feed never waits a chunk for
 * them) and its copies one chunk behind (they never hold back a forward). The adds into a chunk
 * are the same, in the same order, whatever the schedule. */
static int tree_run(Mesh *m, const TreeLinks L[2], float *buf, size_t count) {
    size_t chunk = tree_chunk_elems(count, codec_elem_bytes(m->wire.type)), half = (count + 1) / 2;
    size_t nk = (half + chunk - 1) / chunk; /* chunks of the larger half */
    if (nk > TREE_MAX_CHUNKS) return rs_error(RS_ERR_INPUT, "tree: %zu floats in one call: too many chunks", count);
    int leaf = tree_kids(&L[0]) == 0 ? 0 : tree_kids(&L[1]) == 0 ? 1 : -1, other = leaf == 0 ? 1 : 0;
    if (leaf >= 0) RS_TRY(tree_up(m, &L[leaf], leaf, 0, buf, count, chunk));
    for (size_t k = 0; k < nk; k++) {
        if (leaf >= 0 && k + 1 < nk) RS_TRY(tree_up(m, &L[leaf], leaf, k + 1, buf, count, chunk));
        RS_TRY(tree_up(m, &L[other], other, k, buf, count, chunk));
        if (leaf < 0) RS_TRY(tree_up(m, &L[1], 1, k, buf, count, chunk)); /* inner in both: tree 0, then 1 */
    }
    for (size_t k = 0; k < nk; k++) {
        RS_TRY(tree_down(m, &L[other], other, k, buf, count, chunk));
        if (leaf < 0) RS_TRY(tree_down(m, &L[1], 1, k, buf, count, chunk));
        if (leaf >= 0 && k >= 1) RS_TRY(tree_down(m, &L[leaf], leaf, k - 1, buf, count, chunk));
    }
    return leaf >= 0 ? tree_down(m, &L[leaf], leaf, nk - 1, buf, count, chunk) : RS_OK;
}

static int tree_allreduce(Mesh *m, float *buf, size_t count) {
    if (m->world == 1 || count == 0) return RS_OK;
    TreeLinks L[2];
    tree_links(m->world, m->rank, 0, &L[0]);
    tree_links(m->world, m->rank, 1, &L[1]);
    return tree_run(m, L, buf, count);
}

/* NCCL's trees over nodes (tree_links_nodes), on the nodes of net/node.h. */
static int tree_nodes_allreduce(Mesh *m, float *buf, size_t count) {
    const NodePlace *p = node_get();
    if (m->world == 1 || count == 0) return RS_OK;
    if (p->nodes < 2 || p->per_node < 2 || p->nodes * p->per_node != m->world)
        return rs_error(RS_ERR_RUNTIME, "tree --hierarchical: %d nodes of %d ranks for a world of %d", p->nodes, p->per_node,
                        m->world);
    TreeLinks L[2];
    tree_links_nodes(p->nodes, p->per_node, m->rank, 0, &L[0]);
    tree_links_nodes(p->nodes, p->per_node, m->rank, 1, &L[1]);
    return tree_run(m, L, buf, count);
}

/* ---- the back end (engine/sync.h) ------------------------------------------------------------ */

/* Binds this rank's mailbox (TCP, and a Unix socket for the ranks of this host unless
 * --transport tcp); messages on the run's --wire. */
static int tree_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    return mesh_init(job, state, endpoint, len, "tree", tree_allreduce, MESH_IPC | MESH_CODED);
}

static const SyncOps tree_ops = MESH_OPS("tree", tree_init);

const SyncOps *sync_tree(void) { return &tree_ops; }

/* The trees over nodes: the same mailbox and messages, NCCL's shape over the nodes. */
static int tree_nodes_init(const SyncJob *job, void **state, char *endpoint, size_t len) {
    return mesh_init(job, state, endpoint, len, "tree --hierarchical", tree_nodes_allreduce, MESH_IPC | MESH_CODED);
}

static const SyncOps tree_nodes_ops = MESH_OPS("tree", tree_nodes_init);

const SyncOps *sync_tree_hierarchical(void) { return &tree_nodes_ops; }
