/* predict.c - the alpha-beta model: per-back-end coefficients, per-step predictions, least squares */
#include "predict.h"
#include "arch.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int predict_coeffs(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double *a, double *b) {
    return arch_cost(arch, servers, nranks, nodes, pipelined, n_bytes, a, b);
}

double predict_comm(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double alpha, double beta) {
    double a, b;
    if (predict_coeffs(arch, servers, nranks, nodes, pipelined, n_bytes, &a, &b) != 0) return -1;
    double na, nb;
    arch_node_cost(arch, nranks, nodes, n_bytes, &na, &nb);
    return alpha * a + beta * b + PREDICT_NODE_ALPHA_S * na;
}

/* n_bytes cut into DDP's buckets (engine/sync.h): *first, then *full buckets of bucket_bytes, then
 * *rest bytes (0: none); one bucket of n_bytes where bucket_bytes <= 0 or holds it all. */
static void predict_cut(double n_bytes, double bucket_bytes, double *first, double *full, double *rest) {
    *first = n_bytes, *full = *rest = 0;
    if (bucket_bytes <= 0 || bucket_bytes >= n_bytes) return;
    *first = bucket_bytes < 1048576.0 ? bucket_bytes : 1048576.0; /* the first at most 1 MiB */
    double left = n_bytes - *first;
    *full = floor(left / bucket_bytes), *rest = left - *full * bucket_bytes;
}

double predict_step_comm(Arch arch, int servers, int nranks, int nodes, int pipelined, double n_bytes, double bucket_bytes,
                         double alpha, double beta) {
    double first, full, rest;
    predict_cut(n_bytes, bucket_bytes, &first, &full, &rest);
    double t = predict_comm(arch, servers, nranks, nodes, pipelined, first, alpha, beta);
    if (t < 0) return -1;
    if (full > 0) t += full * predict_comm(arch, servers, nranks, nodes, pipelined, bucket_bytes, alpha, beta);
    if (rest > 0) t += predict_comm(arch, servers, nranks, nodes, pipelined, rest, alpha, beta);
    return t;
}

double predict_step_fabric(Arch arch, int nranks, int nodes, double n_bytes, double bucket_bytes, double alpha,
                           double beta) {
    double first, full, rest, a, b, t = 0;
    predict_cut(n_bytes, bucket_bytes, &first, &full, &rest);
    arch_node_cost(arch, nranks, nodes, first, &a, &b);
    t += alpha * a + beta * b;
    if (full > 0) arch_node_cost(arch, nranks, nodes, bucket_bytes, &a, &b), t += full * (alpha * a + beta * b);
    if (rest > 0) arch_node_cost(arch, nranks, nodes, rest, &a, &b), t += alpha * a + beta * b;
    return t;
}

double predict_dp_data(int nranks, int global_batch, int in_dim, int classes, double alpha, double beta) {
    if (nranks < 1 || global_batch < 1 || in_dim < 1 || classes < 1) return -1;
    if (nranks == 1) return 0;
    double chunk = ceil((double)global_batch / nranks);
    double rows = global_batch - (chunk < global_batch ? chunk : global_batch); /* rows rank 0 sends away */
    return 3.0 * (nranks - 1) * alpha + rows * (4.0 * in_dim + 4.0 + 8.0 * classes) * beta;
}

void predict_dp_shape(const char *model, int layer_in, int layer_out, int seq_len, int vocab, int text_data,
                      int *in_dim, int *classes) {
    long long D = layer_in, labels = 1, C = layer_out; /* wide: T x V passes 2^31 for large vocabularies */
    if (!strcmp(model, "lenet")) D = 28 * 28, C = 10;
    if (!strcmp(model, "gpt")) {
        long long V = text_data ? 256 : vocab;
        D = seq_len, labels = seq_len, C = (long long)seq_len * V;
    }
    long long in = D + labels - 1; /* predict_dp_data counts one label: the others ride as inputs */
    *in_dim = in < 1 ? 1 : in > INT_MAX ? INT_MAX : (int)in;
    *classes = C < 1 ? 1 : C > INT_MAX ? INT_MAX : (int)C;
}

/* Sum of squared residuals of t = alpha*a + beta*b. */
static double predict_sse(const double *a, const double *b, const double *t, int k, double alpha,
                          double beta) {
    double s = 0;
    for (int i = 0; i < k; i++) {
        double r = t[i] - alpha * a[i] - beta * b[i];
        s += r * r;
    }
    return s;
}

int predict_fit_linear(const double *a, const double *b, const double *t, int k, double *alpha,
                       double *beta, double *rms_err) {
    if (k < 1) return -1;
    double saa = 0, sbb = 0, sab = 0, sat = 0, sbt = 0;
    for (int i = 0; i < k; i++) {
        saa += a[i] * a[i];
        sbb += b[i] * b[i];
        sab += a[i] * b[i];
        sat += a[i] * t[i];
        sbt += b[i] * t[i];
    }
    if (saa <= 0 && sbb <= 0) return -1;
    double al = -1, be = -1;
    double det = saa * sbb - sab * sab;
    /* the normal equations, when the two columns are independent (relative to their scale) */
    if (saa > 0 && sbb > 0 && det > 1e-12 * saa * sbb) {
        al = (sat * sbb - sbt * sab) / det;
        be = (sbt * saa - sat * sab) / det;
    }
    if (al < 0 || be < 0) {
        /* one-term fits, alpha only or beta only, each clamped at 0; keep the better */
        double a1 = saa > 0 ? sat / saa : 0, b2 = sbb > 0 ? sbt / sbb : 0;
        if (a1 < 0) a1 = 0;
        if (b2 < 0) b2 = 0;
        double e1 = saa > 0 ? predict_sse(a, b, t, k, a1, 0) : INFINITY;
        double e2 = sbb > 0 ? predict_sse(a, b, t, k, 0, b2) : INFINITY;
        if (e1 <= e2) { al = a1; be = 0; }
        else { al = 0; be = b2; }
    }
    *alpha = al;
    *beta = be;
    if (rms_err) *rms_err = sqrt(predict_sse(a, b, t, k, al, be) / k);
    return 0;
}

int predict_fit(Arch arch, int servers, int nranks, int pipelined, const double *sizes, const double *times, int k,
                double *alpha, double *beta, double *rms_err) {
    if (k < 2) return -1;
    double *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * sizeof *b);
    int rc = -1;
    if (!a || !b) goto out;
    double *one = malloc((size_t)k * sizeof *one);
    int distinct = 0;
    if (!one) goto out;
    /* relative residuals: row i divided by t_i, so that every size counts alike */
    for (int i = 0; i < k; i++) {
        if (!(times[i] > 0) || predict_coeffs(arch, servers, nranks, 0, pipelined, sizes[i], &a[i], &b[i]) != 0) {
            free(one);
            goto out;
        }
        a[i] /= times[i];
        b[i] /= times[i];
        one[i] = 1;
        if (sizes[i] != sizes[0]) distinct = 1;
    }
    double al, be, rms;
    int bad = !distinct || predict_fit_linear(a, b, one, k, &al, &be, &rms) != 0;
    free(one);
    if (bad) goto out;
    *alpha = al;
    *beta = be;
    if (rms_err) *rms_err = rms;
    rc = 0;
out:
    free(a);
    free(b);
    return rc;
}
