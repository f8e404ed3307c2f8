/* arch.c - the architectures a report names: their names and their alpha-beta cost models */
#include "arch.h"
#include "../allreduce/tree.h"
#include "../engine/config_check.h"
#include "../base/codec.h"

#include <math.h>
#include <string.h>

/* ---- cost models (experiments/predict.h has the derivations) ---- */

/* The cost models price the busiest network interface: a rank's own (every rank a machine), or
 * under nodes (M machines of G = N / M ranks, --nodes) the node's one NIC, which all its ranks'
 * traffic to other nodes shares. The fabric inside a node is taken as unpaced: its bytes cost
 * nothing, its rounds of messages are counted apart (arch_node_cost). Top is one cost call's
 * shape of the job. */
typedef struct {
    int servers, N, M, G, pipelined;
} Top;

static Top top_of(int servers, int nranks, int nodes, int pipelined) {
    Top t = {servers, nranks, nranks, 1, pipelined};
    if (config_on_machines(nranks, nodes)) t.M = nodes, t.G = nranks / nodes;
    return t;
}

static int cost_none(const Top *t, double n, double *a, double *b) {
    (void)t, (void)n;
    *a = *b = 0;
    return 0;
}

/* Ring all-reduce: reduce-scatter then all-gather, N-1 steps each, n/N bytes a step. On nodes the
 * ranks go round in order, so a node's NIC carries what one rank's own would. */
static int cost_ring(const Top *t, double n, double *a, double *b) {
    double N = t->N;
    *a = *b = 0;
    if (t->N < 2) return 0;
    *a = 2 * (N - 1);
    *b = 2 * (N - 1) / N * n;
    return 0;
}

/* Double binary trees (allreduce/tree.h) over N ranks, ranks r on node r / G: an up phase and a
 * down phase, as many rounds of messages each as the trees are deep (the first chunk's way up and
 * down; later chunks follow it in the pipeline). The two phases run at once (tree_run's data
 * flow: a chunk goes down as soon as its root has it), so the bytes term is the busiest NIC's
 * whole call one way: a node sends, half of n a tree, up for each of its ranks whose parent is on
 * another node and down for each child on another node, and receives as much: (parents +
 * children across) x n/2. With a node a rank: 2n for large N (an inner node: 2 children in one
 * tree, a parent in both), n at N = 2. */
static int cost_tree_over(int N, int G, double n, double *a, double *b) {
    *a = *b = 0;
    if (N < 2) return 0;
    int busiest = 0, M = N / G;
    for (int node = 0; node < M; node++) {
        int out = 0, in = 0;
        for (int r = node * G; r < (node + 1) * G; r++)
            for (int t = 0; t < 2; t++) {
                TreeLinks l;
                tree_links(N, r, t, &l);
                out += l.parent >= 0 && l.parent / G != node;
                for (int c = 0; c < 2; c++) in += l.child[c] >= 0 && l.child[c] / G != node;
            }
        if (out + in > busiest) busiest = out + in;
    }
    *a = 2.0 * tree_depth(N);
    *b = busiest * n / 2;
    return 0;
}

static int cost_tree(const Top *t, double n, double *a, double *b) { return cost_tree_over(t->N, t->G, n, a, b); }

/* A parameter server: colocated (rank 0's NIC carries every other node's ranks' push and pull,
 * (N - G) n, and each other node's NIC its own G ranks', G n), K dedicated servers (a push and a
 * pull; the busier of a worker node's NIC, G n, and a server's, N n / K, bounds), or sharded, a
 * shard in every worker (each NIC carries G(N - G)/N n each way, the ring's 2(N-1)/N n at G = 1,
 * in N-1 messages each way sent at once: a push round and a pull round). Pipelined (partitions,
 * --ps-partition-kb: every partition answered as soon as it is in, so the pulls leave while the
 * pushes still come in on a full-duplex link) the two rounds overlap and the bytes term is the
 * busiest link's one way, BytePS's Table 1: colocated (N-1) n, dedicated max(n, N n/K); sharded's
 * push and pull share each direction already, 2(N-1)/N n either way. */
static int cost_ps_colocated(const Top *t, double n, double *a, double *b) {
    double N = t->N, G = t->G;
    *a = *b = 0;
    if (t->N < 2) return 0;
    *a = 2 * (N - 1);
    *b = (t->pipelined ? 1 : 2) * fmax(N - G, G) * n;
    return 0;
}

/* a shard in every worker: the ring's bytes, in one round each way */
static int cost_ps_sharded(const Top *t, double n, double *a, double *b) {
    double N = t->N, G = t->G;
    *a = *b = 0;
    if (t->N < 2) return 0;
    *a = 2;
    *b = 2 * G * (N - G) / N * n;
    return 0;
}

