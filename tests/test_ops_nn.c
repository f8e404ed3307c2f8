/* test_ops_nn.c - the nn ops: C against double-precision references and finite differences, CUDA against C */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kernels/device.h"
#include "../base/err.h"
#include "../base/mem.h"
#include "../base/rng.h"
#include "../kernels/ops.h"
#include "../kernels/ops_math.h"
#include "test.h"

/* ---- Helpers ---- */

/* Tolerance of an fp32 op against the exact (double) value, and of CUDA against its C twin. */
#define TOL_FD 1e-4
#define TOL_CUDA 1e-5

static Rng rng = {0x2545F4914F6CDD1Dull}; /* fixed: every run sees the same inputs */

static float *rnd_vec(size_t n, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(&rng);
    return x;
}

static int *rnd_tokens(size_t n, int V) {
    int *t = malloc((n ? n : 1) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (int)rng_below(&rng, (uint64_t)V);
    return t;
}

static float *dup_vec(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static double *to_double(const float *x, size_t n) {
    double *y = malloc((n ? n : 1) * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static double rms_d(const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return n ? sqrt(s / (double)n) : 0.0;
}

static double rms_f(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return n ? sqrt(s / (double)n) : 0.0;
}

/* Max of |got - want| / max(|want|, floor); a NaN anywhere on one side only is infinite. */
static double err_fd(const float *got, const double *want, size_t n, double floor) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i])) return INFINITY;
        if (isnan(got[i])) continue;
        double s = fabs(want[i]), r = fabs((double)got[i] - want[i]) / (s > floor ? s : floor);
        m = r > m ? r : m;
    }
    return m;
}

/* sum_i G[i] * Y[i] in double. */
static double dot_dd(const double *G, const double *Y, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += G[i] * Y[i];
    return s;
}

/* A scalar loss of the double arrays a test's reference reads. */
typedef double (*LossFn)(void *arg);

/* Central differences of f wrt every element of x (which f reads), in double. */
static void fd_grad(LossFn f, void *arg, double *x, size_t n, double h, double *out) {
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = f(arg);
        x[i] = keep - h;
        double lm = f(arg);
        x[i] = keep;
        out[i] = (lp - lm) / (2 * h);
    }
}

/* Checks an fp32 gradient against the finite differences of f wrt x, prints the error. */
static void check_grad(const char *what, const float *got, LossFn f, void *arg, double *x,
                       size_t n, double h) {
    double *fd = malloc(n * sizeof *fd);
    fd_grad(f, arg, x, n, h, fd);
    double e = err_fd(got, fd, n, rms_d(fd, n));
    printf("  %s vs finite differences: max rel err %.2e\n", what, e);
    CHECK_MSG(e <= TOL_FD, "%s: max rel err %.3g > %.0e", what, e, TOL_FD);
    free(fd);
}

/* Checks an fp32 result against a double reference. */
static void check_ref(const char *what, const float *got, const double *want, size_t n) {
    double e = err_fd(got, want, n, rms_d(want, n));
    CHECK_MSG(e <= TOL_FD, "%s vs double reference: max rel err %.3g > %.0e", what, e, TOL_FD);
}

static KernelCtx *cpu_ctx; /* the C ops' context */
#define CPU (kernels_cpu())

/* ---- Double-precision references ---- */

/* The GEMM of one batch entry, naive, in double (beta * C0 + alpha * op(A) op(B)). */
static void ref_gemm(int ta, int tb, int M, int N, int K, double alpha, const float *A, int lda,
                     const float *B, int ldb, double beta, const float *C0, int ldc, double *out) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                     (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            out[(size_t)i * ldc + j] = alpha * s + (beta != 0 ? beta * C0[(size_t)i * ldc + j] : 0);
        }
}

typedef struct {
    int B, C, H, W, k, stride, pad, OC, OH, OW;
} ConvShape;

static ConvShape conv_shape(int B, int C, int H, int W, int k, int stride, int pad, int OC) {
    ConvShape s = {B, C, H, W, k, stride, pad, OC, (H + 2 * pad - k) / stride + 1,
                   (W + 2 * pad - k) / stride + 1};
    return s;
}

/* The direct convolution (cross-correlation, as every framework's conv): y [B, OC, OH, OW]. */
static void ref_conv(const ConvShape *s, const double *x, const double *w, const double *bias,
                     double *y) {
    for (int b = 0; b < s->B; b++)
        for (int o = 0; o < s->OC; o++)
            for (int oh = 0; oh < s->OH; oh++)
                for (int ow = 0; ow < s->OW; ow++) {
                    double acc = bias[o];
                    for (int c = 0; c < s->C; c++)
                        for (int i = 0; i < s->k; i++)
                            for (int j = 0; j < s->k; j++) {
                                int ih = oh * s->stride - s->pad + i, iw = ow * s->stride - s->pad + j;
                                if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) continue;
                                acc += w[((size_t)o * s->C + c) * s->k * s->k + i * s->k + j] *
                                       x[(((size_t)b * s->C + c) * s->H + ih) * s->W + iw];
                            }
                    y[(((size_t)b * s->OC + o) * s->OH + oh) * s->OW + ow] = acc;
                }
}

static void ref_layernorm(const double *x, const double *g, const double *b, double *out,
                          double *mean, double *rstd, int N, int C) {
    for (int r = 0; r < N; r++) {
        const double *xr = x + (size_t)r * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        double rs = 1.0 / sqrt(v / C + (double)RS_LAYERNORM_EPS);
        for (int c = 0; c < C; c++) out[(size_t)r * C + c] = (xr[c] - m) * rs * g[c] + b[c];
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = rs;
    }
}

static double ref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void ref_softmax_causal(const double *S, double *P, int BH, int T, double scale) {
    for (size_t r = 0; r < (size_t)BH * T; r++) {
        int len = (int)(r % T) + 1;
        const double *s = S + r * T;
        double m = -INFINITY, z = 0;
        for (int c = 0; c < len; c++) m = scale * s[c] > m ? scale * s[c] : m;
        for (int c = 0; c < len; c++) z += exp(scale * s[c] - m);
        for (int c = 0; c < T; c++) P[r * T + c] = c < len ? exp(scale * s[c] - m) / z : 0.0;
    }
}

/* Causal multi-head self-attention from the fused projection qkv [B, T, 3C] to y [B, T, C],
 * straight from its definition. */
static void ref_attention(const double *qkv, double *y, int B, int T, int H, int D) {
    int C = H * D;
    double *w = malloc(T * sizeof *w);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * 3 * C + h * D;
                double m = -INFINITY, z = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * D;
                    double s = 0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    w[j] = s / sqrt((double)D);
                    m = w[j] > m ? w[j] : m;
                }
                for (int j = 0; j <= i; j++) z += (w[j] = exp(w[j] - m));
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int j = 0; j <= i; j++)
                        s += w[j] / z * qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * D + d];
                    y[((size_t)b * T + i) * C + h * D + d] = s;
                }
            }
    free(w);
}

/* ---- (a) the C ops against double references and finite differences ---- */

static void test_cpu_gemm_strided_batched(void) {
    /* M, N, K, batch, whether A is shared by every batch entry (stride 0) */
    static const int shapes[][5] = {
        {1, 1, 1, 1, 0}, {5, 7, 3, 4, 0}, {9, 4, 6, 3, 1}, {16, 16, 8, 6, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], nb = shapes[s][3];
            int ta = t & 1, tb = t >> 1;
            int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
            long long sa = shapes[s][4] ? 0 : (long long)(ta ? K : M) * lda + 5;
            long long sb = (long long)(tb ? N : K) * ldb + 1, sc = (long long)M * ldc + 2;
            size_t na = (size_t)(shapes[s][4] ? 1 : nb) * (size_t)((ta ? K : M) * lda + 5);
            size_t nbb = (size_t)nb * sb, nc = (size_t)nb * sc;
            float *A = rnd_vec(na, -1, 1), *Bm = rnd_vec(nbb, -1, 1), *Cm = rnd_vec(nc, -1, 1);
            double *ref = malloc(nc * sizeof *ref);
            for (size_t i = 0; i < nc; i++) ref[i] = Cm[i]; /* the gaps stay as they are */
            for (int b = 0; b < nb; b++)
                ref_gemm(ta, tb, M, N, K, 0.5, A + b * sa, lda, Bm + b * sb, ldb, 0.25,
                         Cm + b * sc, ldc, ref + b * sc);
            CHECK(CPU->gemm_strided_batched(cpu_ctx, ta, tb, M, N, K, 0.5f, A, lda, sa, Bm, ldb,
                                            sb, 0.25f, Cm, ldc, sc, nb) == 0);
            double e = err_fd(Cm, ref, nc, 1.0);
            CHECK_MSG(e <= 1e-5, "M=%d N=%d K=%d batch=%d ta=%d tb=%d: max rel err %.3g", M, N,
                      K, nb, ta, tb, e);
            free(A), free(Bm), free(Cm), free(ref);
        }
    float X[8] = {0};
    CHECK(CPU->gemm_strided_batched(cpu_ctx, 0, 0, 2, 2, 2, 1, X, 2, 4, X, 2, 4, 0, X, 2, 4, -1) ==
          RS_ERR_RUNTIME);
    CHECK(CPU->gemm_strided_batched(cpu_ctx, 0, 0, 2, 2, 2, 1, X, 1, 4, X, 2, 4, 0, X, 2, 4, 1) ==
          RS_ERR_RUNTIME);
    CHECK(strstr(rs_errmsg(), "gemm") != NULL);
    /* the C_b overlapping */
    CHECK(CPU->gemm_strided_batched(cpu_ctx, 0, 0, 2, 2, 2, 1, X, 2, 4, X, 2, 4, 0, X, 2, 3, 2) ==
          RS_ERR_RUNTIME);
    CHECK(CPU->gemm_strided_batched(cpu_ctx, 0, 0, 2, 2, 2, 1, NULL, 2, 4, NULL, 2, 4, 0, NULL, 2,
                                    4, 0) == 0);
}

