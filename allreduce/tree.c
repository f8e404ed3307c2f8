/* tree.c - the "tree" back end: a double binary tree all-reduce (tree.h) on the mesh's tagged messages (mesh.h) */
#include "tree.h"
#include "allreduce.h"
#include "mesh.h"
#include "../base/clock.h"
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

/* Where one tree stands on this rank: the next chunk to finish up and how many of its children's
 * sums are in it (children in order), and the next chunk to finish down. */
typedef struct {
    size_t up, dn;
    int kids_in;
} TreeAt;

/* Advances tree t on this rank as far as the messages already here allow: the up phase chunk
 * after chunk (child 0's sum added, then child 1's, then the chunk to the parent, or rounded at
 * the root), at most TREE_WINDOW chunks past the down phase; the down phase chunk after chunk (the
 * parent's copy, or at the root a chunk that finished up, on to the children). *moved is set when
 * anything happened. */
static int tree_step(Mesh *m, const TreeLinks *l, int t, TreeAt *a, float *buf, size_t count, size_t chunk, size_t nk,
                     int *moved) {
    size_t off, n;
    while (a->up < nk && a->up < a->dn + TREE_WINDOW) {
        if (!tree_chunk(count, t, chunk, a->up, &off, &n)) {
            a->up = nk;
            break;
        }
        for (; a->kids_in < 2; a->kids_in++) {
            int c = l->child[a->kids_in];
            if (c < 0) continue;
            int rc = mesh_recv_within(m, c, TREE_TAG(t, 0, a->up), buf + off, n, MESH_ADD, 0);
            if (rc < 0) return -rc;
            if (rc == 0) break;
        }
        if (a->kids_in < 2) break; /* a child's sum has not come yet */
        if (l->parent >= 0) RS_TRY(mesh_send(m, l->parent, TREE_TAG(t, 0, a->up), buf + off, n));
        else codec_round(&m->wire, buf + off, n);
        a->up++;
        a->kids_in = 0;
        *moved = 1;
    }
    while (a->dn < nk) {
        if (!tree_chunk(count, t, chunk, a->dn, &off, &n)) {
            a->dn = nk;
            break;
        }
        if (l->parent < 0) {
            if (a->dn >= a->up) return RS_OK; /* the root: not summed yet */
        } else {
            int rc = mesh_recv_within(m, l->parent, TREE_TAG(t, 1, a->dn), buf + off, n, MESH_COPY, 0);
            if (rc < 0) return -rc;
            if (rc == 0) return RS_OK;
        }
        for (int c = 0; c < 2; c++)
            if (l->child[c] >= 0) RS_TRY(mesh_send(m, l->child[c], TREE_TAG(t, 1, a->dn), buf + off, n));
        a->dn++;
        *moved = 1;
    }
    return RS_OK;
}

/* The error when nothing came for the timeout: the first message this rank still waits for (a
 * child's sum, or the parent's copy where the down phase or the window holds the tree). */
static int tree_stuck(const Mesh *m, const TreeLinks L[2], const TreeAt at[2], size_t nk) {
    for (int t = 0; t < 2; t++) {
        int up = at[t].up < nk && at[t].up < at[t].dn + TREE_WINDOW;
        int peer = up ? L[t].child[at[t].kids_in] : at[t].dn < nk ? L[t].parent : -1;
        if (peer >= 0)
            return rs_error(RS_ERR_PEER, "%s: rank %d got nothing from rank %d (tree %d, chunk %zu %s) for %.0f s (is it "
                            "alive? did it send?)", m->name, m->rank, peer, t, up ? at[t].up : at[t].dn,
                            up ? "up" : "down", m->job.timeout);
    }
    return rs_error(RS_ERR_PEER, "%s: rank %d got nothing for %.0f s", m->name, m->rank, m->job.timeout);
}

/* The two trees on one rank, as a data flow: whatever a message that came allows is done at once
 * (sends never wait), in either tree and either phase, and the rank waits only when nothing can
 * move, for whichever message comes next. So a chunk goes down as soon as its root has it, and a
 * rank inner in both trees never holds one tree's chunk back waiting on the other's. The adds into
 * a chunk are the same, in the same order, whatever order the messages come in. */
static int tree_run(Mesh *m, const TreeLinks L[2], float *buf, size_t count) {
    size_t chunk = tree_chunk_elems(count, codec_elem_bytes(m->wire.type)), half = (count + 1) / 2;
    size_t nk = (half + chunk - 1) / chunk; /* chunks of the larger half */
    if (nk > TREE_MAX_CHUNKS) return rs_error(RS_ERR_INPUT, "tree: %zu floats in one call: too many chunks", count);
    TreeAt at[2] = {{0, 0, 0}, {0, 0, 0}};
    double idle_since = clock_now();
    while (at[0].dn < nk || at[1].dn < nk) {
        int moved = 0;
        for (int t = 0; t < 2; t++) RS_TRY(tree_step(m, &L[t], t, &at[t], buf, count, chunk, nk, &moved));
        if (moved) {
            idle_since = clock_now();
            continue;
        }
        double left = idle_since + m->job.timeout - clock_now();
        if (left <= 0) return tree_stuck(m, L, at, nk);
        int rc = mesh_wait_any(m, left < 1 ? (int)(left * 1000.0) + 1 : 1000); /* a second at a time */
        if (rc < 0) return -rc;
    }
    return RS_OK;
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
