/* ops.h - the model's math as one table of operations, implemented for the CPU and for CUDA */
#ifndef RS_OPS_H
#define RS_OPS_H

#include <stddef.h>

/* ---- Types ---- */

/* Per-device execution context: the stream the ops run on and library handles (cuBLAS).
 * Created by the table's ctx_create; opaque to callers. */
typedef struct KernelCtx KernelCtx;

/* All matrices are row-major, fp32, and live in the memory of the table's device.
 * Every op is asynchronous with respect to the host on CUDA (ordered on the ctx's stream);
 * on the CPU it is done when it returns. Ops with n == 0 or rows == 0 do nothing. */
typedef struct KernelOps {
    const char *name; /* "cpu" or "cuda" */

    /* Creates a context bound to stream (a cudaStream_t, or NULL for the default/CPU).
     * Returns NULL on failure with rs_errmsg() set. */
    KernelCtx *(*ctx_create)(void *stream);
    void (*ctx_destroy)(KernelCtx *ctx);

    /* C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C; op(X) = X^T when trans_X != 0.
     * lda/ldb/ldc are row strides of A, B, C as stored. Returns 0, or RS_ERR_RUNTIME. */
    int (*gemm)(KernelCtx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* Y[r,c] += b[c] */
    void (*bias_forward)(KernelCtx *ctx, float *Y, const float *b, int rows, int cols);
    /* db[c] = sum_r dY[r,c]  (overwrites db) */
    void (*bias_backward)(KernelCtx *ctx, float *db, const float *dY, int rows, int cols);
    /* Y = max(X, 0); Y may alias X */
    void (*relu_forward)(KernelCtx *ctx, float *Y, const float *X, size_t n);
    /* dX = dY where Y > 0, else 0; dX may alias dY */
    void (*relu_backward)(KernelCtx *ctx, float *dX, const float *dY, const float *Y, size_t n);

    /* Softmax cross-entropy over rows of logits[rows,cols] with integer labels[rows].
     * Writes dlogits = softmax(logits) - onehot(label) (gradient of the summed loss),
     * and adds to stats[0] the summed loss and to stats[1] the number of rows whose
     * argmax equals the label. dlogits may alias logits. labels and stats are device memory. */
    void (*softmax_xent)(KernelCtx *ctx, const float *logits, const int *labels, int rows,
                         int cols, float *dlogits, float *stats);

    /* SGD with momentum and weight decay, PyTorch's rule:
     *   g = grad * grad_scale + weight_decay * param;  mom = momentum * mom + g;  param -= lr * mom */
    void (*sgd_step)(KernelCtx *ctx, float *param, const float *grad, float *mom, size_t n,
                     float lr, float momentum, float weight_decay, float grad_scale);

    /* x *= a */
    void (*scale)(KernelCtx *ctx, float *x, float a, size_t n);
    /* y += a * x */
    void (*axpy)(KernelCtx *ctx, float *y, float a, const float *x, size_t n);
    /* x[i] = v */
    void (*fill)(KernelCtx *ctx, float *x, float v, size_t n);

    /* Blocks until every op issued on ctx is complete. Returns 0 or RS_ERR_RUNTIME. */
    int (*sync)(KernelCtx *ctx);
} KernelOps;

/* ---- Prototypes ---- */

/* The plain-C table (cblas_sgemm for GEMM). Never NULL. */
const KernelOps *kernels_cpu(void);

/* The CUDA table (cuBLAS for GEMM); NULL in a build without CUDA. */
const KernelOps *kernels_cuda(void);

/* Sets the number of BLAS threads the CPU table uses (0: leave the library's default). */
void kernels_cpu_set_threads(int n);

/* Seconds the calling thread has spent inside the CPU table's GEMM (cblas_sgemm) so far. */
double kernels_cpu_gemm_seconds(void);

#endif