/* The convolution as the model runs it: im2col, one batched GEMM with the weights shared
 * (stride 0), the channel bias; and its backward: dcol = W^T dy per image, col2im, dW summed
 * over images by GEMMs with beta = 1, the bias's gradient. */
typedef struct {
    ConvShape s;
    double *x, *w, *bias, *G, *y;
} ConvFd;

static double conv_loss(void *arg) {
    ConvFd *c = arg;
    ref_conv(&c->s, c->x, c->w, c->bias, c->y);
    return dot_dd(c->G, c->y, (size_t)c->s.B * c->s.OC * c->s.OH * c->s.OW);
}

static void test_cpu_conv(void) {
    static const int geo[][8] = {/* B, C, H, W, k, stride, pad, OC */
                                 {2, 1, 8, 8, 5, 1, 2, 3},
                                 {2, 3, 7, 6, 3, 1, 1, 2},
                                 {1, 2, 9, 7, 3, 2, 0, 2},
                                 {2, 2, 6, 6, 5, 1, 0, 3},
                                 {1, 2, 5, 6, 3, 2, 1, 2}};
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        ConvShape s = conv_shape(geo[g][0], geo[g][1], geo[g][2], geo[g][3], geo[g][4], geo[g][5],
                                 geo[g][6], geo[g][7]);
        int kk = s.C * s.k * s.k, ohw = s.OH * s.OW;
        size_t nx = (size_t)s.B * s.C * s.H * s.W, nw = (size_t)s.OC * kk;
        size_t ncol = (size_t)s.B * kk * ohw, ny = (size_t)s.B * s.OC * ohw;
        float *x = rnd_vec(nx, -1, 1), *w = rnd_vec(nw, -1, 1), *bias = rnd_vec(s.OC, -1, 1);
        float *G = rnd_vec(ny, -1, 1), *col = rnd_vec(ncol, 5, 6), *y = malloc(ny * 4);

        /* im2col against its definition, exactly */
        CPU->im2col(cpu_ctx, col, x, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        size_t bad = 0;
        for (int b = 0; b < s.B; b++)
            for (int c = 0; c < s.C; c++)
                for (int i = 0; i < s.k; i++)
                    for (int j = 0; j < s.k; j++)
                        for (int oh = 0; oh < s.OH; oh++)
                            for (int ow = 0; ow < s.OW; ow++) {
                                int ih = oh * s.stride - s.pad + i, iw = ow * s.stride - s.pad + j;
                                float want = ih < 0 || ih >= s.H || iw < 0 || iw >= s.W
                                                 ? 0.0f
                                                 : x[(((size_t)b * s.C + c) * s.H + ih) * s.W + iw];
                                bad += col[(((size_t)b * kk + (c * s.k + i) * s.k + j) * s.OH + oh) *
                                               s.OW + ow] != want;
                            }
        CHECK_MSG(bad == 0, "im2col geometry %zu: %zu wrong elements", g, bad);

        /* col2im is im2col's adjoint: <col2im(D), x> = <D, im2col(x)> */
        float *D = rnd_vec(ncol, -1, 1), *dx = rnd_vec(nx, 5, 6);
        CPU->col2im(cpu_ctx, dx, D, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        double l = 0, r = 0;
        for (size_t i = 0; i < nx; i++) l += (double)dx[i] * x[i];
        for (size_t i = 0; i < ncol; i++) r += (double)D[i] * col[i];
        CHECK_MSG(fabs(l - r) <= 1e-5 * (fabs(r) > 1 ? fabs(r) : 1),
                  "col2im adjoint: %.9g vs %.9g", l, r);

        /* forward */
        CHECK(CPU->gemm_strided_batched(cpu_ctx, 0, 0, s.OC, ohw, kk, 1.0f, w, kk, 0, col, ohw,
                                        (long long)kk * ohw, 0.0f, y, ohw, (long long)s.OC * ohw,
                                        s.B) == 0);
        CPU->channel_bias_forward(cpu_ctx, y, bias, s.B, s.OC, ohw);
        ConvFd fd = {s, to_double(x, nx), to_double(w, nw), to_double(bias, s.OC), to_double(G, ny),
                     malloc(ny * sizeof(double))};
        conv_loss(&fd);
        check_ref("conv forward", y, fd.y, ny);

        /* backward */
        float *dcol = malloc(ncol * 4), *dw = rnd_vec(nw, 5, 6), *db = rnd_vec(s.OC, 5, 6);
        CHECK(CPU->gemm_strided_batched(cpu_ctx, 1, 0, kk, ohw, s.OC, 1.0f, w, kk, 0, G, ohw,
                                        (long long)s.OC * ohw, 0.0f, dcol, ohw,
                                        (long long)kk * ohw, s.B) == 0);
        CPU->col2im(cpu_ctx, dx, dcol, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        for (int b = 0; b < s.B; b++)
            CHECK(CPU->gemm(cpu_ctx, 0, 1, s.OC, kk, ohw, 1.0f, G + (size_t)b * s.OC * ohw, ohw,
                            col + (size_t)b * kk * ohw, ohw, b ? 1.0f : 0.0f, dw, kk) == 0);
        CPU->channel_bias_backward(cpu_ctx, db, G, s.B, s.OC, ohw);
        char what[64];
        snprintf(what, sizeof what, "conv %zu dx (col2im)", g);
        check_grad(what, dx, conv_loss, &fd, fd.x, nx, 1e-3);
        snprintf(what, sizeof what, "conv %zu dW", g);
        check_grad(what, dw, conv_loss, &fd, fd.w, nw, 1e-3);
        snprintf(what, sizeof what, "conv %zu dbias (channel_bias_backward)", g);
        check_grad(what, db, conv_loss, &fd, fd.bias, s.OC, 1e-3);
        free(x), free(w), free(bias), free(G), free(col), free(y), free(D), free(dx);
        free(dcol), free(dw), free(db), free(fd.x), free(fd.w), free(fd.bias), free(fd.G), free(fd.y);
    }
}

typedef struct {
    int N, H, W;
    double *x, *G;
} PoolFd;

static double pool_loss(void *arg) {
    PoolFd *p = arg;
    int OH = p->H / 2, OW = p->W / 2;
    double L = 0;
    for (int n = 0; n < p->N; n++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                const double *x = p->x + (size_t)n * p->H * p->W;
                double m = -INFINITY;
                for (int q = 0; q < 4; q++) {
                    double v = x[(2 * oh + q / 2) * p->W + 2 * ow + q % 2];
                    m = v > m ? v : m;
                }
                L += p->G[((size_t)n * OH + oh) * OW + ow] * m;
            }
    return L;
}

static void test_cpu_maxpool(void) {
    const int N = 6, H = 8, W = 7, OH = 4, OW = 3;
    size_t nx = (size_t)N * H * W, ny = (size_t)N * OH * OW;
    /* distinct values at least 0.01 apart, so that differences never switch the maximum */
    float *x = malloc(nx * 4);
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % nx) * 0.01f - 1.5f;
    float *y = malloc(ny * 4), *G = rnd_vec(ny, -1, 1), *dx = rnd_vec(nx, 5, 6);
    int *am = malloc(ny * sizeof *am);
    CPU->maxpool2_forward(cpu_ctx, y, am, x, N, H, W);
    PoolFd p = {N, H, W, to_double(x, nx), to_double(G, ny)};
    size_t bad = 0;
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                size_t o = ((size_t)n * OH + oh) * OW + ow;
                int at = am[o], h = at / W, w = at % W;
                bad += h / 2 != oh || w / 2 != ow || y[o] != x[(size_t)n * H * W + at];
                for (int q = 0; q < 4; q++)
                    bad += x[(size_t)n * H * W + (2 * oh + q / 2) * W + 2 * ow + q % 2] > y[o];
            }
    CHECK_MSG(bad == 0, "maxpool2_forward: %zu wrong", bad);
    CPU->maxpool2_backward(cpu_ctx, dx, G, am, NULL, N, H, W);
    check_grad("maxpool2 dX", dx, pool_loss, &p, p.x, nx, 1e-3);
    for (int n = 0; n < N; n++) /* the dropped last column gets no gradient */
        for (int h = 0; h < H; h++) CHECK(dx[((size_t)n * H + h) * W + W - 1] == 0.0f);
    /* with the ReLU's mask: the bits of the pool's backward, then relu_backward over x */
    float *dxr = malloc(nx * 4), *want = malloc(nx * 4);
    CPU->relu_backward(cpu_ctx, want, dx, x, nx);
    CPU->maxpool2_backward(cpu_ctx, dxr, G, am, x, N, H, W);
    CHECK(memcmp(dxr, want, nx * 4) == 0);
    free(dxr), free(want);

    /* ties go to the first in row-major order; a NaN wins */
    float t[2 * 2 * 4] = {1, 1, 2, 3, 1, 1, 3, 1, /* plane 0: windows (1 1; 1 1) and (2 3; 3 1) */
                          0, NAN, 7, 7, 5, 1, 6, 7}; /* plane 1: (0 NaN; 5 1) and (7 7; 6 7) */
    float ty[4];
    int ta[4];
    CPU->maxpool2_forward(cpu_ctx, ty, ta, t, 2, 2, 4);
    CHECK(ta[0] == 0 && ty[0] == 1 && ta[1] == 3 && ty[1] == 3);
    CHECK(ta[2] == 1 && isnan(ty[2]) && ta[3] == 2 && ty[3] == 7);
    free(x), free(y), free(G), free(dx), free(am), free(p.x), free(p.G);
}

