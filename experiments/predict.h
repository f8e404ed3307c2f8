/* predict.h - the alpha-beta model of gradient synchronisation: per-step predictions and the fit */
#ifndef RS_PREDICT_H
#define RS_PREDICT_H

#include <stddef.h>

#include "arch.h"

/* ---- Model ----
 * One message of m bytes costs alpha + m * beta seconds (alpha: latency in s, beta: s/byte,
 * 1/beta the link bandwidth B). For a reduction of n bytes over N ranks, every back end's cost is
 * t = alpha * A + beta * Bc, with (A, Bc) given by predict_coeffs:
 *   none, or N = 1 (ring/nccl/colocated ps): A = 0, Bc = 0
 *   ring, nccl:   A = 2(N-1),  Bc = 2(N-1)/N * n       (reduce-scatter + all-gather, N-1 steps each)
 *   tree:         A = 2 D,     Bc = m * n/2            (an up phase and a down phase, D rounds each
 *                                                       (D the trees' depth, log2 N rounded up or
 *                                                       one more), run at once (a chunk goes down as
 *                                                       soon as its root has it): the busiest rank's
 *                                                       link one way, m = the most children plus
 *                                                       parents a rank has over both trees, so n at
 *                                                       N = 2, 1.5 n at N = 3, 2n from N = 4 on)
 *   ps colocated: A = 2(N-1),  Bc = 2(N-1) * n         (rank 0's link carries every other rank's
 *                                                       push and pull, one after the other)
 *   ps dedicated, K servers (BytePS): A = 2,  Bc = 2 * max(n, N*n/K)
 *                                     (a push and a pull; each worker link moves n each way,
 *                                      each server link N*n/K; the busier link bounds the time;
 *                                      the K shard messages go out in parallel: one latency)
 *   ps sharded (a shard in every worker, BytePS's colocated PS): A = 2,  Bc = 2(N-1)/N * n
 *                                     (each worker pushes N-1 shards of n/N and its shard
 *                                      answers N-1 pushes: the ring's bytes on every link,
 *                                      but in one round of N-1 parallel messages each way)
 *   byteps, k CPU servers (0 <= k <= N; OSDI'20 4.1): A = 2,  Bc = 2 * max(1 - y, (N-1) y, N x) * n
 *                                     with W = N^2 + kN - 2k, y = (N-k)/W per worker shard and
 *                                     x = 2(N-1)/W per CPU server (a push round, a pull round,
 *                                     the busiest link each; k = 0 is sharded's, k = N dedicated's)
 * These count a bucket's pull after its push. BytePS's Table 1 lines (claim 8) are the limit where
 * one bucket's pull overlaps the next one's push on every link: ring and sharded 2(N-1)/N n,
 * dedicated max(n, N n/K), byteps 2N(N-1)/W n.
 * ps-mode dataparallel: the colocated formula for the gradients (the push, and the replicate
 * in place of the pull), plus, once per step, rank 0's data messages (predict_dp_data):
 *   A = 3(N-1),  Bc = (B - ceil(B/N)) * (4D + 4 + 8C)   (the batch out, D inputs and a label per
 *                                                       row; the logits in and their gradient
 *                                                       out, C classes; rank 0 keeps its own
 *                                                       ceil(B/N) rows) */

/* The per-message cost a prediction from an emulated link (--link) adds to that link's own
 * latency: the software's (ZeroMQ, the lanes, a step's bookkeeping), as the reference 2-core
 * machine's fits of ipc (54 us) and shm (34 us) put it, rounded (docs/matrix.md). */
#define PREDICT_EMULATED_ALPHA_S 50e-6

/* ---- Nodes ----
 * Under --nodes (M machines of G ranks, one NIC each) the coefficients price the busiest NIC
 * (experiments/arch.c): the flat ring's NIC carries a rank's 2(N-1)/N n; the flat trees' what
 * their edges across nodes carry; a server's NIC G workers' pushes. The machine-aware forms are
 * their flat counterparts over the M machines (ring-hierarchical 2(M-1) rounds and 2(M-1)/M n,
 * tree-hierarchical the trees over M, byteps-hierarchical byteps with n = M), plus their rounds
 * inside the node (arch_node_cost: 2(G-1) for the ring's and the trees', G + 1 for byteps's),
 * each at PREDICT_NODE_ALPHA_S: the fabric is taken as unpaced, so a round there costs the
 * software's per-message time and its bytes nothing. */
