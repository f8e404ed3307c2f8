/* test_predict.c - the alpha-beta formulas per back end and the least-squares fit's exact recovery */
#include "../experiments/predict.h"
#include "test.h"

static int near(double x, double y) { return fabs(x - y) <= 1e-9 * (fabs(y) > 1e-30 ? fabs(y) : 1e-30); }

static void test_ring_formula(void) {
    double al = 5e-6, be = 1e-9, n = 4e6;
    for (int N = 2; N <= 16; N *= 2) {
        double want = 2 * (N - 1) * al + 2.0 * (N - 1) / N * n * be;
        CHECK_MSG(near(predict_comm(ARCH_RING, 1, N, 0, 0, n, al, be), want), "N=%d", N);
        CHECK(near(predict_comm(ARCH_RING, 1, N, 0, 0, n, al, be), want));
    }
    CHECK(predict_comm(ARCH_RING, 1, 1, 0, 0, n, al, be) == 0);
}

/* The double binary trees, by hand from allreduce/tree.h's shapes, both phases at once (the
 * busiest rank's parents and children, n/2 each, one way): N = 2 (each rank the root of one tree,
 * the leaf of the other: depth 1, a child and a parent: n), N = 3 (0-2-1 and 1-0-2: depth 2; rank
 * 2 has a parent in both trees and a child in one: 1.5 n), N = 8 (depth 3; rank 4 has two
 * children in tree 0 and a parent in both: 2n). */
static void test_tree_formula(void) {
    double al = 5e-6, be = 1e-9, n = 4e6;
    CHECK(near(predict_comm(ARCH_TREE, 0, 2, 0, 0, n, al, be), 2 * al + n * be));
    CHECK(near(predict_comm(ARCH_TREE, 0, 3, 0, 0, n, al, be), 4 * al + 1.5 * n * be));
    CHECK(near(predict_comm(ARCH_TREE, 0, 8, 0, 0, n, al, be), 6 * al + 2 * n * be));
    CHECK(predict_comm(ARCH_TREE, 0, 1, 0, 0, n, al, be) == 0);
    /* at 1024 ranks the tree's 20 latency steps against the ring's 2046 */
    double a, b;
    CHECK(predict_coeffs(ARCH_TREE, 0, 1024, 0, 0, n, &a, &b) == 0 && a == 20 && near(b, 2 * n));
}

static void test_ps_formulas(void) {
    double al = 5e-6, be = 1e-9, n = 4e6;
    /* colocated: rank 0's link carries 2(N-1) n bytes */
    CHECK(near(predict_comm(ARCH_PS_COLOCATED, 1, 4, 0, 0, n, al, be), 6 * al + 6 * n * be));
    CHECK(predict_comm(ARCH_PS_COLOCATED, 1, 1, 0, 0, n, al, be) == 0);
    /* dedicated: 2 alpha + 2 max(n, N n / K) beta */
    CHECK(near(predict_comm(ARCH_PS_DEDICATED, 1, 4, 0, 0, n, al, be), 2 * al + 2 * 4 * n * be));
    CHECK(near(predict_comm(ARCH_PS_DEDICATED, 2, 4, 0, 0, n, al, be), 2 * al + 2 * 2 * n * be));
    CHECK(near(predict_comm(ARCH_PS_DEDICATED, 8, 4, 0, 0, n, al, be), 2 * al + 2 * n * be));
    /* sharded: the ring's bytes per link, one push round and one pull round */
    CHECK(near(predict_comm(ARCH_PS_SHARDED, 1, 4, 0, 0, n, al, be), 2 * al + 2 * 3.0 / 4 * n * be));
    CHECK(predict_comm(ARCH_PS_SHARDED, 1, 1, 0, 0, n, al, be) == 0);
    CHECK(predict_comm(ARCH_NONE, 1, 8, 0, 0, n, al, be) == 0);
    /* ZeRO: stages 1 and 2 the ring's two phases; stage 3 three of them, 1.5x the ring's bytes */
    CHECK(near(predict_comm(ARCH_ZERO2, 0, 4, 0, 0, n, al, be), predict_comm(ARCH_RING, 0, 4, 0, 0, n, al, be)));
    CHECK(near(predict_comm(ARCH_ZERO3, 0, 4, 0, 0, n, al, be), 9 * al + 3 * 3.0 / 4 * n * be));
    CHECK(near(arch_wire_ratio(ARCH_ZERO3, "bf16"), (0.5 + 2) / 3) && near(arch_wire_ratio(ARCH_ZERO1, "bf16"), 0.75));
    CHECK(predict_comm(ARCH_COUNT, 1, 8, 0, 0, n, al, be) < 0);
    CHECK(predict_comm((Arch)-1, 1, 8, 0, 0, n, al, be) < 0);
    CHECK(predict_comm(ARCH_BYTEPS, 9, 8, 0, 0, n, al, be) < 0); /* more servers than workers */
}