typedef struct {
    int B, T, C, V;
    const int *tok;
    double *wte, *wpe, *G;
} EmbFd;

static double emb_loss(void *arg) {
    EmbFd *e = arg;
    double L = 0;
    for (int i = 0; i < e->B * e->T; i++)
        for (int c = 0; c < e->C; c++)
            L += e->G[(size_t)i * e->C + c] *
                 (e->wte[(size_t)e->tok[i] * e->C + c] + e->wpe[(size_t)(i % e->T) * e->C + c]);
    return L;
}

static void test_cpu_embedding(void) {
    const int B = 3, T = 5, C = 7, V = 11, n = B * T;
    int *tok = rnd_tokens(n, V);
    tok[3] = tok[7] = tok[12] = 4; /* a token seen three times */
    float *wte = rnd_vec((size_t)V * C, -1, 1), *wpe = rnd_vec((size_t)(T + 2) * C, -1, 1);
    float *out = malloc((size_t)n * C * 4), *G = rnd_vec((size_t)n * C, -1, 1);
    CPU->embedding_forward(cpu_ctx, out, tok, wte, wpe, B, T, C, V);
    size_t bad = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            bad += out[(size_t)i * C + c] != wte[(size_t)tok[i] * C + c] + wpe[(size_t)(i % T) * C + c];
    CHECK_MSG(bad == 0, "embedding_forward: %zu wrong", bad);

    /* dwte accumulates onto what is there; dwpe's first T rows are overwritten, the rest kept */
    float *dwte0 = rnd_vec((size_t)V * C, -1, 1), *dwte = dup_vec(dwte0, (size_t)V * C);
    float *dwpe = rnd_vec((size_t)(T + 2) * C, 5, 6), *keep = dup_vec(dwpe + (size_t)T * C, 2 * C);
    CPU->embedding_backward(cpu_ctx, dwte, dwpe, G, tok, B, T, C, V);
    for (size_t i = 0; i < (size_t)V * C; i++) dwte[i] -= dwte0[i];
    EmbFd e = {B, T, C, V, tok, to_double(wte, (size_t)V * C), to_double(wpe, (size_t)T * C),
               to_double(G, (size_t)n * C)};
    check_grad("embedding dwte", dwte, emb_loss, &e, e.wte, (size_t)V * C, 1e-3);
    check_grad("embedding dwpe", dwpe, emb_loss, &e, e.wpe, (size_t)T * C, 1e-3);
    CHECK(memcmp(keep, dwpe + (size_t)T * C, 2 * C * 4) == 0);

    /* a token outside [0, V): a NaN row forward, skipped backward */
    int badtok[2] = {V, -1};
    float o2[2 * 7], dw[11 * 7] = {0}, dp[2 * 7];
    CPU->embedding_forward(cpu_ctx, o2, badtok, wte, wpe, 1, 2, C, V);
    for (int i = 0; i < 2 * C; i++) CHECK(isnan(o2[i]));
    CPU->embedding_backward(cpu_ctx, dw, dp, G, badtok, 1, 2, C, V);
    for (int i = 0; i < V * C; i++) CHECK(dw[i] == 0.0f);
    for (int i = 0; i < 2 * C; i++) CHECK(dp[i] == G[i]);
    free(tok), free(wte), free(wpe), free(out), free(G), free(dwte0), free(dwte), free(dwpe);
    free(keep), free(e.wte), free(e.wpe), free(e.G);
}

typedef struct {
    int N, C;
    double *x, *g, *b, *G, *out;
} LnFd;

static double ln_loss(void *arg) {
    LnFd *l = arg;
    ref_layernorm(l->x, l->g, l->b, l->out, NULL, NULL, l->N, l->C);
    return dot_dd(l->G, l->out, (size_t)l->N * l->C);
}

static void test_cpu_layernorm(void) {
    const int N = 6, C = 19;
    size_t n = (size_t)N * C;
    float *x = rnd_vec(n, -2, 3), *g = rnd_vec(C, 0.5f, 1.5f), *b = rnd_vec(C, -1, 1);
    for (int c = 0; c < C; c++) x[(size_t)2 * C + c] *= 0.01f; /* a nearly constant row */
    float *out = malloc(n * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    CPU->layernorm_forward(cpu_ctx, out, mean, rstd, x, g, b, N, C);
    LnFd l = {N, C, to_double(x, n), to_double(g, C), to_double(b, C), NULL, malloc(n * 8)};
    double *rm = malloc(N * 8), *rr = malloc(N * 8);
    ref_layernorm(l.x, l.g, l.b, l.out, rm, rr, N, C);
    check_ref("layernorm out", out, l.out, n);
    check_ref("layernorm mean", mean, rm, N);
    check_ref("layernorm rstd", rstd, rr, N);

    float *G = rnd_vec(n, -1, 1), *dx0 = rnd_vec(n, -1, 1), *dx = dup_vec(dx0, n);
    float *dg = rnd_vec(C, 5, 6), *db = rnd_vec(C, 5, 6);
    l.G = to_double(G, n);
    CPU->layernorm_backward(cpu_ctx, dx, dg, db, G, x, g, mean, rstd, N, C);
    for (size_t i = 0; i < n; i++) dx[i] -= dx0[i]; /* dx accumulates */
    check_grad("layernorm dx", dx, ln_loss, &l, l.x, n, 1e-5);
    check_grad("layernorm dgamma", dg, ln_loss, &l, l.g, C, 1e-5);
    check_grad("layernorm dbeta", db, ln_loss, &l, l.b, C, 1e-5);
    free(x), free(g), free(b), free(out), free(mean), free(rstd), free(l.x), free(l.g), free(l.b);
    free(l.out), free(rm), free(rr), free(G), free(dx0), free(dx), free(dg), free(db), free(l.G);
}

typedef struct {
    size_t n;
    double *x, *G;
} GeluFd;

static double gelu_loss(void *arg) {
    GeluFd *f = arg;
    double L = 0;
    for (size_t i = 0; i < f->n; i++) L += f->G[i] * ref_gelu(f->x[i]);
    return L;
}

static void test_cpu_gelu(void) {
    const size_t n = 1001;
    float *x = rnd_vec(n, -6, 6), *y = malloc(n * 4), *G = rnd_vec(n, -1, 1);
    x[0] = 0, x[1] = -20, x[2] = 20;
    float *d = malloc(n * 4);
    CPU->gelu_forward(cpu_ctx, y, d, x, n);
    GeluFd f = {n, to_double(x, n), to_double(G, n)};
    double *ry = malloc(n * 8);
    for (size_t i = 0; i < n; i++) ry[i] = ref_gelu(f.x[i]);
    check_ref("gelu forward", y, ry, n);
    CHECK(y[0] == 0.0f && fabsf(y[1]) < 1e-30f && y[2] == 20.0f);
    float *dx = malloc(n * 4);
    CPU->mul(cpu_ctx, dx, G, d, n); /* dx = dy gelu'(x) */
    check_grad("gelu dx", dx, gelu_loss, &f, f.x, n, 1e-5);
    float *y2 = dup_vec(x, n), *d2 = dup_vec(x, n), *y3 = malloc(n * 4);
    CPU->gelu_forward(cpu_ctx, y2, NULL, y2, n); /* y in place, no derivative */
    CPU->gelu_forward(cpu_ctx, y3, d2, d2, n);   /* the derivative in place */
    CHECK(memcmp(y2, y, n * 4) == 0 && memcmp(y3, y, n * 4) == 0 && memcmp(d2, d, n * 4) == 0);
    free(x), free(y), free(G), free(f.x), free(f.G), free(ry), free(dx), free(y2), free(d2), free(y3), free(d);
}

typedef struct {
    int BH, T;
    double scale, *S, *G, *P;
} SmFd;

static double sm_loss(void *arg) {
    SmFd *s = arg;
    ref_softmax_causal(s->S, s->P, s->BH, s->T, s->scale);
    return dot_dd(s->G, s->P, (size_t)s->BH * s->T * s->T);
}

static void test_cpu_softmax_causal(void) {
    const int BH = 3, T = 9;
    const float scale = 0.35f;
    size_t n = (size_t)BH * T * T;
    float *S = rnd_vec(n, -4, 4), *G = rnd_vec(n, -1, 1), *P = malloc(n * 4);
    S[(size_t)T * T + 4 * T + 2] = 300; /* a huge score stays finite */
    for (size_t r = 0; r < (size_t)BH * T; r++) /* above the diagonal is never read */
        for (int c = (int)(r % T) + 1; c < T; c++) S[r * T + c] = NAN;
    CPU->softmax_causal_forward(cpu_ctx, P, S, BH, T, scale);
    SmFd s = {BH, T, scale, to_double(S, n), to_double(G, n), malloc(n * 8)};
    sm_loss(&s);
    check_ref("softmax_causal forward", P, s.P, n);
    float *dS = malloc(n * 4);
    CPU->softmax_causal_backward(cpu_ctx, dS, G, P, BH, T, scale);
    size_t above = 0;
    for (size_t r = 0; r < (size_t)BH * T; r++)
        for (int c = (int)(r % T) + 1; c < T; c++) {
            above += P[r * T + c] != 0.0f || dS[r * T + c] != 0.0f;
            s.S[r * T + c] = 0; /* for the differences: unused, but finite */
        }
    CHECK_MSG(above == 0, "%zu nonzero above the diagonal", above);
    check_grad("softmax_causal dS", dS, sm_loss, &s, s.S, n, 1e-5);
    float *P2 = dup_vec(S, n), *G2 = dup_vec(G, n); /* in place */
    CPU->softmax_causal_forward(cpu_ctx, P2, P2, BH, T, scale);
    CPU->softmax_causal_backward(cpu_ctx, G2, G2, P, BH, T, scale);
    CHECK(memcmp(P2, P, n * 4) == 0 && memcmp(G2, dS, n * 4) == 0);
    free(S), free(G), free(P), free(s.S), free(s.G), free(s.P), free(dS), free(P2), free(G2);
}

static void test_cpu_heads(void) {
    const int B = 2, T = 5, S = 3, H = 4, D = 3;
    size_t n = (size_t)B * T * S * H * D;
    float *in = rnd_vec(n, -1, 1), *out = malloc(n * 4), *back = malloc(n * 4);
    CPU->heads_split(cpu_ctx, out, in, B, T, S, H, D);
    size_t bad = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int s = 0; s < S; s++)
                for (int h = 0; h < H; h++)
                    for (int d = 0; d < D; d++)
                        bad += out[((((size_t)s * B + b) * H + h) * T + t) * D + d] !=
                               in[((((size_t)b * T + t) * S + s) * H + h) * D + d];
    CHECK_MSG(bad == 0, "heads_split: %zu wrong", bad);
    CPU->heads_merge(cpu_ctx, back, out, B, T, S, H, D);
    CHECK(memcmp(back, in, n * 4) == 0);
    free(in), free(out), free(back);
}