static int cost_ps_dedicated(const Top *t, double n, double *a, double *b) {
    double N = t->N, K = t->servers > 0 ? t->servers : 1, server_link = N * n / K, worker_link = t->G * n;
    *a = 2;
    *b = (t->pipelined ? 1 : 2) * fmax(worker_link, server_link);
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
 * at once, a CPU server's N x n, and the bytes term is the larger: Table 1's line. On nodes of G
 * a node's NIC carries its G workers' pushes to the shards and servers of other nodes,
 * G((N - G) y + k x) n, and its G shards' intake from the other nodes' workers, G(N - G) y n. */
static int cost_byteps(const Top *t, double n, double *a, double *b) {
    double N = t->N, G = t->G, k = t->servers, W = N * N + k * N - 2 * k;
    *a = *b = 0;
    if (t->servers < 0 || t->servers > t->N || (t->N == 1 && t->servers > 0)) return -1;
    if (t->N < 2) return 0;
    double y = (N - k) / W, x = 2 * (N - 1) / W, push = G * ((N - G) * y + k * x), shard = G * (N - G) * y;
    double server = k > 0 ? N * x : 0;
    *a = 2;
    *b = t->pipelined ? fmax(push + shard, server) * n : 2 * fmax(fmax(push, shard), server) * n;
    return 0;
}

/* The machine-aware forms (--hierarchical), priced on the NIC as their flat counterparts over the
 * M machines are, plus their rounds inside the node (arch_node_cost). Horovod's hierarchical
 * ring: G rings over the M nodes on n/G each, 2(M-1) rounds, 2(M-1)/M n through each NIC. */
static int cost_ring_hier(const Top *t, double n, double *a, double *b) {
    Top m = *t;
    m.N = t->M, m.G = 1;
    return cost_ring(&m, n, a, b);
}

/* NCCL's trees over nodes: the double binary trees over the M nodes (a node's head and tail the
 * only ranks on the network): the flat trees' figures over M. */
static int cost_tree_hier(const Top *t, double n, double *a, double *b) { return cost_tree_over(t->M, 1, n, a, b); }

/* BytePS's machine-level reduce: the flat byteps with n = M machines. */
static int cost_byteps_hier(const Top *t, double n, double *a, double *b) {
    Top m = *t;
    m.N = t->M, m.G = 1;
    if (t->servers > t->M) return *a = *b = 0, -1;
    return cost_byteps(&m, n, a, b);
}

/* ZeRO-3: each layer's parameters all-gathered before its forward and again before its backward,
 * its gradients reduce-scattered: three of the ring's half-phases, 1.5x its rounds and bytes
 * (a layer kept gathered for the whole step, gpt's tied embedding, is gathered once: less). */
static int cost_zero3(const Top *t, double n, double *a, double *b) {
    int rc = cost_ring(t, n, a, b);
    *a *= 1.5, *b *= 1.5;
    return rc;
}

/* Each architecture's report name and cost model (lab 5's all-reduce is priced as the ring it
 * should be), in Arch's order. */
static const struct {
    const char *name;
    int (*cost)(const Top *t, double n, double *a, double *b);
} arch_rows[ARCH_COUNT] = {
    {"none", cost_none},
    {"ring", cost_ring},
    {"tree", cost_tree},
    {"student", cost_ring},
    {"ps-colocated", cost_ps_colocated},
    {"ps-sharded", cost_ps_sharded},
    {"ps-dedicated", cost_ps_dedicated},
    {"byteps", cost_byteps},
    {"ring-hierarchical", cost_ring_hier},
    {"tree-hierarchical", cost_tree_hier},
    {"byteps-hierarchical", cost_byteps_hier},
    {"zero-1", cost_ring}, /* a reduce-scatter and an all-gather: the ring's two phases */
    {"zero-2", cost_ring},
    {"zero-3", cost_zero3},
};

const char *arch_name(Arch a) { return a >= 0 && a < ARCH_COUNT ? arch_rows[a].name : "?"; }

int arch_parse(const char *name, Arch *out) {
    for (int i = 0; name && i < ARCH_COUNT; i++)
        if (!strcmp(arch_rows[i].name, name)) return *out = (Arch)i, 0;
    return -1;
}

int arch_cost(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double *a, double *b) {
    *a = *b = 0;
    if (arch < 0 || arch >= ARCH_COUNT) return -1;
    Top t = top_of(servers, nranks, nodes, pipelined);
    return arch_rows[arch].cost(&t, n_bytes, a, b);
}

int arch_node_cost(Arch arch, int nranks, int nodes, double n_bytes, double *rounds, double *bytes) {
    Top t = top_of(0, nranks, nodes, 0);
    double G = t.G;
    *rounds = *bytes = 0;
    if (t.G < 2) return 0;
    switch (arch) {
    case ARCH_RING_HIER: /* the reduce-scatter and the all-gather inside: a ring's 2(G-1)/G n a port */
        *rounds = 2 * (G - 1), *bytes = 2 * (G - 1) / G * n_bytes;
        break;
    case ARCH_TREE_HIER: /* up the chain and down it, half of n a tree each way in each phase */
        *rounds = 2 * (G - 1), *bytes = 2 * n_bytes;
        break;
    case ARCH_BYTEPS_HIER: /* the reduce-scatter, the chunks to the root, the parameters from the root to G-1 ranks */
        *rounds = (G - 1) + 2, *bytes = (G - 1) / G * n_bytes + (G - 1) * n_bytes;
        break;
    default: /* the flat forms' rounds are all the NIC's (or take its pace) */
        break;
    }
    return 0;
}

double arch_wire_ratio(Arch arch, const char *wire) {
    if (arch == ARCH_ZERO3) /* gradients in the wire's type once, parameters in fp32 twice (forward, backward) */
        return (codec_wire_ratio(wire, 0) + 2.0) / 3;
    if (arch_is_zero(arch)) /* gradients in the wire's type one way, parameters in fp32 the other */
        return (codec_wire_ratio(wire, 0) + 1.0) / 2;
    return codec_wire_ratio(wire, arch_is_server(arch));
}
