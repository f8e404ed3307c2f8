/* ops_cpu.c - the model's math in plain C: the twin every CUDA kernel is tested against */
#include "ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "../common/clock.h"
#include "../common/err.h"

/* Seconds this process has spent inside cblas_sgemm (the GEMM share of a step). */
static _Thread_local double cpu_gemm_seconds;

/* On the CPU a context only remembers its (unused) stream: every op is done when it returns. */
struct KernelCtx {
    void *stream;
};

static KernelCtx *cpu_ctx_create(void *stream) {
    KernelCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        rs_error(RS_ERR_RUNTIME, "kernels cpu: out of host memory for a context");
        return NULL;
    }
    ctx->stream = stream;
    return ctx;
}

static void cpu_ctx_destroy(KernelCtx *ctx) { free(ctx); }

/* Checks the shapes and strides of a row-major GEMM the way BLAS would, but as a status
 * instead of BLAS's own error printout. Returns 0 when they are valid, else RS_ERR_RUNTIME. */
static int cpu_gemm_check(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc) {
    int a_cols = ta ? M : K, b_cols = tb ? K : N;
    if (M < 0 || N < 0 || K < 0 || lda < (a_cols > 1 ? a_cols : 1) ||
        ldb < (b_cols > 1 ? b_cols : 1) || ldc < (N > 1 ? N : 1))
        return rs_error(RS_ERR_RUNTIME,
                        "gemm: bad shape M=%d N=%d K=%d (trans %d,%d) with lda=%d ldb=%d ldc=%d",
                        M, N, K, ta, tb, lda, ldb, ldc);
    return 0;
}

static int cpu_gemm(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc) {
    RS_TRY(cpu_gemm_check(trans_a, trans_b, M, N, K, lda, ldb, ldc));
    if (M == 0 || N == 0) return 0;
    double t0 = clock_now();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    cpu_gemm_seconds += clock_now() - t0;
    return 0;
}

static void cpu_bias_forward(KernelCtx *ctx, float *Y, const float *b, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) Y[(size_t)r * cols + c] += b[c];
}

/* Sums down each column in row order: the order the CUDA kernel uses too. */
static void cpu_bias_backward(KernelCtx *ctx, float *db, const float *dY, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    for (int c = 0; c < cols; c++) db[c] = 0.0f;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) db[c] += dY[(size_t)r * cols + c];
}

static void cpu_relu_forward(KernelCtx *ctx, float *Y, const float *X, size_t n) {
    for (size_t i = 0; i < n; i++) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
}

static void cpu_relu_backward(KernelCtx *ctx, float *dX, const float *dY, const float *Y,
                              size_t n) {
    for (size_t i = 0; i < n; i++) dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}

/* Per row: max and first argmax, then the sum of exp(x - max) (in double, then rounded to
 * float), then the loss and the gradient. A label outside [0, cols) makes the loss NaN, so that bad data cannot pass
 * unnoticed. The per-row losses are summed in double and added to stats[0] once. */
static void cpu_softmax_xent(KernelCtx *ctx, const float *logits, const int *labels, int rows,
                             int cols, float *dlogits, float *stats) {
    if (rows <= 0 || cols <= 0) return;
    double loss_sum = 0.0;
    int correct = 0;
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (size_t)r * cols;
        float *dx = dlogits + (size_t)r * cols;
        int label = labels[r];
        float m = x[0];
        int arg = 0;
        for (int c = 1; c < cols; c++)
            if (x[c] > m) {
                m = x[c];
                arg = c;
            }
        double sum = 0.0; /* exact enough for any width: the reference for CUDA's tree sum */
        for (int c = 0; c < cols; c++) sum += expf(x[c] - m);
        float s = (float)sum;
        int valid = label >= 0 && label < cols;
        loss_sum += valid ? (double)(logf(s) - (x[label] - m)) : (double)NAN;
        correct += valid && arg == label;
        for (int c = 0; c < cols; c++) dx[c] = expf(x[c] - m) / s - (c == label ? 1.0f : 0.0f);
    }
    stats[0] += (float)loss_sum;
    stats[1] += (float)correct;
}

static void cpu_sgd_step(KernelCtx *ctx, float *param, const float *grad, float *mom, size_t n,
                         float lr, float momentum, float weight_decay, float grad_scale) {
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale + weight_decay * param[i];
        float m = momentum * mom[i] + g;
        mom[i] = m;
        param[i] -= lr * m;
    }
}

static void cpu_scale(KernelCtx *ctx, float *x, float a, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

static void cpu_axpy(KernelCtx *ctx, float *y, float a, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void cpu_fill(KernelCtx *ctx, float *x, float v, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static int cpu_sync(KernelCtx *ctx) { return 0; }

static const KernelOps cpu_ops = {
    .name = "cpu",
    .ctx_create = cpu_ctx_create,
    .ctx_destroy = cpu_ctx_destroy,
    .gemm = cpu_gemm,
    .bias_forward = cpu_bias_forward,
    .bias_backward = cpu_bias_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_step = cpu_sgd_step,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .fill = cpu_fill,
    .sync = cpu_sync,
};

/* The plain-C table. Never NULL. */
const KernelOps *kernels_cpu(void) { return &cpu_ops; }

/* Sets OpenBLAS's thread count when n > 0; n <= 0 leaves the library's default. */
void kernels_cpu_set_threads(int n) {
    if (n > 0) openblas_set_num_threads(n);
}

/* Seconds the calling thread has spent in GEMM since it started. */
double kernels_cpu_gemm_seconds(void) { return cpu_gemm_seconds; }