#define PREDICT_NODE_ALPHA_S PREDICT_EMULATED_ALPHA_S

/* ---- Prototypes ---- */

/* Fills *a and *b with the coefficients of alpha and beta for one reduction of n_bytes over
 * nranks ranks by architecture arch (experiments/backends.h's Arch, a report's
 * backend.architecture: ring and nccl's ring are ARCH_RING, nccl's trees ARCH_TREE), servers
 * the dedicated ps's K or byteps's k. pipelined: the server answers partitions as they come in
 * (--ps-partition-kb in force, as config_partition_keys says), so its push and pull rounds
 * overlap (experiments/backends.c); the others ignore it. Returns 0, or -1 for an architecture
 * or server count the model does not cover (*a = *b = 0). The functions below take pipelined
 * alike. */
int predict_coeffs(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double *a, double *b);

/* Seconds one reduction of n_bytes takes under the model: alpha * A + beta * Bc (see above).
 * Returns a negative number for an architecture the model does not cover. */
double predict_comm(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double alpha, double beta);

/* Seconds of communication per training step: the gradient (n_bytes) is reduced in DDP's
 * buckets (engine/sync.h: the first, the last layer's, at most min(1 MiB, bucket_bytes), the
 * others bucket_bytes, the last one smaller), each bucket one reduction; the sum over buckets.
 * With a bucket_bytes <= 0 the gradient is one bucket. Negative for an architecture the model
 * does not cover. The coefficients are the architectures' cost models (experiments/backends.c). */
double predict_step_comm(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double bucket_bytes,
                         double alpha, double beta);

/* Seconds per step a fabric inside the nodes (alpha s a message, beta s a byte: --intra-link)
 * adds to predict_step_comm, which takes the fabric as unpaced (its rounds at PREDICT_NODE_ALPHA_S,
 * the software's, its bytes free): the machine-aware forms' node phases (arch_node_cost) over the
 * same buckets. 0 for the flat forms and without nodes. */
double predict_step_fabric(Arch arch, int nranks, int nodes, double n_bytes, double bucket_bytes, double alpha,
                           double beta);

/* Seconds per step of DataParallel's data messages through rank 0 (see above) for a global batch
 * of global_batch rows of in_dim inputs and classes outputs on nranks ranks; 0 with one rank,
 * negative when an argument is not positive. */
double predict_dp_data(int nranks, int global_batch, int in_dim, int classes, double alpha, double beta);

/* The shape of one sample in DataParallel's data messages, for predict_dp_data: *in_dim the values
 * sent per row beyond its one label (inputs, and the other labels of a sequence), *classes the
 * outputs gathered per row. model "mlp" (layer_in inputs, layer_out classes), "lenet" (28 x 28, 10)
 * or "gpt" (seq_len tokens and labels, seq_len x V logits, V = 256 on text data, else vocab). */
void predict_dp_shape(const char *model, int layer_in, int layer_out, int seq_len, int vocab, int text_data,
                      int *in_dim, int *classes);

/* Least-squares fit of t_i = alpha * a_i + beta * b_i over k points, with alpha, beta >= 0
 * (when the free fit gives a negative one, the best one-term fit is taken). rms_err gets the
 * root-mean-square residual in seconds (may be NULL). Returns 0, or -1 when the points cannot
 * determine the fit (k < 1, all coefficients zero). */
int predict_fit_linear(const double *a, const double *b, const double *t, int k, double *alpha,
                       double *beta, double *rms_err);

/* Fits alpha and beta to a collective sweep: sizes[i] bytes reduced in times[i] seconds by
 * architecture arch on nranks ranks (ring: t = 2(N-1) alpha + 2(N-1)/N * S * beta; other back ends by
 * predict_coeffs). Least squares on relative residuals (t_i - model_i) / t_i, so that the small
 * sizes, which set alpha, weigh as much as the large ones, which set beta; alpha, beta >= 0.
 * Needs k >= 2 points of different sizes and times > 0. Returns 0, or -1 when the sweep cannot
 * determine the fit (fewer than 2 sizes, N = 1 ring, an architecture without a model, a time <= 0); *alpha,
 * *beta and *rms_err (the RMS relative residual, 0.05 = 5%; may be NULL) are set on success only. */
int predict_fit(Arch arch, int servers, int nranks, int pipelined, const double *sizes, const double *times, int k,
                double *alpha, double *beta, double *rms_err);

#endif
