/* test_tree.c - the double binary trees of --sync tree (allreduce/tree.h): one root each, parents and children that agree, every rank reached, inner in at most one tree, the depth log2 N */
#include "../allreduce/tree.h"
#include "test.h"

#include <stdlib.h>

/* Checks the two trees over n ranks; 0 when they hold, else the first failure's line. */
static int trees_hold(int n, int *inner_both, int *depth) {
    TreeLinks *l = malloc((size_t)n * 2 * sizeof *l);
    if (!l) return __LINE__;
    int bad = 0;
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < n; r++) tree_links(n, r, t, &l[t * n + r]);
    *inner_both = 0;
    for (int t = 0; t < 2 && !bad; t++) {
        const TreeLinks *T = l + t * n;
        int roots = 0;
        for (int r = 0; r < n && !bad; r++) {
            if (T[r].parent < 0) roots++;
            else if (T[r].parent >= n || T[r].parent == r) bad = __LINE__;
            else { /* my parent lists me among its children, once */
                const TreeLinks *p = &T[T[r].parent];
                if ((p->child[0] == r) + (p->child[1] == r) != 1) bad = __LINE__;
            }
            for (int c = 0; c < 2 && !bad; c++) {
                int k = T[r].child[c];
                if (k >= 0 && (k >= n || T[k].parent != r)) bad = __LINE__;
            }
            if (!bad && T[r].child[0] < 0 && T[r].child[1] >= 0) bad = __LINE__; /* a second child without a first */
            /* every rank reaches the root within n steps: no cycle */
            int x = r, steps = 0;
            while (!bad && T[x].parent >= 0 && steps <= n) x = T[x].parent, steps++;
            if (steps > n) bad = __LINE__;
        }
        if (!bad && roots != (n > 1 ? 1 : n)) bad = __LINE__;
    }
    for (int r = 0; r < n && !bad; r++)
        *inner_both += l[r].child[0] >= 0 && l[n + r].child[0] >= 0 && !(r == 0 || l[r].parent < 0);
    *depth = tree_depth(n);
    free(l);
    return bad;
}

static void test_tree_shapes(void) {
    for (int n = 1; n <= 1100; n++) {
        int both, depth, line = trees_hold(n, &both, &depth);
        CHECK_MSG(line == 0, "N=%d: the trees fail the check at line %d", n, line);
        /* every rank but tree 0's root forwards in at most one tree (tree 1's inner nodes are
         * tree 0's leaves) */
        CHECK_MSG(both == 0, "N=%d: %d ranks other than the root are inner nodes of both trees", n, both);
        int lg = 0;
        while ((1 << lg) < n) lg++;
        CHECK_MSG(depth >= lg && depth <= lg + 1, "N=%d: depth %d, log2 N rounded up is %d", n, depth, lg);
        if (line) break;
    }
    int both, depth;
    CHECK(trees_hold(10000, &both, &depth) == 0 && both == 0 && depth <= 15);
}

/* The shapes the header draws: N = 8 (tree 0 in order, tree 1 its mirror) and N = 7 (the shift). */
static void test_tree_known(void) {
    TreeLinks l;
    tree_links(8, 0, 0, &l);
    CHECK(l.parent == -1 && l.child[0] == 4 && l.child[1] == -1);
    tree_links(8, 4, 0, &l);
    CHECK(l.parent == 0 && l.child[0] == 2 && l.child[1] == 6);
    tree_links(8, 6, 0, &l);
    CHECK(l.parent == 4 && l.child[0] == 5 && l.child[1] == 7);
    tree_links(8, 7, 1, &l); /* the mirror of rank 0: tree 1's root, its child the mirror of 4 */
    CHECK(l.parent == -1 && l.child[0] == 3 && l.child[1] == -1);
    tree_links(6, 4, 0, &l); /* 4's second child would be 6, past the end: 5 instead */
    CHECK(l.parent == 0 && l.child[0] == 2 && l.child[1] == 5);
    tree_links(7, 1, 1, &l); /* N odd: rank 1 takes rank 0's place */
    CHECK(l.parent == -1 && l.child[0] == 5 && l.child[1] == -1);
    tree_links(1, 0, 1, &l);
    CHECK(l.parent == -1 && l.child[0] == -1 && l.child[1] == -1);
    CHECK(tree_depth(1) == 0 && tree_depth(2) == 1 && tree_depth(8) == 3);
}

/* NCCL's trees over nodes: for M nodes of G ranks, each tree spans every rank with parents and
 * children that agree, only a node's head and tail have links to other nodes, and a node's links
 * to other nodes are those of its node in the trees over M ranks (so its NIC carries what a rank of
 * the flat trees over M would). */
static void test_tree_nodes(void) {
    for (int M = 1; M <= 9; M++)
        for (int G = 1; G <= 4; G++) {
            int N = M * G, bad = 0;
            for (int t = 0; t < 2; t++) {
                int roots = 0;
                for (int r = 0; r < N; r++) {
                    TreeLinks l;
                    tree_links_nodes(M, G, r, t, &l);
                    roots += l.parent < 0;
                    if (l.parent >= 0) { /* r is one of its parent's children */
                        TreeLinks p;
                        tree_links_nodes(M, G, l.parent, t, &p);
                        bad += p.child[0] != r && p.child[1] != r;
                    }
                    int net = 0, node = r / G;
                    if (l.parent >= 0 && l.parent / G != node) net++;
                    for (int c = 0; c < 2; c++) {
                        if (l.child[c] < 0) continue;
                        TreeLinks k;
                        tree_links_nodes(M, G, l.child[c], t, &k);
                        bad += k.parent != r;
                        if (l.child[c] / G != node) net++;
                    }
                    if (net) bad += r % G != 0 && r % G != G - 1; /* only heads and tails cross */
                }
                bad += roots != 1;
                for (int k = 0; k < M; k++) { /* a node's network links are its node's in the trees over M */
                    TreeLinks nl;
                    tree_links(M, k, t, &nl);
                    int want = (nl.parent >= 0) + (nl.child[0] >= 0) + (nl.child[1] >= 0), got = 0;
                    for (int r = k * G; r < (k + 1) * G; r++) {
                        TreeLinks l;
                        tree_links_nodes(M, G, r, t, &l);
                        got += l.parent >= 0 && l.parent / G != k;
                        for (int c = 0; c < 2; c++) got += l.child[c] >= 0 && l.child[c] / G != k;
                    }
                    bad += got != want;
                }
            }
            CHECK_MSG(bad == 0, "M %d G %d: %d broken links", M, G, bad);
        }
}

int main(void) {
    RUN(test_tree_shapes);
    RUN(test_tree_known);
    RUN(test_tree_nodes);
    return test_summary("test_tree");
}