/* Attention built from the ops, as the model builds it. The buffers, B, T, H, D. */
typedef struct {
    int B, T, H, D;
    float *qkvh, *S, *P, *yh, *dyh, *dqkvh, *dP;
} Attn;

static void attn_forward(const KernelOps *k, KernelCtx *ctx, Attn *a, const float *qkv, float *y) {
    int B = a->B, T = a->T, H = a->H, D = a->D, BH = B * H;
    long long td = (long long)T * D, tt = (long long)T * T;
    float *q = a->qkvh, *kk = q + (size_t)BH * td, *v = kk + (size_t)BH * td;
    k->heads_split(ctx, a->qkvh, qkv, B, T, 3, H, D);
    CHECK(k->gemm_strided_batched(ctx, 0, 1, T, T, D, 1.0f, q, D, td, kk, D, td, 0.0f, a->S, T, tt,
                                  BH) == 0);
    k->softmax_causal_forward(ctx, a->P, a->S, BH, T, 1.0f / sqrtf((float)D));
    CHECK(k->gemm_strided_batched(ctx, 0, 0, T, D, T, 1.0f, a->P, T, tt, v, D, td, 0.0f, a->yh, D,
                                  td, BH) == 0);
    k->heads_merge(ctx, y, a->yh, B, T, 1, H, D);
}

static void attn_backward(const KernelOps *k, KernelCtx *ctx, Attn *a, const float *dy,
                          float *dqkv) {
    int B = a->B, T = a->T, H = a->H, D = a->D, BH = B * H;
    long long td = (long long)T * D, tt = (long long)T * T;
    float *q = a->qkvh, *kk = q + (size_t)BH * td, *v = kk + (size_t)BH * td;
    float *dq = a->dqkvh, *dk = dq + (size_t)BH * td, *dv = dk + (size_t)BH * td;
    k->heads_split(ctx, a->dyh, dy, B, T, 1, H, D);
    CHECK(k->gemm_strided_batched(ctx, 0, 1, T, T, D, 1.0f, a->dyh, D, td, v, D, td, 0.0f, a->dP,
                                  T, tt, BH) == 0);
    CHECK(k->gemm_strided_batched(ctx, 1, 0, T, D, T, 1.0f, a->P, T, tt, a->dyh, D, td, 0.0f, dv, D,
                                  td, BH) == 0);
    k->softmax_causal_backward(ctx, a->dP, a->dP, a->P, BH, T, 1.0f / sqrtf((float)D));
    CHECK(k->gemm_strided_batched(ctx, 0, 0, T, D, T, 1.0f, a->dP, T, tt, kk, D, td, 0.0f, dq, D,
                                  td, BH) == 0);
    CHECK(k->gemm_strided_batched(ctx, 1, 0, T, D, T, 1.0f, a->dP, T, tt, q, D, td, 0.0f, dk, D,
                                  td, BH) == 0);
    k->heads_merge(ctx, dqkv, a->dqkvh, B, T, 3, H, D);
}

/* Host buffers for attention of this shape. */
static Attn attn_alloc(int B, int T, int H, int D) {
    size_t td = (size_t)B * H * T * D, tt = (size_t)B * H * T * T;
    Attn a = {B, T, H, D, malloc(3 * td * 4), malloc(tt * 4), malloc(tt * 4), malloc(td * 4),
              malloc(td * 4), malloc(3 * td * 4), malloc(tt * 4)};
    return a;
}

static void attn_free(Attn *a) {
    free(a->qkvh), free(a->S), free(a->P), free(a->yh), free(a->dyh), free(a->dqkvh), free(a->dP);
}

typedef struct {
    int B, T, H, D;
    double *qkv, *G, *y;
} AttnFd;

static double attn_loss(void *arg) {
    AttnFd *f = arg;
    ref_attention(f->qkv, f->y, f->B, f->T, f->H, f->D);
    return dot_dd(f->G, f->y, (size_t)f->B * f->T * f->H * f->D);
}

static void test_cpu_attention(void) {
    const int B = 2, T = 6, H = 2, D = 3, C = H * D;
    size_t nqkv = (size_t)B * T * 3 * C, ny = (size_t)B * T * C;
    float *qkv = rnd_vec(nqkv, -1.5f, 1.5f), *y = malloc(ny * 4), *G = rnd_vec(ny, -1, 1);
    float *dqkv = malloc(nqkv * 4);
    Attn a = attn_alloc(B, T, H, D);
    attn_forward(CPU, cpu_ctx, &a, qkv, y);
    AttnFd f = {B, T, H, D, to_double(qkv, nqkv), to_double(G, ny), malloc(ny * 8)};
    attn_loss(&f);
    check_ref("attention forward", y, f.y, ny);
    attn_backward(CPU, cpu_ctx, &a, G, dqkv);
    check_grad("attention dqkv", dqkv, attn_loss, &f, f.qkv, nqkv, 1e-5);
    attn_free(&a);
    free(qkv), free(y), free(G), free(dqkv), free(f.qkv), free(f.G), free(f.y);
}

static void test_cpu_add(void) {
    const size_t n = 777;
    float *a = rnd_vec(n, -1, 1), *b = rnd_vec(n, -1, 1), *o = malloc(n * 4);
    CPU->add(cpu_ctx, o, a, b, n);
    for (size_t i = 0; i < n; i++) CHECK(o[i] == a[i] + b[i]);
    CPU->add(cpu_ctx, a, a, b, n); /* out aliasing a */
    CPU->add(cpu_ctx, b, b, b, n); /* and every operand */
    CHECK(memcmp(a, o, n * 4) == 0);
    for (size_t i = 0; i < n; i++) CHECK(b[i] == 2 * (o[i] - a[i] + b[i] / 2));
    free(a), free(b), free(o);
}

static void test_cpu_mul(void) {
    const size_t n = 777;
    float *a = rnd_vec(n, -1, 1), *b = rnd_vec(n, -1, 1), *o = malloc(n * 4), *a2 = dup_vec(a, n);
    CPU->mul(cpu_ctx, o, a, b, n);
    for (size_t i = 0; i < n; i++) CHECK(o[i] == a[i] * b[i]);
    CPU->mul(cpu_ctx, a2, a2, b, n); /* out aliasing a */
    CHECK(memcmp(a2, o, n * 4) == 0);
    CPU->mul(cpu_ctx, b, a, b, n);   /* and b */
    CHECK(memcmp(b, o, n * 4) == 0);
    free(a), free(b), free(o), free(a2);
}

