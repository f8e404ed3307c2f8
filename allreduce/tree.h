/* tree.h - the double binary tree all-reduce (--sync tree): two complementary binary trees over the ranks, each reducing then broadcasting half of every bucket, in chunks */
#ifndef RS_TREE_H
#define RS_TREE_H

#include <stddef.h>

/*
 * The trees are Sanders, Speck and Träff's two trees as NCCL builds them (NCCL's "Tree"):
 *   tree 0  an in-order binary tree on the ranks 0..N-1: rank r > 0 with lowest set bit b has the
 *           parent (r - b) OR 2b, or r - b where that is N or more, and the children r - b/2 and
 *           r + c, c the largest of b/2, b/4, ... with r + c < N (none when b = 1: the odd ranks
 *           are its leaves); rank 0 is the root, with one child, the largest power of two below N;
 *   tree 1  tree 0 mirrored (rank r in the place of N-1-r) when N is even, shifted by one (r in
 *           the place of r-1 mod N) when N is odd: tree 0's leaves are tree 1's inner nodes, so
 *           every rank but rank 0 (tree 0's root, with its one child) is an inner node of at most
 *           one tree and forwards about n bytes either way (tests/test_tree.c checks it to N = 10^4).
 * A bucket of n floats is cut in two halves (base/split.h's even split), tree t carrying half t;
 * each half is cut in chunks (tree_chunk_elems: 16 of them, 16 to 256 KiB each on the wire). Up: for
 * every chunk, a rank adds its
 * children's partial sums into its own (child 0's, then child 1's: one order on every rank) and
 * sends the result to its parent; the roots end with the sum, rounded to the wire's precision.
 * Down: each rank copies its parent's chunk and forwards it to its children, so every rank ends
 * with the roots' bits. A rank runs both trees and both phases as messages come (tree_run's data
 * flow, as NCCL pipelines them): a chunk goes down as soon as its root has it, while later chunks
 * still go up, and a rank inner in both trees (a node's head and tail over nodes) never holds one
 * tree's chunk back waiting on the other's. So each link carries both phases at once: the time is
 * about a busiest interface's bytes each way over its bandwidth (n on 2 nodes), not a phase's
 * busiest plus the other's.
 *
 * The sum's order differs from the ring's (which adds in ring order around each chunk's owner):
 * element i of half t is the sum over tree t's subtrees, a node's own value first, then its
 * first child's subtree, then its second's. Results agree with one rank within fp32 rounding
 * (the claims' 1e-4 on the loss curve), and bitwise across ranks.
 *
 * Per rank and bucket each way: the half of every tree times the rank's neighbours in it
 * (parent and children): an inner node 3 of n/2 in its inner tree and 1 in the other, 2n in all;
 * a rank that is a leaf in both (N = 2) n. tree_links gives the neighbours (tests and the cost
 * model count with it).
 */

/* ---- Types ---- */

/* A chunk, the pipeline's unit: a half cut in TREE_CHUNKS chunks, so that the pipeline's fill and
 * drain (the trees' depth, in chunks) stay a small part of a phase, each of TREE_CHUNK_MIN to
 * TREE_CHUNK_MAX bytes on the wire (below, a message costs its latency, not its bytes; above, the
 * chunks are many enough). Measured at N = 4 over 300 Mbit/s, 4 MiB: 8 and 16 chunks within noise
 * of each other (docs/benchmarks.md). tree_chunk_elems gives it. */
#define TREE_CHUNKS 16
#define TREE_CHUNK_MIN (16u * 1024u)
#define TREE_CHUNK_MAX (256u * 1024u)

/* The chunks of a tree a rank may have sent up and not yet had back down (a credit, as NCCL's 8
 * steps a connection): a leaf, which waits on nobody, would otherwise book its whole half on its
 * interface at once, ahead of the chunks other ranks wait for. Measured at N = 8 over 200 Mbit/s,
 * 16 MiB (flat): 4 1570 ms, 8 1470, 16 1516, unbounded 1680; the trees over nodes within 1% of
 * each other from 4 up (docs/benchmarks.md). */
#define TREE_WINDOW 8

/* A rank's neighbours in one tree: its parent (-1 at the root) and up to two children (-1). */
typedef struct {
    int parent, child[2];
} TreeLinks;

/* ---- Prototypes ---- */

/* Rank rank's neighbours in tree t (0 or 1) over nranks ranks (every field -1 for one rank). */
void tree_links(int nranks, int rank, int t, TreeLinks *out);

/* Rank rank's neighbours in tree t of NCCL's trees over nodes (--sync tree --hierarchical): the
 * double binary tree above over the M nodes, and inside each node of G ranks (rank = node * G +
 * local) a chain. A node's head (local 0) sends up to its parent node's tail (local G-1); the
 * tail takes in its child nodes' heads; up the chain, local i sends to local i-1. So every rank
 * has at most two children, only heads and tails touch the network, and a node's NIC carries
 * what a rank of the flat tree over M ranks would: n each way on 2 nodes, whatever G (the flat
 * ring's NIC: 2(N-1)/N n). G = 1 is tree_links over M. */
void tree_links_nodes(int nodes, int per_node, int rank, int t, TreeLinks *out);

/* The elements of one chunk of a call of count elements of elem_bytes each (tree.h's rule). */
size_t tree_chunk_elems(size_t count, size_t elem_bytes);

/* The longest path from a root to a leaf over both trees (0 for one rank): the rounds one
 * phase's first chunk takes. */
int tree_depth(int nranks);

#endif
