/* arch.c - the architectures a report names: their names and their alpha-beta cost models */
#include "arch.h"
#include "../allreduce/tree.h"
#include "../base/codec.h"

#include <math.h>
#include <string.h>

/* ---- cost models (experiments/predict.h has the derivations) ---- */

static int cost_none(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    *a = *b = 0;
    return 0;
}

/* Ring all-reduce: reduce-scatter then all-gather, N-1 steps each, n/N bytes a step. */
static int cost_ring(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    double N = nranks;
    *a = *b = 0;
    if (nranks < 2) return 0;
    *a = 2 * (N - 1);
    *b = 2 * (N - 1) / N * n;
    return 0;
}

/* Double binary trees (allreduce/tree.h): an up phase then a down phase, each as many rounds of
 * messages as the trees are deep (the first chunk's way; later chunks follow it in the pipeline),
 * and each as long as its busiest rank's link one way: a rank receives from its children what it
 * sends down to them, and sends to its parents what it receives from them, half of n per tree, so
 * a phase moves max over ranks of max(children, parents) x n/2 on the busiest link: n for large N
 * (an inner node: 2 children in one tree, a parent in both), n/2 at N = 2. */
static int cost_tree(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    *a = *b = 0;
    if (nranks < 2) return 0;
    int busiest = 0;
    for (int r = 0; r < nranks; r++) {
        int kids = 0, parents = 0;
        for (int t = 0; t < 2; t++) {
            TreeLinks l;
            tree_links(nranks, r, t, &l);
            kids += (l.child[0] >= 0) + (l.child[1] >= 0);
            parents += l.parent >= 0;
        }
        int most = kids > parents ? kids : parents;
        if (most > busiest) busiest = most;
    }
    *a = 2.0 * tree_depth(nranks);
    *b = 2.0 * busiest * n / 2;
    return 0;
}

/* A parameter server: colocated (rank 0's link carries every other rank's push and pull), K
 * dedicated servers (a push and a pull; the busier of a worker's and a server's link bounds), or
 * sharded, a shard in every worker (each link carries the ring's 2(N-1)/N n, in N-1 messages each
 * way sent at once: a push round and a pull round). Pipelined (partitions, --ps-partition-kb:
 * every partition answered as soon as it is in, so the pulls leave while the pushes still come
 * in on a full-duplex link) the two rounds overlap and the bytes term is the busiest link's one
 * way, BytePS's Table 1: colocated (N-1) n, dedicated max(n, N n / K); sharded's push and pull
 * share each direction already, 2(N-1)/N n either way. */
static int cost_ps_colocated(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    double N = nranks;
    *a = *b = 0;
    if (nranks < 2) return 0;
    *a = 2 * (N - 1);
    *b = (pipelined ? 1 : 2) * (N - 1) * n;
    return 0;
}

/* a shard in every worker: the ring's bytes, in one round each way */
static int cost_ps_sharded(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    double N = nranks;
    *a = *b = 0;
    if (nranks < 2) return 0;
    *a = 2;
    *b = 2 * (N - 1) / N * n;
    return 0;
}

static int cost_ps_dedicated(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    double N = nranks, K = servers > 0 ? servers : 1, server_link = N * n / K;
    *a = 2;
    *b = (pipelined ? 1 : 2) * (n > server_link ? n : server_link);
    return 0;
}

/* BytePS (OSDI'20 section 4.1): every worker's summation shard holds y = (N-k)/W of the keys and
 * each of k CPU servers x = 2(N-1)/W, W = N^2 + kN - 2k (servers is k, 0 <= k <= N). Counted as
 * cost_ps_dedicated counts its servers, a push round then a pull round, each as long as its busiest link
 * one way: a worker sends (1-y) n and its shard takes in (N-1) y n, a CPU server takes in N x n
 * (and the same back in the pull round). k = 0 is the sharded ps's 2(N-1)/N n and k = N the
 * dedicated ps's 2n with N servers: the same runs, the same prediction. BytePS's Table 1 line,
 * 2N(N-1)/W n = N x n, is the limit where one bucket's pull overlaps the next one's push (both
 * directions busy at once); one bucket's rounds do not overlap. Pipelined (partitions) they do: a
 * worker's link then carries its pushes and its shard's answers, (1 - y) n + (N-1) y n, each way
 * at once, a CPU server's N x n, and the bytes term is the larger: Table 1's line. */
static int cost_byteps(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    double N = nranks, k = servers, W = N * N + k * N - 2 * k;
    *a = *b = 0;
    if (servers < 0 || servers > nranks || (nranks == 1 && servers > 0)) return -1;
    if (nranks < 2) return 0;
    double y = (N - k) / W, x = 2 * (N - 1) / W, worker = fmax(1 - y, (N - 1) * y), server = k > 0 ? N * x : 0;
    *a = 2;
    *b = pipelined ? fmax((1 - y) + (N - 1) * y, server) * n : 2 * fmax(worker, server) * n;
    return 0;
}

/* An architecture whose cost the one-link model cannot price: the hierarchical ring's steps inside
 * a node take the node's fabric and the others the NIC, two links the alpha-beta model of one
 * link does not have. */
static int cost_unmodelled(int servers, int nranks, int pipelined, double n, double *a, double *b) {
    *a = *b = 0;
    return -1;
}

/* Each architecture's report name and cost model (lab 5's all-reduce is priced as the ring it
 * should be), in Arch's order. */
static const struct {
    const char *name;
    int (*cost)(int servers, int nranks, int pipelined, double n, double *a, double *b);
} arch_rows[ARCH_COUNT] = {
    {"none", cost_none},
    {"ring", cost_ring},
    {"tree", cost_tree},
    {"student", cost_ring},
    {"ps-colocated", cost_ps_colocated},
    {"ps-sharded", cost_ps_sharded},
    {"ps-dedicated", cost_ps_dedicated},
    {"byteps", cost_byteps},
    {"ring-hierarchical", cost_unmodelled},
    {"tree-hierarchical", cost_unmodelled},
    {"byteps-hierarchical", cost_unmodelled},
};

const char *arch_name(Arch a) { return a >= 0 && a < ARCH_COUNT ? arch_rows[a].name : "?"; }

int arch_parse(const char *name, Arch *out) {
    for (int i = 0; name && i < ARCH_COUNT; i++)
        if (!strcmp(arch_rows[i].name, name)) return *out = (Arch)i, 0;
    return -1;
}

int arch_cost(Arch arch, int servers, int nranks, int pipelined, double n_bytes, double *a, double *b) {
    *a = *b = 0;
    if (arch < 0 || arch >= ARCH_COUNT) return -1;
    return arch_rows[arch].cost(servers, nranks, pipelined, n_bytes, a, b);
}

double arch_wire_ratio(Arch arch, const char *wire) { return codec_wire_ratio(wire, arch_is_server(arch)); }