/* torch.optim.AdamW's single-tensor rule, in double. */
static void ref_adamw(double *p, const float *g, double *m, double *v, size_t n, double lr,
                      double b1, double b2, double eps, double wd, double gs, int t) {
    double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        double gg = g[i] * gs;
        p[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * gg;
        v[i] = b2 * v[i] + (1 - b2) * gg * gg;
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

static void test_cpu_adamw(void) {
    const size_t n = 513;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    float *p = rnd_vec(n, -1, 1), *m = calloc(n, 4), *v = calloc(n, 4);
    double *pd = to_double(p, n), *md = calloc(n, 8), *vd = calloc(n, 8);
    float *p0 = dup_vec(p, n);
    for (int t = 1; t <= 4; t++) {
        float *g = rnd_vec(n, -1, 1);
        CPU->adamw_step(cpu_ctx, p, g, m, v, n, lr, b1, b2, eps, t == 1 ? 0.0f : wd, gs, t);
        ref_adamw(pd, g, md, vd, n, lr, b1, b2, eps, t == 1 ? 0.0 : wd, gs, t);
        if (t == 1) /* the first bias-corrected step moves each weight by lr, against its gradient */
            for (size_t i = 0; i < n; i++)
                CHECK_MSG(fabs(fabs((double)p[i] - p0[i]) - lr) < 1e-5 &&
                              (p[i] - p0[i]) * g[i] < 0,
                          "step 1: param[%zu] moved %g", i, p[i] - p0[i]);
        free(g);
    }
    double e = err_fd(p, pd, n, 1.0), em = err_fd(m, md, n, rms_d(md, n));
    double ev = err_fd(v, vd, n, rms_d(vd, n));
    printf("  adamw after 4 steps vs double: param %.2e, m %.2e, v %.2e\n", e, em, ev);
    CHECK(e <= 1e-6 && em <= 1e-6 && ev <= 1e-6);
    free(p), free(m), free(v), free(pd), free(md), free(vd), free(p0);
}

/* Every op, at shapes where 2 threads split the work, gives the same bits as 1 thread. */
typedef struct {
    float *out[4];
    size_t n[4];
    int *iout;
    size_t ni;
} Outs;

static void run_all_big(Outs *o, const float *x, const int *tok) {
    KernelCtx *c = cpu_ctx;
    float *o0 = o->out[0], *o1 = o->out[1], *o2 = o->out[2], *o3 = o->out[3];
    /* conv: B 8, C 3, 28 x 28, k 5, pad 2; bias and pooling over 16 x 6 planes */
    CPU->im2col(c, o0, x, 8, 3, 28, 28, 5, 1, 2);               /* o0 [0, 470400) */
    CPU->col2im(c, o1, o0, 8, 3, 28, 28, 5, 1, 2);              /* o1 [0, 18816) */
    CPU->channel_bias_forward(c, o1, x, 16, 6, 784);            /* o1 [0, 75264) */
    CPU->channel_bias_backward(c, o2, o1, 16, 6, 784);          /* o2 [0, 6) */
    CPU->maxpool2_forward(c, o2 + 8, o->iout, o1, 96, 28, 28);  /* o2 [8, 18824) */
    CPU->maxpool2_backward(c, o3, o2 + 8, o->iout, o1, 96, 28, 28); /* o3 [0, 75264) */
    /* GPT: B 4, T 64, C 256, V 300 */
    float *emb = o0 + 500000, *dwte = o1 + 100000, *dwpe = o1 + 200000;
    float *mean = o3 + 100000, *rstd = o3 + 100256, *ln = o3 + 200000, *dx = o1 + 600000;
    CPU->embedding_forward(c, emb, tok, x, x + 300 * 256, 4, 64, 256, 300);
    CPU->embedding_backward(c, dwte, dwpe, emb, tok, 4, 64, 256, 300);
    CPU->layernorm_forward(c, ln, mean, rstd, emb, x + 1000, x + 2000, 256, 256);
    memcpy(dx, x + 5, 65536 * 4);
    CPU->layernorm_backward(c, dx, o2 + 20000, o2 + 30000, ln, emb, x + 1000, mean, rstd, 256, 256);
    CPU->gelu_forward(c, o0 + 600000, o1 + 300000, x, 100000);
    CPU->mul(c, o1 + 300000, x + 1, o1 + 300000, 100000);
    CPU->softmax_causal_forward(c, o0 + 700000, x, 8, 128, 0.125f);
    CPU->softmax_causal_backward(c, o1 + 400000, x + 7, o0 + 700000, 8, 128, 0.125f);
    CPU->heads_split(c, o2 + 100000, x, 8, 128, 3, 4, 16);
    CPU->heads_merge(c, o3 + 300000, o2 + 100000, 8, 128, 3, 4, 16);
    CPU->add(c, o2 + 300000, x, x + 3, 100000);
    float *p = o0 + 900000, *m = p + 100000, *v = m + 100000;
    memcpy(p, x, 100000 * 4);
    memset(m, 0, 200000 * 4);
    CPU->adamw_step(c, p, x + 5, m, v, 100000, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f, 1);
    CPU->adamw_step(c, p, x + 9, m, v, 100000, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f, 2);
    /* the MLP's: a 128 x 1024 layer, an odd 333 x 517 one, SGD and the vector ops */
    float *y1 = o2 + 1000000, *y2 = o2 + 1200000;
    memcpy(y1, x, 131072 * 4);
    memcpy(y2, x, 131072 * 4);
    CPU->bias_forward(c, y1, x + 7, 128, 1024);
    CPU->bias_relu_forward(c, y2, x + 7, 128, 1024);
    CPU->relu_forward(c, o2 + 1400000, x, 131072);
    CPU->relu_backward(c, o2 + 1600000, x + 3, y2, 131072);
    CPU->bias_backward(c, o3 + 1000000, x + 11, 128, 1024);
    CPU->bias_backward(c, o3 + 1001100, x, 333, 517);
    CPU->softmax_xent(c, x, tok, 256, 300, o3 + 1002000, o3 + 1080000);
    float *sp = o3 + 1100000, *sm = o3 + 1400000, *sv = o3 + 1700000;
    memcpy(sp, x, 300000 * 4);
    memset(sm, 0, 300000 * 4);
    CPU->sgd_step(c, sp, x + 13, sm, 300000, 0.1f, 0.9f, 1e-4f, 0.5f);
    CPU->sgd_step(c, sp, x + 17, sm, 300000, 0.1f, 0.9f, 1e-4f, 0.5f);
    memcpy(sv, x, 200000 * 4);
    CPU->scale(c, sv, 0.37f, 200000);
    CPU->axpy(c, sv, -1.5f, x + 19, 200000);
    CPU->fill(c, sv + 100000, 0.25f, 50000);
    /* GEMM, split over the pool: the MLP's three kinds, an odd shape, a batch of small ones */
    CHECK(CPU->gemm(c, 0, 0, 128, 1024, 784, 1, x, 784, x + 1000, 1024, 0, o0 + 1300000, 1024) == 0);
    CHECK(CPU->gemm(c, 1, 0, 784, 1024, 128, 1, x, 784, x + 3, 1024, 0, o1 + 1000000, 1024) == 0);
    CHECK(CPU->gemm(c, 0, 1, 128, 512, 1024, 1, x, 1024, x + 5, 1024, 0, o0 + 1500000, 512) == 0);
    CHECK(CPU->gemm(c, 0, 0, 333, 77, 517, 0.5f, x, 517, x + 11, 77, 0, o3 + 1800000, 77) == 0);
    CHECK(CPU->gemm_strided_batched(c, 0, 1, 64, 64, 16, 1, x, 16, 1024, x + 7, 16, 1024, 0,
                                    o0 + 1600000, 64, 4096, 32) == 0);
}

static void test_cpu_threads(void) {
    size_t big = 1000000;
    float *x = rnd_vec(big, -2, 2);
    int *tok = rnd_tokens(256, 300);
    Outs o[3];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 4; i++) o[r].out[i] = calloc(big * 2, 4), o[r].n[i] = big * 2;
        o[r].iout = calloc(96 * 196, sizeof(int));
        kernels_cpu_set_threads(r + 1);
        run_all_big(&o[r], x, tok);
    }
    kernels_cpu_set_threads(1);
    for (int r = 1; r < 3; r++) {
        for (int i = 0; i < 4; i++)
            CHECK_MSG(memcmp(o[r].out[i], o[0].out[i], o[0].n[i] * 4) == 0,
                      "%d threads: buffer %d differs from 1 thread's", r + 1, i);
        CHECK(memcmp(o[r].iout, o[0].iout, 96 * 196 * sizeof(int)) == 0);
    }
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 4; i++) free(o[r].out[i]);
        free(o[r].iout);
    }
    free(x), free(tok);
}

/* A child forked while the pool's workers exist has none: its first region starts its own
 * (instead of waiting forever for the parent's) and gives the same bits. */
static void test_cpu_threads_fork(void) {
#ifdef __SANITIZE_THREAD__
    SKIP("ThreadSanitizer does not support starting threads after a multi-threaded fork");
    return;
#endif
    const size_t n = 1 << 20;
    float *x = rnd_vec(n, -3, 3), *y = malloc(n * 4), *y2 = malloc(n * 4);
    kernels_cpu_set_threads(2);
    CPU->gelu_forward(cpu_ctx, y, NULL, x, n); /* the parent's worker runs */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a child stuck on the parent's pool dies instead of hanging the test */
        CPU->gelu_forward(cpu_ctx, y2, NULL, x, n);
        CPU->gelu_forward(cpu_ctx, y2, NULL, x, n);
        _exit(memcmp(y, y2, n * 4) == 0 ? 0 : 3);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s %d",
              WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    CPU->gelu_forward(cpu_ctx, y2, NULL, x, n); /* and the parent's pool still works */
    CHECK(memcmp(y, y2, n * 4) == 0);
    kernels_cpu_set_threads(1);
    free(x), free(y), free(y2);
}

/* Empty shapes touch nothing; NULL pointers welcome. */
static void empty_ops(const KernelOps *k, KernelCtx *c) {
    CHECK(k->gemm_strided_batched(c, 0, 0, 4, 4, 4, 1, NULL, 4, 16, NULL, 4, 16, 0, NULL, 4, 16,
                                  0) == 0);
    CHECK(k->gemm_strided_batched(c, 0, 0, 0, 4, 4, 1, NULL, 4, 16, NULL, 4, 16, 0, NULL, 4, 16,
                                  3) == 0);
    k->im2col(c, NULL, NULL, 0, 1, 28, 28, 5, 1, 2);
    k->col2im(c, NULL, NULL, 0, 1, 28, 28, 5, 1, 2);
    k->channel_bias_forward(c, NULL, NULL, 0, 6, 784);
    k->channel_bias_backward(c, NULL, NULL, 4, 0, 784);
    k->maxpool2_forward(c, NULL, NULL, NULL, 0, 28, 28);
    k->maxpool2_backward(c, NULL, NULL, NULL, NULL, 0, 28, 28);
    k->embedding_forward(c, NULL, NULL, NULL, NULL, 0, 64, 64, 256);
    k->embedding_backward(c, NULL, NULL, NULL, NULL, 0, 64, 64, 256);
    k->layernorm_forward(c, NULL, NULL, NULL, NULL, NULL, NULL, 0, 64);
    k->layernorm_backward(c, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 64);
    k->gelu_forward(c, NULL, NULL, NULL, 0);
    k->softmax_causal_forward(c, NULL, NULL, 0, 64, 1);
    k->softmax_causal_backward(c, NULL, NULL, NULL, 0, 64, 1);
    k->heads_split(c, NULL, NULL, 0, 64, 3, 4, 16);
    k->heads_merge(c, NULL, NULL, 2, 0, 3, 4, 16);
    k->add(c, NULL, NULL, NULL, 0);
    k->mul(c, NULL, NULL, NULL, 0);
    k->adamw_step(c, NULL, NULL, NULL, NULL, 0, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1);
    CHECK(k->sync(c) == 0);
}