/* Under --nodes the models price the busiest node's NIC: the flat ring as a rank's own, a server's
 * worker NIC its G ranks' pushes, the machine-aware forms their flat counterparts over the M
 * machines plus their rounds inside the node at the software's per-message cost. */
static void test_nodes_formulas(void) {
    double al = 5e-6, be = 1e-9, n = 4e6, a, b, nal = PREDICT_NODE_ALPHA_S;
    /* every rank a node, or no nodes: the flat figures */
    for (Arch x = ARCH_RING; x < ARCH_COUNT; x++)
        CHECK_MSG(near(predict_comm(x, 2, 4, 4, 0, n, al, be), predict_comm(x, 2, 4, 0, 0, n, al, be)), "arch %s", arch_name(x));
    CHECK(near(predict_comm(ARCH_RING, 0, 8, 2, 0, n, al, be), predict_comm(ARCH_RING, 0, 8, 0, 0, n, al, be)));
    /* Horovod's: 2(M-1) rounds and 2(M-1)/M n on the NIC, 2(G-1) rounds inside */
    CHECK(near(predict_comm(ARCH_RING_HIER, 0, 8, 2, 0, n, al, be), 2 * al + n * be + 6 * nal));
    CHECK(near(predict_comm(ARCH_RING_HIER, 0, 12, 3, 0, n, al, be), 4 * al + 4.0 / 3 * n * be + 6 * nal));
    CHECK(arch_node_cost(ARCH_RING_HIER, 8, 2, n, &a, &b) == 0 && a == 6 && near(b, 1.5 * n));
    CHECK(arch_node_cost(ARCH_RING, 8, 2, n, &a, &b) == 0 && a == 0 && b == 0);
    CHECK(arch_node_cost(ARCH_BYTEPS_HIER, 8, 2, n, &a, &b) == 0 && a == 5 && near(b, 0.75 * n + 3 * n));
    /* a fabric of 1 us and 0.1 ns/B: the ring's node phases over one bucket, then over DDP's buckets */
    CHECK(near(predict_step_fabric(ARCH_RING_HIER, 8, 2, n, 0, 1e-6, 1e-10), 6e-6 + 1.5 * n * 1e-10));
    CHECK(near(predict_step_fabric(ARCH_RING_HIER, 8, 2, n, 1048576.0, 1e-6, 1e-10), 4 * 6e-6 + 1.5 * n * 1e-10));
    CHECK(predict_step_fabric(ARCH_RING, 8, 2, n, 0, 1e-6, 1e-10) == 0);
    /* NCCL's trees over 2 nodes: n each way on the NIC, the chain of G inside */
    CHECK(near(predict_comm(ARCH_TREE_HIER, 0, 8, 2, 0, n, al, be), 2 * al + n * be + 6 * nal));
    /* BytePS at the machines: byteps with n = M, then G + 1 rounds inside */
    for (int k = 0; k <= 4; k++)
        CHECK_MSG(near(predict_comm(ARCH_BYTEPS_HIER, k, 8, 4, 0, n, al, be), predict_comm(ARCH_BYTEPS, k, 4, 0, 0, n, al, be) + 3 * nal),
                  "k=%d", k);
    CHECK(predict_comm(ARCH_BYTEPS_HIER, 5, 8, 4, 0, n, al, be) < 0); /* more CPU servers than machines */
    /* flat servers on nodes: a worker node's NIC carries its G ranks' pushes */
    CHECK(predict_coeffs(ARCH_PS_DEDICATED, 8, 8, 2, 0, n, &a, &b) == 0 && near(b, 2 * 4 * n));
    CHECK(predict_coeffs(ARCH_PS_SHARDED, 0, 4, 2, 0, n, &a, &b) == 0 && near(b, 2 * n));
    CHECK(predict_coeffs(ARCH_PS_COLOCATED, 1, 6, 3, 0, n, &a, &b) == 0 && near(b, 2 * 4 * n));
    /* byteps flat on 2 nodes of 2, k = 0: the sharded figures (every rank a shard) */
    CHECK(predict_coeffs(ARCH_BYTEPS, 0, 4, 2, 0, n, &a, &b) == 0 && near(b, 2 * n));
}

static void test_step_buckets(void) {
    double al = 1e-5, be = 2e-9, MiB = 1048576.0;
    double n = 2.5 * MiB;
    /* buckets of 1 MiB: two full, one of half a MiB */
    double want = 2 * predict_comm(ARCH_RING, 1, 4, 0, 0, MiB, al, be) +
                  predict_comm(ARCH_RING, 1, 4, 0, 0, 0.5 * MiB, al, be);
    CHECK(near(predict_step_comm(ARCH_RING, 1, 4, 0, 0, n, MiB, al, be), want));
    /* one bucket when the bucket is larger than the gradient, or unset */
    CHECK(near(predict_step_comm(ARCH_RING, 1, 4, 0, 0, n, 25 * MiB, al, be), predict_comm(ARCH_RING, 1, 4, 0, 0, n, al, be)));
    CHECK(near(predict_step_comm(ARCH_RING, 1, 4, 0, 0, n, 0, al, be), predict_comm(ARCH_RING, 1, 4, 0, 0, n, al, be)));
}