static void test_cpu_empty(void) { empty_ops(CPU, cpu_ctx); }

/* The "cpu-async" device wraps every new op: each runs after the copies queued before it. */
static void test_lazy_wrappers(void) {
    const KernelOps *k = device_lazy_kernels();
    CHECK(k->gemm_strided_batched && k->im2col && k->col2im && k->channel_bias_forward &&
          k->channel_bias_backward && k->maxpool2_forward && k->maxpool2_backward &&
          k->embedding_forward && k->embedding_backward && k->layernorm_forward &&
          k->layernorm_backward && k->gelu_forward && k->mul &&
          k->softmax_causal_forward && k->softmax_causal_backward && k->heads_split &&
          k->heads_merge && k->add && k->adamw_step);
    Device dev;
    CHECK(device_open(&dev, "cpu-async", 0, NULL) == 0);
    CHECK(dev.k == k);
    /* attention and a LayerNorm on inputs that arrive by queued copies */
    const int B = 1, T = 4, H = 2, D = 2, C = H * D;
    float qkv[1 * 4 * 3 * 4], y[16], want[16], ln[16], lnw[16], mr[8], g[4] = {1, 2, 3, 4}, b[4] = {0};
    for (int i = 0; i < 48; i++) qkv[i] = 2 * rng_uniform(&rng) - 1;
    float *dq = device_alloc(&dev, sizeof qkv, MEM_ACTIVATIONS);
    float *dy = device_alloc(&dev, sizeof y, MEM_ACTIVATIONS);
    CHECK(dev.ops->copy(&dev, dq, qkv, sizeof qkv, 0, NULL) == 0);
    Attn a = attn_alloc(B, T, H, D), a2 = attn_alloc(B, T, H, D);
    attn_forward(k, dev.kctx, &a, dq, dy);
    k->layernorm_forward(dev.kctx, ln, mr, mr + 4, dy, g, b, T, C);
    CHECK(k->sync(dev.kctx) == 0);
    CHECK(device_d2h(&dev, y, dy, sizeof y) == 0);
    attn_forward(CPU, cpu_ctx, &a2, qkv, want);
    CPU->layernorm_forward(cpu_ctx, lnw, mr, mr + 4, want, g, b, T, C);
    CHECK(memcmp(y, want, sizeof y) == 0 && memcmp(ln, lnw, sizeof ln) == 0);
    attn_free(&a), attn_free(&a2);
    device_free(&dev, dq, sizeof qkv, MEM_ACTIVATIONS);
    device_free(&dev, dy, sizeof y, MEM_ACTIVATIONS);
    empty_ops(k, dev.kctx);
    device_close(&dev);
}

/* ---- (b) the CUDA ops against their C twins ---- */

static Device gpu;
static int gpu_state; /* 0 not tried, 1 open, -1 unavailable, -2 failed to open */
static char gpu_why[600];

/* Opens cuda:0 once. 1 when open; otherwise SKIPs (no CUDA build or no device) or FAILs. */
static int gpu_get(void) {
    if (gpu_state == 0) {
        const DeviceOps *cu = device_cuda_ops();
        gpu_state = -1;
        if (!kernels_cuda() || !cu) {
            snprintf(gpu_why, sizeof gpu_why, "CPU-only build: kernels_cuda() is NULL");
        } else if (cu->count() == 0) {
            snprintf(gpu_why, sizeof gpu_why, "no CUDA device: %s", rs_errmsg());
        } else if (device_open(&gpu, "cuda", 0, NULL) != 0) {
            snprintf(gpu_why, sizeof gpu_why, "device_open(\"cuda\") failed: %s", rs_errmsg());
            gpu_state = -2;
        } else {
            gpu_state = 1;
        }
    }
    if (gpu_state == -1) SKIP("%s", gpu_why);
    if (gpu_state == -2) CHECK_MSG(0, "%s", gpu_why);
    return gpu_state == 1;
}

/* Device copies of host buffers (NULL: uninitialised); all of them freed by gpu_release. */
#define GPU_MAX 32
static void *gpu_bufs[GPU_MAX];
static size_t gpu_sizes[GPU_MAX];
static int gpu_nbufs;

static void *gpu_put(const void *h, size_t bytes) {
    void *d = device_alloc(&gpu, bytes ? bytes : 4, MEM_ACTIVATIONS);
    CHECK(d != NULL && gpu_nbufs < GPU_MAX);
    if (d && h) CHECK(device_h2d(&gpu, d, h, bytes) == 0);
    gpu_bufs[gpu_nbufs] = d, gpu_sizes[gpu_nbufs++] = bytes ? bytes : 4;
    return d;
}

/* Waits for the ops and returns a host copy of d's first bytes (freed by gpu_release too). */
static void *host_bufs[GPU_MAX];
static int host_nbufs;
static void *gpu_get_back(const void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 4);
    CHECK(gpu.k->sync(gpu.kctx) == 0);
    CHECK(device_d2h(&gpu, h, d, bytes) == 0);
    CHECK(host_nbufs < GPU_MAX);
    host_bufs[host_nbufs++] = h;
    return h;
}

static void gpu_release(void) {
    for (int i = 0; i < gpu_nbufs; i++) device_free(&gpu, gpu_bufs[i], gpu_sizes[i], MEM_ACTIVATIONS);
    for (int i = 0; i < host_nbufs; i++) free(host_bufs[i]);
    gpu_nbufs = host_nbufs = 0;
}

/* CUDA's result against the C twin's: relative to each value, or to floor (the result's RMS
 * when floor < 0) below it. Prints the error. */
static void check_close(const char *what, const float *got, const float *want, size_t n,
                        double floor) {
    double e = 0;
    if (floor < 0) floor = rms_f(want, n) > 1e-30 ? rms_f(want, n) : 1.0;
    for (size_t i = 0; i < n && e != INFINITY; i++)
        if (isnan(got[i]) != isnan(want[i])) e = INFINITY;
    if (e == 0) e = test_max_rel_err(got, want, n, floor);
    printf("  cuda %s vs C: max rel err %.2e\n", what, e);
    CHECK_MSG(e <= TOL_CUDA, "%s: max rel err %.3g > %.0e", what, e, TOL_CUDA);
}

static void check_same(const char *what, const void *got, const void *want, size_t bytes) {
    CHECK_MSG(memcmp(got, want, bytes) == 0, "%s: not bit for bit the C twin's", what);
}

static void test_cuda_gemm_strided_batched(void) {
    if (!gpu_get()) return;
    /* M, N, K, batch, A shared: attention's (T 64, D 16, 24 heads) and LeNet's conv (6 x 784 x 25) */
    static const int shapes[][5] = {{64, 64, 16, 24, 0}, {64, 16, 64, 24, 0}, {6, 784, 25, 8, 1},
                                    {1, 1, 1, 3, 0}, {33, 17, 9, 5, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], nb = shapes[s][3];
            int ta = t & 1, tb = t >> 1;
            int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 1;
            long long sa = shapes[s][4] ? 0 : (long long)(ta ? K : M) * lda;
            long long sb = (long long)(tb ? N : K) * ldb + 3, sc = (long long)M * ldc;
            size_t na = (size_t)(ta ? K : M) * lda * (shapes[s][4] ? 1 : nb), nbb = (size_t)nb * sb;
            size_t nc = (size_t)nb * sc;
            float *A = rnd_vec(na, -1, 1), *Bm = rnd_vec(nbb, -1, 1), *Cm = rnd_vec(nc, -1, 1);
            float *dA = gpu_put(A, na * 4), *dB = gpu_put(Bm, nbb * 4), *dC = gpu_put(Cm, nc * 4);
            CHECK(CPU->gemm_strided_batched(cpu_ctx, ta, tb, M, N, K, 0.7f, A, lda, sa, Bm, ldb, sb,
                                            0.3f, Cm, ldc, sc, nb) == 0);
            CHECK(gpu.k->gemm_strided_batched(gpu.kctx, ta, tb, M, N, K, 0.7f, dA, lda, sa, dB, ldb,
                                              sb, 0.3f, dC, ldc, sc, nb) == 0);
            char what[96];
            snprintf(what, sizeof what, "gemm_strided_batched %dx%dx%d x%d ta=%d tb=%d", M, N, K, nb,
                     ta, tb);
            check_close(what, gpu_get_back(dC, nc * 4), Cm, nc, -1);
            gpu_release();
            free(A), free(Bm), free(Cm);
        }
    float X[8] = {0};
    CHECK(gpu.k->gemm_strided_batched(gpu.kctx, 0, 0, 2, 2, 2, 1, X, 1, 4, X, 2, 4, 0, X, 2, 4, 1) ==
          RS_ERR_RUNTIME);
}