static void test_fit_exact(void) {
    double sizes[8], times[8], al = 7.5e-6, be = 3.2e-10;
    for (int N = 2; N <= 8; N += 3) {
        for (int i = 0; i < 8; i++) {
            sizes[i] = 1024.0 * (1 << (2 * i));
            times[i] = 2 * (N - 1) * al + 2.0 * (N - 1) / N * sizes[i] * be;
        }
        double fa = 0, fb = 0, rms = 1;
        CHECK(predict_fit(ARCH_RING, 1, N, 0, sizes, times, 8, &fa, &fb, &rms) == 0);
        CHECK_MSG(fabs(fa - al) <= 1e-9 * al, "alpha %.12g want %.12g", fa, al);
        CHECK_MSG(fabs(fb - be) <= 1e-9 * be, "beta %.12g want %.12g", fb, be);
        CHECK(rms < 1e-12);
    }
    /* ps dedicated recovers the same way */
    for (int i = 0; i < 8; i++) {
        sizes[i] = 4096.0 * (i + 1);
        times[i] = predict_comm(ARCH_PS_DEDICATED, 2, 4, 0, 0, sizes[i], al, be);
    }
    double fa, fb;
    CHECK(predict_fit(ARCH_PS_DEDICATED, 2, 4, 0, sizes, times, 8, &fa, &fb, NULL) == 0);
    CHECK(fabs(fa - al) <= 1e-9 * al && fabs(fb - be) <= 1e-9 * be);
}

static void test_fit_noisy_and_degenerate(void) {
    double sizes[6] = {1e3, 1e4, 1e5, 1e6, 1e7, 1e8}, times[6], al = 2e-5, be = 1e-9;
    for (int i = 0; i < 6; i++) times[i] = predict_comm(ARCH_RING, 1, 4, 0, 0, sizes[i], al, be) * (i % 2 ? 1.01 : 0.99);
    double fa = -1, fb = -1, rms = -1;
    CHECK(predict_fit(ARCH_RING, 1, 4, 0, sizes, times, 6, &fa, &fb, &rms) == 0);
    CHECK(fa >= 0 && fb > 0 && rms > 0);
    CHECK(fabs(fb - be) < 0.05 * be);
    /* bandwidth-only data: alpha clamps at 0 instead of going negative */
    for (int i = 0; i < 6; i++) times[i] = 1.5 * sizes[i] * be * (i == 0 ? 0.5 : 1);
    CHECK(predict_fit(ARCH_RING, 1, 4, 0, sizes, times, 6, &fa, &fb, NULL) == 0);
    CHECK(fa >= 0 && fb > 0);
    /* what cannot be fitted */
    CHECK(predict_fit(ARCH_RING, 1, 1, 0, sizes, times, 6, &fa, &fb, NULL) != 0);  /* N = 1: no comm */
    CHECK(predict_fit(ARCH_RING, 1, 4, 0, sizes, times, 1, &fa, &fb, NULL) != 0);  /* one point */
    double same[3] = {1e6, 1e6, 1e6};
    CHECK(predict_fit(ARCH_RING, 1, 4, 0, same, times, 3, &fa, &fb, NULL) != 0);   /* one size */
    CHECK(predict_fit(ARCH_COUNT, 1, 4, 0, sizes, times, 6, &fa, &fb, NULL) != 0);
}

static void test_dp_data(void) {
    double al = 1e-5, be = 1e-9;
    /* B = 64 on 4 ranks: chunks of 16, rank 0 sends 48 rows of 784 inputs + a label, and gets and
     * answers 48 rows of 10 logits */
    CHECK(near(predict_dp_data(4, 64, 784, 10, al, be), 9 * al + 48.0 * (4 * 784 + 4 + 80) * be));
    /* a global batch smaller than N: chunks of one row, rank 0 keeps one, sends B - 1 */
    CHECK(near(predict_dp_data(8, 4, 784, 10, al, be), 21 * al + 3.0 * (4 * 784 + 4 + 80) * be));
    /* B = 10 on 4 ranks: chunks of 3 */
    CHECK(near(predict_dp_data(4, 10, 16, 2, al, be), 9 * al + 7.0 * (64 + 4 + 16) * be));
    CHECK(predict_dp_data(1, 64, 784, 10, al, be) == 0);
    CHECK(predict_dp_data(4, 0, 784, 10, al, be) < 0);
    CHECK(predict_dp_data(0, 64, 784, 10, al, be) < 0);
}

int main(void) {
    RUN(test_ring_formula);
    RUN(test_tree_formula);
    RUN(test_ps_formulas);
    RUN(test_nodes_formulas);
    RUN(test_step_buckets);
    RUN(test_fit_exact);
    RUN(test_fit_noisy_and_degenerate);
    RUN(test_dp_data);
    return test_summary("test_predict");
}