static void test_cuda_conv(void) {
    if (!gpu_get()) return;
    static const int geo[][7] = {{4, 1, 28, 28, 5, 1, 2}, {8, 6, 14, 14, 5, 1, 0},
                                 {2, 3, 9, 11, 3, 2, 1}};
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        ConvShape s = conv_shape(geo[g][0], geo[g][1], geo[g][2], geo[g][3], geo[g][4], geo[g][5],
                                 geo[g][6], 6);
        size_t nx = (size_t)s.B * s.C * s.H * s.W, ncol = (size_t)s.B * s.C * s.k * s.k * s.OH * s.OW;
        size_t ny = (size_t)s.B * s.C * s.OH * s.OW; /* channel bias over the col's channels */
        float *x = rnd_vec(nx, -1, 1), *dcol = rnd_vec(ncol, -1, 1), *bias = rnd_vec(s.C, -1, 1);
        float *col = malloc(ncol * 4), *dx = malloc(nx * 4), *db = malloc(s.C * 4);
        float *y = dup_vec(dcol, ny);
        float *gx = gpu_put(x, nx * 4), *gdcol = gpu_put(dcol, ncol * 4), *gb = gpu_put(bias, s.C * 4);
        float *gcol = gpu_put(NULL, ncol * 4), *gdx = gpu_put(NULL, nx * 4);
        float *gdb = gpu_put(NULL, s.C * 4);
        float *gdx2 = gpu_put(NULL, nx * 4), *gy = gpu_put(y, ny * 4);
        CPU->im2col(cpu_ctx, col, x, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        CPU->col2im(cpu_ctx, dx, dcol, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        CPU->channel_bias_forward(cpu_ctx, y, bias, s.B, s.C, s.OH * s.OW);
        CPU->channel_bias_backward(cpu_ctx, db, dcol, s.B, s.C, s.OH * s.OW);
        gpu.k->im2col(gpu.kctx, gcol, gx, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        gpu.k->col2im(gpu.kctx, gdx, gdcol, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        gpu.k->col2im(gpu.kctx, gdx2, gdcol, s.B, s.C, s.H, s.W, s.k, s.stride, s.pad);
        gpu.k->channel_bias_forward(gpu.kctx, gy, gb, s.B, s.C, s.OH * s.OW);
        gpu.k->channel_bias_backward(gpu.kctx, gdb, gdcol, s.B, s.C, s.OH * s.OW);
        check_same("im2col", gpu_get_back(gcol, ncol * 4), col, ncol * 4);
        const float *hdx = gpu_get_back(gdx, nx * 4);
        check_same("col2im (same order as C)", hdx, dx, nx * 4);
        check_same("col2im twice", gpu_get_back(gdx2, nx * 4), hdx, nx * 4);
        check_close("channel_bias_forward", gpu_get_back(gy, ny * 4), y, ny, 1.0);
        check_close("channel_bias_backward", gpu_get_back(gdb, s.C * 4), db, s.C, -1);
        gpu_release();
        free(x), free(dcol), free(bias), free(col), free(dx), free(db), free(y);
    }
}

static void test_cuda_maxpool(void) {
    if (!gpu_get()) return;
    const int N = 64 * 6, H = 28, W = 27;
    size_t nx = (size_t)N * H * W, ny = (size_t)N * (H / 2) * (W / 2);
    float *x = rnd_vec(nx, -1, 1), *dy = rnd_vec(ny, -1, 1), *y = malloc(ny * 4), *dx = malloc(nx * 4);
    x[0] = x[1] = x[W] = x[W + 1]; /* a tie */
    x[2 * W + 4] = NAN;
    int *am = malloc(ny * sizeof *am);
    float *gx = gpu_put(x, nx * 4), *gdy = gpu_put(dy, ny * 4), *gy = gpu_put(NULL, ny * 4);
    float *gdx = gpu_put(NULL, nx * 4);
    int *gam = gpu_put(NULL, ny * sizeof *am);
    CPU->maxpool2_forward(cpu_ctx, y, am, x, N, H, W);
    CPU->maxpool2_backward(cpu_ctx, dx, dy, am, NULL, N, H, W);
    gpu.k->maxpool2_forward(gpu.kctx, gy, gam, gx, N, H, W);
    gpu.k->maxpool2_backward(gpu.kctx, gdx, gdy, gam, NULL, N, H, W);
    check_same("maxpool2_forward", gpu_get_back(gy, ny * 4), y, ny * 4);
    check_same("maxpool2_forward argmax", gpu_get_back(gam, ny * sizeof *am), am, ny * sizeof *am);
    check_same("maxpool2_backward", gpu_get_back(gdx, nx * 4), dx, nx * 4);
    float *gdr = gpu_put(NULL, nx * 4); /* with the ReLU's mask over x */
    CPU->maxpool2_backward(cpu_ctx, dx, dy, am, x, N, H, W);
    gpu.k->maxpool2_backward(gpu.kctx, gdr, gdy, gam, gx, N, H, W);
    check_same("maxpool2_backward with the ReLU's mask", gpu_get_back(gdr, nx * 4), dx, nx * 4);
    gpu_release();
    free(x), free(dy), free(y), free(dx), free(am);
}

static void test_cuda_embedding(void) {
    if (!gpu_get()) return;
    static const int shapes[][4] = {{4, 200, 96, 1000}, {8, 300, 64, 256}, {2, 3, 5, 7}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], V = shapes[s][3], n = B * T;
        int *tok = rnd_tokens(n, V);
        for (int i = 0; i < n; i += 3) tok[i] = 1; /* a hot token */
        tok[n - 1] = V;                            /* one out of range */
        size_t nte = (size_t)V * C, npe = (size_t)T * C, no = (size_t)n * C;
        float *wte = rnd_vec(nte, -1, 1), *wpe = rnd_vec(npe, -1, 1), *dout = rnd_vec(no, -1, 1);
        float *out = malloc(no * 4), *dwte = rnd_vec(nte, -1, 1), *dwpe = malloc(npe * 4);
        float *gwte = gpu_put(wte, nte * 4), *gwpe = gpu_put(wpe, npe * 4);
        float *gdout = gpu_put(dout, no * 4), *gout = gpu_put(NULL, no * 4);
        float *gdwte = gpu_put(dwte, nte * 4), *gdwpe = gpu_put(NULL, npe * 4);
        int *gtok = gpu_put(tok, (size_t)n * sizeof *tok);
        CPU->embedding_forward(cpu_ctx, out, tok, wte, wpe, B, T, C, V);
        CPU->embedding_backward(cpu_ctx, dwte, dwpe, dout, tok, B, T, C, V);
        gpu.k->embedding_forward(gpu.kctx, gout, gtok, gwte, gwpe, B, T, C, V);
        gpu.k->embedding_backward(gpu.kctx, gdwte, gdwpe, gdout, gtok, B, T, C, V);
        check_same("embedding_forward", gpu_get_back(gout, no * 4), out, no * 4);
        check_same("embedding_backward dwte (position order)", gpu_get_back(gdwte, nte * 4), dwte,
                   nte * 4);
        check_same("embedding_backward dwpe", gpu_get_back(gdwpe, npe * 4), dwpe, npe * 4);
        gpu_release();
        free(tok), free(wte), free(wpe), free(dout), free(out), free(dwte), free(dwpe);
    }
}

static void test_cuda_layernorm(void) {
    if (!gpu_get()) return;
    static const int shapes[][2] = {{300, 768}, {7, 33}, {64, 64}, {5, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], C = shapes[s][1];
        size_t n = (size_t)N * C;
        float *x = rnd_vec(n, -2, 3), *g = rnd_vec(C, 0.5f, 1.5f), *b = rnd_vec(C, -1, 1);
        float *dout = rnd_vec(n, -1, 1), *dx = rnd_vec(n, -1, 1);
        float *out = malloc(n * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
        float *dg = malloc(C * 4), *db = malloc(C * 4);
        float *gx = gpu_put(x, n * 4), *gg = gpu_put(g, C * 4), *gb = gpu_put(b, C * 4);
        float *gdout = gpu_put(dout, n * 4), *gdx = gpu_put(dx, n * 4), *gout = gpu_put(NULL, n * 4);
        float *gmean = gpu_put(NULL, N * 4), *grstd = gpu_put(NULL, N * 4);
        float *gdg = gpu_put(NULL, C * 4), *gdb = gpu_put(NULL, C * 4), *gdg2 = gpu_put(NULL, C * 4);
        float *gdb2 = gpu_put(NULL, C * 4), *gdx2 = gpu_put(dx, n * 4);
        CPU->layernorm_forward(cpu_ctx, out, mean, rstd, x, g, b, N, C);
        CPU->layernorm_backward(cpu_ctx, dx, dg, db, dout, x, g, mean, rstd, N, C);
        gpu.k->layernorm_forward(gpu.kctx, gout, gmean, grstd, gx, gg, gb, N, C);
        gpu.k->layernorm_backward(gpu.kctx, gdx, gdg, gdb, gdout, gx, gg, gmean, grstd, N, C);
        gpu.k->layernorm_backward(gpu.kctx, gdx2, gdg2, gdb2, gdout, gx, gg, gmean, grstd, N, C);
        char what[64];
        snprintf(what, sizeof what, "layernorm %dx%d out", N, C);
        check_close(what, gpu_get_back(gout, n * 4), out, n, 1.0);
        check_close("layernorm mean", gpu_get_back(gmean, N * 4), mean, N, 1.0);
        check_close("layernorm rstd", gpu_get_back(grstd, N * 4), rstd, N, 1.0);
        const float *hdx = gpu_get_back(gdx, n * 4), *hdg = gpu_get_back(gdg, C * 4);
        const float *hdb = gpu_get_back(gdb, C * 4);
        check_close("layernorm dx", hdx, dx, n, -1);
        check_close("layernorm dgamma", hdg, dg, C, -1);
        check_close("layernorm dbeta", hdb, db, C, -1);
        check_same("layernorm backward twice", gpu_get_back(gdx2, n * 4), hdx, n * 4);
        check_same("layernorm dgamma twice", gpu_get_back(gdg2, C * 4), hdg, C * 4);
        check_same("layernorm dbeta twice", gpu_get_back(gdb2, C * 4), hdb, C * 4);
        gpu_release();
        free(x), free(g), free(b), free(dout), free(dx), free(out), free(mean), free(rstd);
        free(dg), free(db);
    }
}

static void test_cuda_elementwise(void) {
    if (!gpu_get()) return;
    /* more than the launchers' grid cap covers in one pass: the kernels must stride */
    const size_t n = ((size_t)1 << 24) + 4099;
    float *x = rnd_vec(n, -6, 6), *dy = rnd_vec(n, -1, 1), *y = malloc(n * 4), *dx = malloc(n * 4);
    float *s = malloc(n * 4);
    float *gx = gpu_put(x, n * 4), *gdy = gpu_put(dy, n * 4), *gy = gpu_put(NULL, n * 4);
    float *gs = gpu_put(NULL, n * 4);
    float *d = malloc(n * 4), *pr = malloc(n * 4), *gd = gpu_put(x, n * 4), *gpr = gpu_put(NULL, n * 4);
    CPU->gelu_forward(cpu_ctx, y, d, x, n);
    CPU->mul(cpu_ctx, dx, dy, d, n);
    CPU->add(cpu_ctx, s, x, dy, n);
    CPU->mul(cpu_ctx, pr, x, dy, n);
    gpu.k->gelu_forward(gpu.kctx, gy, gd, gd, n); /* the derivative over its input */
    gpu.k->add(gpu.kctx, gs, gx, gdy, n);
    gpu.k->mul(gpu.kctx, gpr, gx, gdy, n);
    gpu.k->mul(gpu.kctx, gdy, gdy, gd, n); /* out aliasing a */
    /* floor 1: expf differs by an ulp or two between libraries, which 1 - s magnifies */
    check_close("gelu_forward", gpu_get_back(gy, n * 4), y, n, 1.0);
    check_close("gelu derivative", gpu_get_back(gd, n * 4), d, n, 1.0);
    check_close("gelu dx", gpu_get_back(gdy, n * 4), dx, n, 1.0);
    check_same("add", gpu_get_back(gs, n * 4), s, n * 4);
    check_same("mul", gpu_get_back(gpr, n * 4), pr, n * 4);
    gpu_release();

    /* AdamW, three steps */
    const size_t m = 1000003;
    float *p = rnd_vec(m, -1, 1), *mo = rnd_vec(m, -0.1f, 0.1f), *v = rnd_vec(m, 0, 0.01f);
    float *gp = gpu_put(p, m * 4), *gm = gpu_put(mo, m * 4), *gv = gpu_put(v, m * 4);
    for (int t = 1; t <= 3; t++) {
        float *g = gpu_put(x + t, m * 4); /* a different gradient each step */
        CPU->adamw_step(cpu_ctx, p, x + t, mo, v, m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.25f, t);
        gpu.k->adamw_step(gpu.kctx, gp, g, gm, gv, m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.25f, t);
    }
    check_close("adamw_step param", gpu_get_back(gp, m * 4), p, m, 1.0);
    check_close("adamw_step m", gpu_get_back(gm, m * 4), mo, m, -1);
    check_close("adamw_step v", gpu_get_back(gv, m * 4), v, m, -1);
    gpu_release();
    free(x), free(dy), free(y), free(dx), free(s), free(d), free(pr), free(p), free(mo), free(v);
}

static void test_cuda_attention(void) {
    if (!gpu_get()) return;
    /* softmax alone at widths past one warp's stride, then the whole attention */
    static const int sm[][2] = {{24, 64}, {3, 257}, {2, 1}};
    for (size_t s = 0; s < sizeof sm / sizeof sm[0]; s++) {
        int BH = sm[s][0], T = sm[s][1];
        size_t n = (size_t)BH * T * T;
        float *S = rnd_vec(n, -8, 8), *dP = rnd_vec(n, -1, 1), *P = malloc(n * 4), *dS = malloc(n * 4);
        float *gS = gpu_put(S, n * 4), *gdP = gpu_put(dP, n * 4), *gP = gpu_put(NULL, n * 4);
        CPU->softmax_causal_forward(cpu_ctx, P, S, BH, T, 0.25f);
        CPU->softmax_causal_backward(cpu_ctx, dS, dP, P, BH, T, 0.25f);
        gpu.k->softmax_causal_forward(gpu.kctx, gP, gS, BH, T, 0.25f);
        gpu.k->softmax_causal_backward(gpu.kctx, gdP, gdP, gP, BH, T, 0.25f); /* in place */
        char what[64];
        snprintf(what, sizeof what, "softmax_causal %dx%d forward", BH, T);
        check_close(what, gpu_get_back(gP, n * 4), P, n, 1e-3);
        snprintf(what, sizeof what, "softmax_causal %dx%d backward", BH, T);
        check_close(what, gpu_get_back(gdP, n * 4), dS, n, -1);
        gpu_release();
        free(S), free(dP), free(P), free(dS);
    }

    const int B = 4, T = 64, H = 4, D = 16, C = H * D;
    size_t nqkv = (size_t)B * T * 3 * C, ny = (size_t)B * T * C;
    size_t td = (size_t)B * H * T * D, tt = (size_t)B * H * T * T;
    float *qkv = rnd_vec(nqkv, -1, 1), *dy = rnd_vec(ny, -1, 1), *y = malloc(ny * 4);
    float *dqkv = malloc(nqkv * 4);
    Attn a = attn_alloc(B, T, H, D);
    attn_forward(CPU, cpu_ctx, &a, qkv, y);
    attn_backward(CPU, cpu_ctx, &a, dy, dqkv);
    Attn ga = {B, T, H, D, gpu_put(NULL, 3 * td * 4), gpu_put(NULL, tt * 4), gpu_put(NULL, tt * 4),
               gpu_put(NULL, td * 4), gpu_put(NULL, td * 4), gpu_put(NULL, 3 * td * 4),
               gpu_put(NULL, tt * 4)};
    float *gqkv = gpu_put(qkv, nqkv * 4), *gdy = gpu_put(dy, ny * 4), *gy = gpu_put(NULL, ny * 4);
    float *gdqkv = gpu_put(NULL, nqkv * 4);
    attn_forward(gpu.k, gpu.kctx, &ga, gqkv, gy);
    attn_backward(gpu.k, gpu.kctx, &ga, gdy, gdqkv);
    check_same("heads_split", gpu_get_back(ga.qkvh, 3 * td * 4), a.qkvh, 3 * td * 4);
    check_close("attention forward", gpu_get_back(gy, ny * 4), y, ny, -1);
    check_close("attention dqkv", gpu_get_back(gdqkv, nqkv * 4), dqkv, nqkv, -1);
    gpu_release();
    attn_free(&a);
    free(qkv), free(dy), free(y), free(dqkv);
}

static void test_cuda_empty(void) {
    if (!gpu_get()) return;
    empty_ops(gpu.k, gpu.kctx);
}

/* ops_expf against glibc's expf: within 2 ulp over every 97th float of [-104, 89] (both signs,
 * every exponent, the subnormal results included), 0 and Inf at and beyond the ends, NaN kept. */
static void test_cpu_expf(void) {
    uint32_t worst_bits = 0;
    long long worst = 0, n = 0;
    const uint32_t ends[2][2] = {{0x00000000u, 0x42B20000u}, {0x80000000u, 0xC2D00000u}}; /* [0, 89], [-0, -104] */
    for (int side = 0; side < 2; side++)
        for (uint64_t u = ends[side][0]; u <= ends[side][1]; u += 97) {
            uint32_t b = (uint32_t)u;
            float x, got, want;
            memcpy(&x, &b, sizeof x);
            got = ops_expf(x);
            want = expf(x);
            int32_t gb, wb;
            memcpy(&gb, &got, sizeof gb);
            memcpy(&wb, &want, sizeof wb);
            long long d = llabs((long long)gb - wb); /* both >= +0: ulps apart, subnormals included */
            if (d > worst) worst = d, worst_bits = b;
            n++;
        }
    float wx;
    memcpy(&wx, &worst_bits, sizeof wx);
    CHECK_MSG(worst <= 2, "ops_expf is %lld ulp from expf at %a (%lld values)", worst, (double)wx, n);
    printf("  ops_expf: at most %lld ulp from glibc's expf over %lld values (worst at %a)\n", worst, n, (double)wx);
    CHECK(ops_expf(0.0f) == 1.0f && ops_expf(-0.0f) == 1.0f);
    CHECK(ops_expf(89.0f) == INFINITY && ops_expf(88.73f) == INFINITY && ops_expf(INFINITY) == INFINITY);
    CHECK(ops_expf(88.72f) < INFINITY && ops_expf(88.72f) == expf(88.72f));
    CHECK(ops_expf(-104.0f) == 0.0f && ops_expf(-1e30f) == 0.0f && ops_expf(-INFINITY) == 0.0f);
    CHECK(ops_expf(-100.0f) > 0.0f && ops_expf(-100.0f) < 1.2e-38f); /* a subnormal result */
    CHECK(isnan(ops_expf(NAN)) && isnan(ops_expf(-NAN)));
}

int main(void) {
    cpu_ctx = CPU->ctx_create(NULL);
    kernels_cpu_set_threads(1);
    RUN(test_cpu_gemm_strided_batched);
    RUN(test_cpu_conv);
    RUN(test_cpu_maxpool);
    RUN(test_cpu_embedding);
    RUN(test_cpu_layernorm);
    RUN(test_cpu_expf);
    RUN(test_cpu_gelu);
    RUN(test_cpu_softmax_causal);
    RUN(test_cpu_heads);
    RUN(test_cpu_attention);
    RUN(test_cpu_add);
    RUN(test_cpu_mul);
    RUN(test_cpu_adamw);
    RUN(test_cpu_threads);
    RUN(test_cpu_threads_fork);
    RUN(test_cpu_empty);
    RUN(test_lazy_wrappers);

    RUN(test_cuda_gemm_strided_batched);
    RUN(test_cuda_conv);
    RUN(test_cuda_maxpool);
    RUN(test_cuda_embedding);
    RUN(test_cuda_layernorm);
    RUN(test_cuda_elementwise);
    RUN(test_cuda_attention);
    RUN(test_cuda_empty);

    if (gpu_state == 1) device_close(&gpu);
    CPU->ctx_destroy(cpu_ctx);
    return test_summary("test_ops_nn");
}
